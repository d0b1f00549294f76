package podconfig

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Rows of kuberuntime's TestVerifyRunAsNonRoot, through getImageUser as
// generateContainerConfig calls it (an image with neither UID nor user
// name runs as root).
func TestVerifyRunAsNonRoot(t *testing.T) {
	root, anyUser, invalid, negative := int64(0), int64(1000), int64(math.MaxInt32+1), int64(-1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "12345678"}}
	for _, tc := range []struct {
		desc  string
		sc    *corev1.SecurityContext
		image ImageInfo
		err   string
	}{
		{"no security context", nil, ImageInfo{UID: &root}, ""},
		{"runAsUser non-root", &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: &anyUser}, ImageInfo{}, ""},
		{"runAsNonRoot unset", &corev1.SecurityContext{RunAsUser: &root}, ImageInfo{UID: &root}, ""},
		{"runAsNonRoot false, image root", &corev1.SecurityContext{RunAsNonRoot: ptr(false)}, ImageInfo{UID: &root}, ""},
		{"runAsNonRoot false, runAsUser root", &corev1.SecurityContext{RunAsNonRoot: ptr(false), RunAsUser: &root}, ImageInfo{UID: &root}, ""},
		{"runAsUser root", &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: &root}, ImageInfo{UID: &root},
			`container's runAsUser breaks non-root policy (pod: "p_ns(12345678)", container: c)`},
		{"image root", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{UID: &root},
			`container has runAsNonRoot and image will run as root (pod: "p_ns(12345678)", container: c)`},
		{"image user name", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{Username: "test"},
			`container has runAsNonRoot and image has non-numeric user (test), cannot verify user is non-root (pod: "p_ns(12345678)", container: c)`},
		{"image non-root", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{UID: &anyUser}, ""},
		{"image without user runs as root", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{},
			`container has runAsNonRoot and image will run as root (pod: "p_ns(12345678)", container: c)`},
		{"image user invalid", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{UID: &invalid},
			`container has runAsNonRoot and image has an invalid user id (2147483648). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: "p_ns(12345678)", container: c)`},
		{"image user negative", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, ImageInfo{UID: &negative},
			`container has runAsNonRoot and image has an invalid user id (-1). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: "p_ns(12345678)", container: c)`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := &corev1.Container{Name: "c", SecurityContext: tc.sc}
			err := verifyRunAsNonRoot(pod, c, tc.image)
			if tc.err == "" {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Message != tc.err {
				t.Errorf("error %v\nwant %s", err, tc.err)
			}
		})
	}
	// The pod's runAsNonRoot applies unless the container says otherwise.
	podLevel := pod.DeepCopy()
	podLevel.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	if err := verifyRunAsNonRoot(podLevel, &corev1.Container{Name: "c"}, ImageInfo{UID: &root}); err == nil {
		t.Error("the pod's runAsNonRoot is ignored")
	}
	if err := verifyRunAsNonRoot(podLevel, &corev1.Container{Name: "c", SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(false)}}, ImageInfo{UID: &root}); err != nil {
		t.Errorf("the container's runAsNonRoot false: %v", err)
	}
}

