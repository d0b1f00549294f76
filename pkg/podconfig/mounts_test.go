package podconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Rows of kubelet's TestMakeMounts and TestMakeMountsEtcHostsFile, and
// kuberuntime's TestMakeMounts (termination log, SELinux).
func TestMounts(t *testing.T) {
	private := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	vols := map[string]Volume{
		"disk":  {HostPath: "/mnt/disk"},
		"disk4": {HostPath: "/mnt/host"},
		"disk5": {HostPath: "/var/lib/kubelet/podID/volumes/empty/disk5", SELinuxRelabel: true},
		"dapi":  {HostPath: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~downward-api/dapi", ReadOnly: true, SELinuxRelabel: true},
		"img":   {Image: &runtimeapi.ImageSpec{Image: "image1"}},
	}
	hosts := &runtimeapi.Mount{HostPath: "/var/lib/kubelet/pods/u/etc-hosts", ContainerPath: "/etc/hosts", Propagation: private}
	for _, tc := range []struct {
		name     string
		mounts   []corev1.VolumeMount
		env      []corev1.EnvVar
		podIPs   []string
		hostNet  bool
		node     Node
		subPaths map[int]string
		termPath string
		want     []*runtimeapi.Mount
		err      string
	}{
		{name: "valid mounts", podIPs: []string{"10.0.0.1"}, mounts: []corev1.VolumeMount{
			{MountPath: "/etc/hosts", Name: "disk", MountPropagation: ptr(corev1.MountPropagationHostToContainer)},
			{MountPath: "/mnt/path3", Name: "disk", ReadOnly: true, MountPropagation: ptr(corev1.MountPropagationNone)},
			{MountPath: "/mnt/path4", Name: "disk4"},
			{MountPath: "/mnt/path5", Name: "disk5"},
		}, want: []*runtimeapi.Mount{
			{ContainerPath: "/etc/hosts", HostPath: "/mnt/disk", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			{ContainerPath: "/mnt/path3", HostPath: "/mnt/disk", Readonly: true, Propagation: private},
			{ContainerPath: "/mnt/path4", HostPath: "/mnt/host", Propagation: private},
			{ContainerPath: "/mnt/path5", HostPath: "/var/lib/kubelet/podID/volumes/empty/disk5", Propagation: private},
		}},
		{name: "bidirectional", mounts: []corev1.VolumeMount{{MountPath: "/m", Name: "disk", MountPropagation: ptr(corev1.MountPropagationBidirectional)}},
			want: []*runtimeapi.Mount{{ContainerPath: "/m", HostPath: "/mnt/disk", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}}},
		{name: "invalid propagation", mounts: []corev1.VolumeMount{{MountPath: "/m", Name: "disk", MountPropagation: ptr(corev1.MountPropagationMode("invalid"))}},
			err: `invalid MountPropagation mode: "invalid"`},
		{name: "relative container path", mounts: []corev1.VolumeMount{{MountPath: "rel/../dir", Name: "disk"}},
			want: []*runtimeapi.Mount{{ContainerPath: "/dir", HostPath: "/mnt/disk", Propagation: private}}},
		{name: "read-only volume", mounts: []corev1.VolumeMount{{MountPath: "/info", Name: "dapi"}},
			want: []*runtimeapi.Mount{{ContainerPath: "/info", HostPath: vols["dapi"].HostPath, Readonly: true, Propagation: private}}},
		{name: "SELinux relabel only on an SELinux node", node: Node{SELinuxEnabled: true}, mounts: []corev1.VolumeMount{{MountPath: "/a", Name: "disk5"}, {MountPath: "/b", Name: "disk"}},
			want: []*runtimeapi.Mount{{ContainerPath: "/a", HostPath: vols["disk5"].HostPath, SelinuxRelabel: true, Propagation: private}, {ContainerPath: "/b", HostPath: "/mnt/disk", Propagation: private}}},
		{name: "subPath", mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPath: "a/b"}},
			want: []*runtimeapi.Mount{{ContainerPath: "/s", HostPath: "/mnt/disk/a/b", Propagation: private}}},
		{name: "subPath bind-mounted by the host side", mounts: []corev1.VolumeMount{{MountPath: "/x", Name: "disk"}, {MountPath: "/s", Name: "disk", SubPath: "a"}},
			subPaths: map[int]string{1: "/var/lib/kubelet/pods/u/volume-subpaths/disk/c/1"},
			want:     []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: "/mnt/disk", Propagation: private}, {ContainerPath: "/s", HostPath: "/var/lib/kubelet/pods/u/volume-subpaths/disk/c/1", Propagation: private}}},
		{name: "subPathExpr", env: []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "y"}},
			mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPathExpr: "$(A)/$(B)-$$(A)"}},
			want:   []*runtimeapi.Mount{{ContainerPath: "/s", HostPath: "/mnt/disk/x/y-$(A)", Propagation: private}}},
		{name: "subPathExpr missing values", env: []corev1.EnvVar{{Name: "EMPTY"}},
			mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPathExpr: "$(Z)/$(EMPTY)/$(A)"}},
			err:    "missing value for A, EMPTY, Z"},
		{name: "absolute subPath", mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPath: "/etc"}},
			err: "error SubPath `/etc` must not be an absolute path"},
		{name: "absolute subPathExpr", env: []corev1.EnvVar{{Name: "P", Value: "/etc"}}, mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPathExpr: "$(P)"}},
			err: "error SubPath `/etc` must not be an absolute path"},
		{name: "subPath with backsteps", mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "disk", SubPath: "no/backsteps/../allowed"}},
			err: "unable to provision SubPath `no/backsteps/../allowed`: must not contain '..'"},
		{name: "volume missing", mounts: []corev1.VolumeMount{{MountPath: "/s", Name: "nope"}},
			err: `cannot find volume "nope" to mount into container "c"`},
		{name: "image volume", mounts: []corev1.VolumeMount{{MountPath: "/img", Name: "img", SubPath: "bin"}},
			want: []*runtimeapi.Mount{{ContainerPath: "/img", Image: &runtimeapi.ImageSpec{Image: "image1"}, ImageSubPath: "bin", Propagation: private}}},
		{name: "recursive read-only if possible, unsupported", mounts: []corev1.VolumeMount{{MountPath: "/r", Name: "disk", ReadOnly: true, RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyIfPossible)}},
			want: []*runtimeapi.Mount{{ContainerPath: "/r", HostPath: "/mnt/disk", Readonly: true, Propagation: private}}},
		{name: "recursive read-only if possible, supported", node: Node{RuntimeSupportsRRO: true}, mounts: []corev1.VolumeMount{{MountPath: "/r", Name: "disk", ReadOnly: true, RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyIfPossible)}},
			want: []*runtimeapi.Mount{{ContainerPath: "/r", HostPath: "/mnt/disk", Readonly: true, RecursiveReadOnly: true, Propagation: private}}},
		{name: "recursive read-only enabled, unsupported", mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/r", ReadOnly: true, RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyEnabled)}},
			err: `failed to resolve recursive read-only mode: volume "disk" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "recursive read-only on a writable mount", node: Node{RuntimeSupportsRRO: true}, mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/r", RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyEnabled)}},
			err: `failed to resolve recursive read-only mode: volume "disk" requested recursive read-only mode, but it is not read-only`},
		{name: "recursive read-only with propagation", node: Node{RuntimeSupportsRRO: true}, mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/r", ReadOnly: true,
			RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyEnabled), MountPropagation: ptr(corev1.MountPropagationHostToContainer)}},
			err: `failed to resolve recursive read-only mode: volume "disk" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
		{name: "hosts file once the pod has an IP", podIPs: []string{"10.0.0.1"}, want: []*runtimeapi.Mount{hosts}},
		{name: "no hosts file before the pod has an IP"},
		{name: "hosts file on the host network", hostNet: true, want: []*runtimeapi.Mount{hosts}},
		{name: "hosts file relabelled on an SELinux node", podIPs: []string{"10.0.0.1"}, node: Node{SELinuxEnabled: true},
			want: []*runtimeapi.Mount{{HostPath: hosts.HostPath, ContainerPath: "/etc/hosts", Propagation: private, SelinuxRelabel: true}}},
		{name: "termination log", podIPs: []string{"10.0.0.1"}, termPath: "/var/lib/kubelet/pods/u/containers/c/0a1b2c3d",
			want: []*runtimeapi.Mount{hosts, {HostPath: "/var/lib/kubelet/pods/u/containers/c/0a1b2c3d", ContainerPath: "/dev/termination-log"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Spec: corev1.PodSpec{HostNetwork: tc.hostNet}}
			c := &corev1.Container{Name: "c", VolumeMounts: tc.mounts, TerminationMessagePath: "/dev/termination-log"}
			var env []EnvVar
			for _, e := range tc.env {
				env = append(env, EnvVar{e.Name, e.Value})
			}
			in := ContainerInput{Pod: pod, Container: c, PodIPs: tc.podIPs, Volumes: vols, SubPaths: tc.subPaths, TerminationMessageHostPath: tc.termPath}
			got, err := mounts(in, tc.node, env)
			if tc.err != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Message != tc.err {
					t.Errorf("error %v\nwant ConfigError %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("mount %d: got %v\nwant %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestVolumeFor(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	node := Node{RootDir: "/k"}
	for _, tc := range []struct {
		src  corev1.VolumeSource
		want Volume
		ok   bool
	}{
		{corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, Volume{HostPath: "/k/pods/u/volumes/kubernetes.io~empty-dir/v", SELinuxRelabel: true}, true},
		{corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/"}}, Volume{HostPath: "/var/log/"}, true},
		{corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}, Volume{HostPath: "/k/pods/u/volumes/kubernetes.io~downward-api/v", ReadOnly: true, SELinuxRelabel: true}, true},
		{corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}, Volume{HostPath: "/k/pods/u/volumes/kubernetes.io~projected/v", ReadOnly: true, SELinuxRelabel: true}, true},
		{corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}, Volume{}, false},
	} {
		got, ok := VolumeFor(pod, &corev1.Volume{Name: "v", VolumeSource: tc.src}, node)
		if ok != tc.ok || got != tc.want {
			t.Errorf("VolumeFor(%+v) = %+v %v, want %+v %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}

// SubPathMounts is makeMounts up to PrepareSafeSubpath: the subPaths the
// host side prepares, and kubelet's first error with the subPaths kubelet
// prepared before it.
func TestSubPathMounts(t *testing.T) {
	vols := map[string]Volume{
		"disk": {HostPath: "/mnt/disk"},
		"img":  {Image: &runtimeapi.ImageSpec{Image: "image1"}},
	}
	for _, tc := range []struct {
		name     string
		mounts   []corev1.VolumeMount
		env      []corev1.EnvVar
		hostname string
		node     Node
		want     []SubPathMount
		err      string
	}{
		{name: "none", mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/d"}}},
		{name: "subPath and subPathExpr", env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
			mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/d"}, {Name: "disk", MountPath: "/a", SubPath: "a/b"}, {Name: "disk", MountPath: "/l", SubPathExpr: "logs/$(POD)"}},
			want:   []SubPathMount{{Index: 1, Volume: "disk", VolumeHostPath: "/mnt/disk", SubPath: "a/b"}, {Index: 2, Volume: "disk", VolumeHostPath: "/mnt/disk", SubPath: "logs/web"}}},
		{name: "image volume's subPath is the runtime's", mounts: []corev1.VolumeMount{{Name: "img", MountPath: "/i", SubPath: "bin"}}},
		{name: "refused after one to prepare", mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/a", SubPath: "a"}, {Name: "disk", MountPath: "/b", SubPath: "../b"}},
			want: []SubPathMount{{Index: 0, Volume: "disk", VolumeHostPath: "/mnt/disk", SubPath: "a"}},
			err:  "unable to provision SubPath `../b`: must not contain '..'"},
		// Kubelet prepares a subPath before it resolves the mount's
		// propagation: the mount that fails there is listed.
		{name: "propagation fails after the subPath", mounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/a", SubPath: "a", MountPropagation: ptr(corev1.MountPropagationMode("bad"))}},
			want: []SubPathMount{{Index: 0, Volume: "disk", VolumeHostPath: "/mnt/disk", SubPath: "a"}},
			err:  `invalid MountPropagation mode: "bad"`},
		{name: "missing volume", mounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/a", SubPath: "a"}},
			err: `cannot find volume "nope" to mount into container "c"`},
		{name: "environment first", env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
			mounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/a"}},
			err:    "couldn't get secret ns/s, no kubeClient defined"},
		{name: "hostname before all", hostname: "Not_A_Label", mounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/a"}},
			err: `pod Hostname "Not_A_Label" is not a valid DNS label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u"},
				Spec: corev1.PodSpec{Hostname: tc.hostname, EnableServiceLinks: ptr(true)}}
			c := &corev1.Container{Name: "c", VolumeMounts: tc.mounts, Env: tc.env}
			got, err := SubPathMounts(ContainerInput{Pod: pod, Container: c, Volumes: vols}, tc.node)
			if tc.err != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message, tc.err) {
					t.Errorf("error %v\nwant ConfigError %s", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestConfigErrorUnwrap(t *testing.T) {
	detail := errors.New("detail")
	err := error(&ConfigError{Message: "kubelet's text", Err: detail})
	if err.Error() != "kubelet's text" || !errors.Is(err, detail) {
		t.Errorf("%v: the message only, the detail unwrapped", err)
	}
}
