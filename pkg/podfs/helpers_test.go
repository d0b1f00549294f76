package podfs

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

var testTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeMounter keeps a mount table without mounting: for the tests that
// check layouts, whoever runs them.
type fakeMounter struct {
	mu         sync.Mutex
	table      map[string]string // path -> fs type
	options    map[string][]string
	unmounted  []string // in order
	unmountErr error
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{table: map[string]string{}, options: map[string][]string{}}
}

func (f *fakeMounter) mountTmpfs(dir string, options []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table[dir] = "tmpfs"
	f.options[dir] = options
	return nil
}

func (f *fakeMounter) bind(src, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table[target] = "bind"
	return nil
}

func (f *fakeMounter) unmount(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unmountErr != nil {
		return f.unmountErr
	}
	if _, ok := f.table[target]; ok {
		f.unmounted = append(f.unmounted, target)
	}
	delete(f.table, target)
	return nil
}

func (f *fakeMounter) mounts(dir string) ([]mountPoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []mountPoint
	for p, t := range f.table {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, mountPoint{path: p, fsType: t})
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	return out, nil
}

// newTestManager is a Manager on a new root directory with a fake mount
// table and a fake clock.
func newTestManager(t *testing.T) (*Manager, *fakeMounter) {
	t.Helper()
	m := newRealTestManager(t)
	fm := newFakeMounter()
	m.mnt = fm
	return m, fm
}

// testNode is the node of the tests: 2 CPUs and 1Gi of memory allocatable,
// kubelet's default cgroup root, its directories under a new temporary
// directory.
func testNode(t *testing.T) podconfig.Node {
	t.Helper()
	return podconfig.Node{
		Name:       "node1",
		IPs:        []string{"192.168.1.5"},
		RootDir:    filepath.Join(t.TempDir(), "kubelet"),
		PodLogsDir: filepath.Join(t.TempDir(), "pods"),
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("1Gi"),
		},
		CgroupRoot:    "/kubepods",
		ClusterDomain: "cluster.local",
	}
}

// newRealTestManager is a Manager on a new root directory that mounts for
// real; its mounts are undone when the test ends. The node's hosts file is
// a test file.
func newRealTestManager(t *testing.T) *Manager {
	t.Helper()
	return newNodeTestManager(t, testNode(t))
}

func newNodeTestManager(t *testing.T, node podconfig.Node) *Manager {
	t.Helper()
	hosts := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, hosts, "127.0.0.1 localhost\n192.168.1.5 node1\n")
	m, err := New(Config{
		Node:          node,
		CgroupFS:      t.TempDir(),
		NodeHostsFile: hosts,
		Clock:         clocktesting.NewFakePassiveClock(testTime),
	})
	if err != nil {
		t.Fatal(err)
	}
	root := m.Layout().RootDir
	t.Cleanup(func() {
		// Leave no mount behind, whatever the test did.
		mps, _ := sysMounter{}.mounts(root)
		for _, mp := range mps {
			_ = unix.Unmount(mp.path, unix.MNT_DETACH)
		}
	})
	return m
}

// requireMount skips a test that needs to mount when the agent could not.
func requireMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root: run the tests as root to cover real tmpfs and bind mounts")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount is not permitted here (%v): real tmpfs and bind mounts not covered", err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
}

// testPod is a pod of the given volumes and one container mounting
// them.
func testPod(uid string, vols ...corev1.Volume) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			Volumes:            vols,
			Containers:         []corev1.Container{{Name: "c"}},
			EnableServiceLinks: ptr.To(true), // defaulted, as podconfig wants it
		},
	}
	for _, v := range vols {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/v/" + v.Name})
	}
	return pod
}

// recorded writes the pod's record: the pod is the agent's.
func recorded(t *testing.T, m *Manager, uid string) {
	t.Helper()
	if err := m.WriteRecord(Record{Namespace: "ns", Name: "web", UID: uid, Source: "/etc/cri-prober/pods/web.yaml"}); err != nil {
		t.Fatal(err)
	}
}

func umask(t *testing.T) os.FileMode {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			var u uint32
			for _, c := range strings.TrimSpace(v) {
				u = u*8 + uint32(c-'0')
			}
			return os.FileMode(u)
		}
	}
	t.Fatal("no Umask in /proc/self/status")
	return 0
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, os.ErrNotExist)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