// Rows of kuberuntime's TestFieldProfile and TestGetSeccompProfile.
func TestSeccompProfile(t *testing.T) {
	local := func(name string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}
	}
	unconfined := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	for _, tc := range []struct {
		name    string
		pod     *corev1.PodSecurityContext
		c       *corev1.SecurityContext
		node    Node
		want    *runtimeapi.SecurityProfile
		wantErr string
	}{
		{"nothing", nil, nil, Node{}, unconfined, ""},
		{"nothing under seccompDefault", nil, nil, Node{SeccompDefault: true}, runtimeDefault, ""},
		{"pod runtime default", &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}, nil, Node{}, runtimeDefault, ""},
		{"pod unconfined under seccompDefault", &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, nil, Node{SeccompDefault: true}, unconfined, ""},
		{"container over pod", &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			&corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, Node{}, unconfined, ""},
		{"localhost", nil, &corev1.SecurityContext{SeccompProfile: local("filename")}, Node{},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/filename"}, ""},
		{"localhost under another root", &corev1.PodSecurityContext{SeccompProfile: local("profiles/a.json")}, nil, Node{RootDir: "/k"},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/k/seccomp/profiles/a.json"}, ""},
		{"localhost without a profile", nil, &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}, Node{},
			nil, "localhostProfile must be set if seccompProfile type is Localhost."},
		{"localhost with an empty profile", nil, &corev1.SecurityContext{SeccompProfile: local("")}, Node{},
			nil, "localhostProfile must be set if seccompProfile type is Localhost."},
		{"unknown type", nil, &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: "Bogus"}}, Node{SeccompDefault: true}, unconfined, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := seccompProfile(tc.pod, tc.c, tc.node)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !proto.Equal(got, tc.want) {
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// Rows of kuberuntime's TestGetAppArmorProfile.
func TestAppArmorProfile(t *testing.T) {
	local := "my-profile"
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		pod, c      *corev1.AppArmorProfile
		want        *runtimeapi.SecurityProfile
		deprecated  string
		err         string
	}{
		{name: "none"},
		{name: "container runtime default", c: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, deprecated: "runtime/default"},
		{name: "pod unconfined", pod: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, deprecated: "unconfined"},
		{name: "localhost", c: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &local},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: local}, deprecated: "localhost/" + local},
		{name: "localhost without a name", c: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}, err: "missing localhost apparmor profile name"},
		{name: "unknown type", c: &corev1.AppArmorProfile{Type: "Bogus"}, err: `unknown apparmor profile type: "Bogus"`},
		{name: "annotation over pod field", annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "localhost/x"},
			pod:  &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "x"}, deprecated: "localhost/x"},
		{name: "container field over annotation", annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "unconfined"},
			c:    &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, deprecated: "runtime/default"},
		{name: "invalid annotation ignored", annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "bogus"}},
		{name: "another container's annotation", annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/d": "unconfined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: tc.pod}}}
			c := &corev1.Container{Name: "c", SecurityContext: &corev1.SecurityContext{AppArmorProfile: tc.c}}
			got, dep, err := appArmorProfile(pod, c)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !proto.Equal(got, tc.want) || dep != tc.deprecated {
				t.Errorf("got %v %q %v, want %v %q", got, dep, err, tc.want, tc.deprecated)
			}
		})
	}
}

