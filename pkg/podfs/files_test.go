package podfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// containerInput is what the executor hands PrepareContainer for the
// first container of pod: its IPs and the pod's volumes.
func containerInput(pod *corev1.Pod, podIPs []string, vols map[string]podconfig.Volume) podconfig.ContainerInput {
	in := podconfig.ContainerInput{Pod: pod, Container: &pod.Spec.Containers[0], PodIPs: podIPs, Volumes: vols}
	if len(podIPs) > 0 {
		in.PodIP = podIPs[0]
	}
	return in
}

// Rows of kubelet's TestMakeMountsEtcHostsFile and
// TestNodeHostsFileContent: what ensureHostsFile writes, and when.
func TestPrepareContainerHostsFile(t *testing.T) {
	const header = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	aliases := []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo", "foo.local"}}}
	for _, tc := range []struct {
		name      string
		podIPs    []string
		hostNet   bool
		subdomain string
		aliases   []corev1.HostAlias
		ownHosts  bool   // the container mounts a volume on /etc/hosts
		want      string // "": no file
	}{
		{name: "pod network", podIPs: []string{"10.88.0.7"}, want: header + "10.88.0.7\tweb\n"},
		{name: "dual stack, unsorted as the sandbox reports them", podIPs: []string{"fd00::7", "10.88.0.7"},
			want: header + "fd00::7\tweb\n10.88.0.7\tweb\n"},
		{name: "subdomain", podIPs: []string{"10.88.0.7"}, subdomain: "sub",
			want: header + "10.88.0.7\tweb.sub.ns.svc.cluster.local\tweb\n"},
		{name: "aliases", podIPs: []string{"10.88.0.7"}, aliases: aliases,
			want: header + "10.88.0.7\tweb\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo\tfoo.local\n"},
		{name: "host network: the node's file", hostNet: true, aliases: aliases,
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.1.5 node1\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo\tfoo.local\n"},
		{name: "no IP yet: not mounted, not written"},
		{name: "own /etc/hosts: not written", podIPs: []string{"10.88.0.7"}, ownHosts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t)
			recorded(t, m, "u1")
			pod := testPod("u1", corev1.Volume{Name: "etc", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			pod.Spec.Containers[0].VolumeMounts = nil
			if tc.ownHosts {
				pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "etc", MountPath: "/etc/hosts", SubPath: "hosts"}}
			}
			pod.Spec.HostNetwork = tc.hostNet
			pod.Spec.Subdomain = tc.subdomain
			pod.Spec.HostAliases = tc.aliases
			vols, err := m.SetUp(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.PrepareContainer(context.Background(), containerInput(pod, tc.podIPs, vols)); err != nil {
				t.Fatal(err)
			}
			path := m.Layout().EtcHosts("u1")
			data, err := os.ReadFile(path)
			if tc.want == "" {
				if err == nil {
					t.Errorf("hosts file written: %q", data)
				}
				return
			}
			if err != nil || string(data) != tc.want {
				t.Fatalf("hosts file %q (%v)\nwant %q", data, err, tc.want)
			}
			if got := mode(t, path); got != 0o644 {
				t.Errorf("mode %v, want -rw-r--r--", got)
			}
		})
	}
}

func TestPrepareContainerHostsFileInPlace(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	pod := testPod("u1")
	ctx := context.Background()
	if _, err := m.PrepareContainer(ctx, containerInput(pod, []string{"10.88.0.7"}, nil)); err != nil {
		t.Fatal(err)
	}
	path := m.Layout().EtcHosts("u1")
	before, _ := os.Stat(path)
	// A new IP, a shorter file: rewritten in place, same inode (running
	// containers have it bind-mounted), cut to the new length.
	if _, err := m.PrepareContainer(ctx, containerInput(pod, []string{"1.2.3.4"}, nil)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("the hosts file was replaced, not rewritten: a running container would not see the change")
	}
	if data, _ := os.ReadFile(path); !strings.HasSuffix(string(data), "\n1.2.3.4\tweb\n") {
		t.Errorf("content %q", data)
	}

	// A link planted there is not written through: the start fails as
	// kubelet's does when it cannot write the file.
	other := filepath.Join(t.TempDir(), "victim")
	writeFile(t, other, "keep")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	_, err := m.PrepareContainer(ctx, containerInput(pod, []string{"10.88.0.7"}, nil))
	var ce *podconfig.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("through a link: %v, want a ConfigError", err)
	}
	if data, _ := os.ReadFile(other); string(data) != "keep" {
		t.Errorf("the link's target was changed: %q", data)
	}
	// The host network's file missing: kubelet's error, as it is.
	m.hostsFile = filepath.Join(t.TempDir(), "none")
	pod.Spec.HostNetwork = true
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil)); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("no node hosts file: %v", err)
	}
}