// Rows of kuberuntime util's TestNamespacesForPod.
func TestNamespaceOptions(t *testing.T) {
	node := runtimeapi.NamespaceMode_NODE
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want *runtimeapi.NamespaceOption
		err  bool
	}{
		{"defaults", corev1.PodSpec{}, &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}, false},
		{"host namespaces", corev1.PodSpec{HostIPC: true, HostNetwork: true, HostPID: true},
			&runtimeapi.NamespaceOption{Ipc: node, Network: node, Pid: node}, false},
		{"shared PID", corev1.PodSpec{ShareProcessNamespace: ptr(true)},
			&runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD}, false},
		{"host PID wins over shared", corev1.PodSpec{HostPID: true, ShareProcessNamespace: ptr(true)},
			&runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: node}, false},
		{"hostUsers true", corev1.PodSpec{HostUsers: ptr(true)}, &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}, false},
		{"hostUsers false", corev1.PodSpec{HostUsers: ptr(false)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := namespaceOptions(&corev1.Pod{Spec: tc.spec})
			if tc.err {
				if err == nil {
					t.Error("no error")
				}
				return
			}
			tc.want.UsernsOptions = &runtimeapi.UserNamespace{Mode: node}
			if err != nil || !proto.Equal(got, tc.want) {
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// Rows of pkg/securitycontext's TestDetermineEffectiveSecurityContext
// and kuberuntime's container security context conversions.
func TestContainerSecurityContext(t *testing.T) {
	uid := int64(1000)
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
		RunAsUser: &uid, RunAsGroup: ptr(int64(2000)), RunAsNonRoot: ptr(true), FSGroup: ptr(int64(3000)),
		SupplementalGroups: []int64{4000}, SELinuxOptions: &corev1.SELinuxOptions{User: "u", Role: "r", Type: "t", Level: "l"},
		SupplementalGroupsPolicy: ptr(corev1.SupplementalGroupsPolicyMerge),
	}}}
	c := &corev1.Container{Name: "c", SecurityContext: &corev1.SecurityContext{
		RunAsUser: ptr(int64(1001)), Privileged: ptr(true), ReadOnlyRootFilesystem: ptr(true),
		AllowPrivilegeEscalation: ptr(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
		SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}, ProcMount: ptr(corev1.UnmaskedProcMount),
	}}
	node := Node{ThermalThrottlePaths: []string{"/sys/devices/system/cpu/cpu0/thermal_throttle"}}
	got, err := containerSecurityContext(pod, c, ImageInfo{Username: "ignored"}, node)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:             &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}, DropCapabilities: []string{}},
		Privileged:               true,
		NamespaceOptions:         &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		SelinuxOptions:           &runtimeapi.SELinuxOption{Type: "spc_t"},
		RunAsUser:                &runtimeapi.Int64Value{Value: 1001},
		RunAsGroup:               &runtimeapi.Int64Value{Value: 2000},
		ReadonlyRootfs:           true,
		SupplementalGroups:       []int64{3000, 4000},
		SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Merge,
		NoNewPrivs:               false,
		MaskedPaths:              []string{},
		ReadonlyPaths:            []string{},
		Seccomp:                  &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
	}
	if !proto.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}

	// Without runAsUser the image's user applies; masked paths default.
	plain := &corev1.Container{Name: "p", SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)}}
	got, err = containerSecurityContext(&corev1.Pod{}, plain, ImageInfo{Username: "www"}, node)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunAsUser != nil || got.RunAsUsername != "www" || !got.NoNewPrivs {
		t.Errorf("image user: %v %q nnp %v", got.RunAsUser, got.RunAsUsername, got.NoNewPrivs)
	}
	if n := len(got.MaskedPaths); n != 13 || got.MaskedPaths[12] != "/sys/devices/system/cpu/cpu0/thermal_throttle" || len(got.ReadonlyPaths) != 5 {
		t.Errorf("masked %v readonly %v", got.MaskedPaths, got.ReadonlyPaths)
	}
	got, _ = containerSecurityContext(&corev1.Pod{}, &corev1.Container{Name: "q"}, ImageInfo{UID: ptr(int64(5))}, node)
	if got.RunAsUser.GetValue() != 5 || got.RunAsUsername != "" || got.Capabilities != nil {
		t.Errorf("image uid: %v", got)
	}
	got, _ = containerSecurityContext(&corev1.Pod{}, &corev1.Container{Name: "q"}, ImageInfo{}, node)
	if got.RunAsUser == nil || got.RunAsUser.Value != 0 {
		t.Errorf("image without a user runs as root: %v", got.RunAsUser)
	}
	bad := pod.DeepCopy()
	bad.Spec.SecurityContext.SupplementalGroupsPolicy = ptr(corev1.SupplementalGroupsPolicy("Bogus"))
	if _, err := containerSecurityContext(bad, c, ImageInfo{}, node); err == nil || !strings.Contains(err.Error(), "unsupported supplementalGroupsPolicy: Bogus") {
		t.Errorf("bad policy: %v", err)
	}

	eff := EffectiveSecurityContext(pod, &corev1.Container{})
	wantEff := &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: ptr(int64(2000)), RunAsNonRoot: ptr(true),
		SELinuxOptions: &corev1.SELinuxOptions{User: "u", Role: "r", Type: "t", Level: "l"}}
	if !reflect.DeepEqual(eff, wantEff) {
		t.Errorf("effective %+v", eff)
	}
	if eff := EffectiveSecurityContext(&corev1.Pod{}, &corev1.Container{}); !reflect.DeepEqual(eff, &corev1.SecurityContext{}) {
		t.Errorf("effective of nothing %+v", eff)
	}
}