func TestPrepareContainerTerminationMessage(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	pod := testPod("u1")
	pod.Spec.Containers[0].Name = "app"
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pod that has no directory: %v", err)
	}
	recorded(t, m, "u1")
	seen := map[string]bool{}
	for range 3 {
		in, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		path := in.TerminationMessageHostPath
		dir, name := filepath.Split(path)
		if filepath.Clean(dir) != m.Layout().ContainerDir("u1", "app") {
			t.Errorf("file %s not in the container's dir", path)
		}
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(name) {
			t.Errorf("name %q is not makeUID's", name)
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o666 || fi.Size() != 0 {
			t.Errorf("file mode %v size %d, want an empty -rw-rw-rw-", fi.Mode(), fi.Size())
		}
		if seen[name] {
			t.Errorf("name %s given twice", name)
		}
		seen[name] = true
	}
	if got := mode(t, m.Layout().ContainerDir("u1", "app")); got.Perm() != 0o750&^umask(t) {
		t.Errorf("container dir mode %v", got)
	}
	// Without a terminationMessagePath: none.
	pod.Spec.Containers[0].TerminationMessagePath = ""
	if in, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil)); err != nil || in.TerminationMessageHostPath != "" {
		t.Errorf("no terminationMessagePath: %q %v", in.TerminationMessageHostPath, err)
	}
	// A link planted for the containers dir is not followed; kubelet then
	// starts the container without the file.
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.UID = "u2"
	recorded(t, m, "u2")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(m.Layout().PodDir("u2"), "containers")); err != nil {
		t.Fatal(err)
	}
	if in, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil)); err != nil || in.TerminationMessageHostPath != "" {
		t.Errorf("through a link: %q %v", in.TerminationMessageHostPath, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Error("made a file through a link")
	}
	// A container name with a slash is refused.
	pod.Spec.Containers[0].Name = "../x"
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, nil)); err == nil {
		t.Error("a container name with a slash was accepted")
	}
}

// A fileKeyRef read through ReadEnvFile, its value used by a subPathExpr:
// the environment PrepareContainer resolves is kubelet's.
func TestPrepareContainerEnvFile(t *testing.T) {
	m, fm := newTestManager(t)
	recorded(t, m, "u1")
	pod := testPod("u1", corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "DIR", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "cfg", Path: "env/vars", Key: "DIR"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/data", SubPathExpr: "data/$(DIR)"}}
	ctx := context.Background()
	vols, err := m.SetUp(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vols["cfg"].HostPath, "env/vars"), "DIR='blue'\n")
	in, err := m.PrepareContainer(ctx, containerInput(pod, []string{"10.88.0.7"}, vols))
	if err != nil {
		t.Fatal(err)
	}
	if in.ReadEnvFile == nil {
		t.Fatal("no ReadEnvFile")
	}
	target := m.Layout().SubPathBindTarget("u1", "cfg", "c", 0)
	if in.SubPaths[0] != target || fm.table[target] != "bind" {
		t.Errorf("subPaths %v, mounts %v", in.SubPaths, fm.table)
	}
	if !exists(filepath.Join(vols["cfg"].HostPath, "data", "blue")) {
		t.Error("the subPathExpr was not expanded from the env file")
	}
	env, err := podconfig.Env(in, m.Node())
	if err != nil || len(env) != 1 || env[0].Value != "blue" {
		t.Errorf("env %v %v", env, err)
	}
}

func TestReadEnvFile(t *testing.T) {
	vol := t.TempDir()
	writeFile(t, filepath.Join(vol, "vars"), "A='1'\n")
	writeFile(t, filepath.Join(vol, "sub", "vars"), "B='2'\n")
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "S='x'\n")
	for name, target := range map[string]string{
		"abs":      "/sub/vars",                                // absolute: from the volume's root
		"up":       "../../../../../../../../sub/vars",         // ".." stops at the root
		"relative": "sub/vars",                                 // inside
		"escape":   filepath.Join(outside, "secret"),           // absolute, outside: read in the volume
		"dotdot":   "../" + filepath.Base(outside) + "/secret", // up and over: stays in
	} {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("loop", filepath.Join(vol, "loop")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(vol, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(vol, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(envFileMaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, tc := range []struct {
		name, path string
		want       string
		wantErr    string
	}{
		{name: "file", path: "vars", want: "A='1'\n"},
		{name: "nested", path: "sub/vars", want: "B='2'\n"},
		{name: "leading slash", path: "/vars", want: "A='1'\n"},
		{name: "dot dot in the path", path: "../../vars", want: "A='1'\n"},
		{name: "absolute link", path: "abs", want: "B='2'\n"},
		{name: "link up past the root", path: "up", want: "B='2'\n"},
		{name: "relative link", path: "relative", want: "B='2'\n"},
		{name: "absolute link out of the volume", path: "escape", wantErr: "no such file"},
		{name: "relative link out of the volume", path: "dotdot", wantErr: "no such file"},
		{name: "link loop", path: "loop", wantErr: "too many levels of symbolic links"},
		{name: "missing", path: "none", wantErr: "no such file"},
		{name: "a FIFO does not hang", path: "fifo", wantErr: "not a regular file"},
		{name: "a directory", path: "sub", wantErr: "not a regular file"},
		{name: "too big", path: "big", wantErr: "is over 16777216 bytes"},
	} {
		for _, impl := range []struct {
			name string
			open func(root int, path string, flags int) (int, error)
		}{{"openat2", openInRoot}, {"walk", walkInRoot}} {
			t.Run(tc.name+"/"+impl.name, func(t *testing.T) {
				got, err := readEnvFile(vol, tc.path, impl.open)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("error %v, want %q", err, tc.wantErr)
					}
					return
				}
				if err != nil || string(got) != tc.want {
					t.Errorf("got %q %v, want %q", got, err, tc.want)
				}
			})
		}
	}
}
