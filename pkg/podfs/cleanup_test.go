package podfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// fullPod has a volume of each kind the agent makes.
func fullPod(uid string) *corev1.Pod {
	limit := resource.MustParse("1Mi")
	return testPod(uid,
		corev1.Volume{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}},
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
	)
}

func TestTearDownTmpfs(t *testing.T) {
	requireMount(t)
	m := newRealTestManager(t)
	recorded(t, m, "u1")
	ctx := context.Background()
	vols, err := m.SetUp(ctx, fullPod("u1"))
	if err != nil {
		t.Fatal(err)
	}
	mps, err := sysMounter{}.mounts(m.Layout().PodDir("u1"))
	if err != nil {
		t.Fatal(err)
	}
	if !isMountOf(mps, vols["mem"].HostPath, "tmpfs") || !isMountOf(mps, vols["info"].HostPath, "tmpfs") {
		t.Fatalf("no tmpfs mounted: %v", mps)
	}
	// The sizeLimit is the tmpfs' size: a write past it fails.
	var st unix.Statfs_t
	if err := unix.Statfs(vols["mem"].HostPath, &st); err != nil {
		t.Fatal(err)
	}
	if size := int64(st.Blocks) * int64(st.Bsize); size != 1<<20 {
		t.Errorf("tmpfs size %d, want the 1Mi sizeLimit", size)
	}
	if err := os.WriteFile(filepath.Join(vols["mem"].HostPath, "big"), make([]byte, 2<<20), 0o644); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("writing 2Mi into a 1Mi memory volume: %v, want ENOSPC", err)
	}
	if err := os.Remove(filepath.Join(vols["mem"].HostPath, "big")); err != nil {
		t.Fatal(err)
	}
	// SetUp again: nothing mounted twice, the data kept.
	writeFile(t, filepath.Join(vols["mem"].HostPath, "keep"), "x")
	if _, err := m.SetUp(ctx, fullPod("u1")); err != nil {
		t.Fatal(err)
	}
	if n := countMounts(t, vols["mem"].HostPath); n != 1 {
		t.Errorf("the memory volume is mounted %d times after a second SetUp", n)
	}
	if !exists(filepath.Join(vols["mem"].HostPath, "keep")) {
		t.Error("a second SetUp lost the memory volume's data")
	}

	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if mps, _ := (sysMounter{}).mounts(m.Layout().RootDir); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	if exists(m.Layout().PodDir("u1")) {
		t.Error("pod dir left")
	}
	// Again: nothing to do.
	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Error(err)
	}
}

func countMounts(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

func TestTearDownStackedMounts(t *testing.T) {
	requireMount(t)
	m := newRealTestManager(t)
	recorded(t, m, "u1")
	dir := m.Layout().VolumeDir("u1", podconfig.PluginEmptyDir, "x")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.TearDown(context.Background(), "u1"); err != nil {
		t.Fatal(err)
	}
	if exists(m.Layout().PodDir("u1")) || countMounts(t, dir) != 0 {
		t.Error("stacked mounts or the pod dir left")
	}
}

func TestTearDownHalfMade(t *testing.T) {
	m, fm := newTestManager(t)
	ctx := context.Background()
	recorded(t, m, "u1")
	// Killed in SetUp: some volumes made, a downwardAPI write cut short,
	// a tmpfs mounted, a termination file, a subPath target.
	l := m.Layout()
	if err := os.MkdirAll(l.VolumeDir("u1", podconfig.PluginEmptyDir, "disk"), 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(l.VolumeDir("u1", podconfig.PluginEmptyDir, "disk"), "deep/er/file"), "x")
	api := l.VolumeDir("u1", podconfig.PluginDownwardAPI, "info")
	writeFile(t, filepath.Join(api, "..2026_01_01_00_00_00.1", "name"), "x")
	if err := os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(api, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	fm.table[api] = "tmpfs"
	writeFile(t, filepath.Join(l.ContainerDir("u1", "app"), "0badcafe"), "")
	writeFile(t, l.SubPathBindTarget("u1", "disk", "app", 0), "")
	// A container made a link out of its emptyDir: not followed.
	victim := t.TempDir()
	writeFile(t, filepath.Join(victim, "precious"), "keep")
	if err := os.Symlink(victim, filepath.Join(l.VolumeDir("u1", podconfig.PluginEmptyDir, "disk"), "escape")); err != nil {
		t.Fatal(err)
	}

	// SetUp finishes it.
	vols, err := m.SetUp(ctx, fullPod("u1"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(vols["info"].HostPath, "name")); string(data) != "web" {
		t.Errorf("downwardAPI volume not finished: %q", data)
	}
	if exists(filepath.Join(api, "..data_tmp")) || exists(filepath.Join(api, "..2026_01_01_00_00_00.1")) {
		t.Error("the cut-short write's leftovers are still there")
	}

	// TearDown removes it all, and only it.
	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if exists(l.PodDir("u1")) {
		t.Error("pod dir left")
	}
	if len(fm.table) != 0 {
		t.Errorf("not unmounted: %v", fm.table)
	}
	if data, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(data) != "keep" {
		t.Errorf("TearDown followed a link out of the pod dir: %q %v", data, err)
	}
}

// Kubelet's CleanSubPaths runs before each volume's TearDown: the subPath
// bind mounts go first, then the volume, then the files.
func TestTearDownCleansSubPathsFirst(t *testing.T) {
	m, fm := newTestManager(t)
	recorded(t, m, "u1")
	ctx := context.Background()
	pod := testPod("u1", corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mem", MountPath: "/a", SubPath: "a"}, {Name: "mem", MountPath: "/b", SubPath: "b"}}
	vols, err := m.SetUp(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, vols)); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	want := []string{
		l.SubPathBindTarget("u1", "mem", "c", 0),
		l.SubPathBindTarget("u1", "mem", "c", 1),
		l.VolumeDir("u1", podconfig.PluginEmptyDir, "mem"),
	}
	// The two subPaths in either order, then the volume.
	if len(fm.unmounted) == 3 {
		sort.Strings(fm.unmounted[:2])
	}
	if strings.Join(fm.unmounted, "\n") != strings.Join(want, "\n") {
		t.Errorf("unmounted\n%s\nwant\n%s", strings.Join(fm.unmounted, "\n"), strings.Join(want, "\n"))
	}
	if exists(l.PodDir("u1")) {
		t.Error("pod dir left")
	}
}

func TestTearDownCutShort(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	// Only the record is left (killed before its removal): finished.
	recorded(t, m, "u1")
	if err := m.TearDown(ctx, "u1"); err != nil || exists(m.Layout().PodDir("u1")) {
		t.Fatalf("record only: %v", err)
	}
	// Killed between the record's removal and the rmdir: an empty dir.
	if err := os.MkdirAll(m.Layout().PodDir("u2"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(ctx, "u2"); err != nil || exists(m.Layout().PodDir("u2")) {
		t.Fatalf("empty dir: %v", err)
	}
	// A WriteRecord cut short.
	writeFile(t, filepath.Join(m.Layout().PodsDir(), newPodPrefix+"u3", podconfig.RecordFileName), "{}")
	if err := m.TearDown(ctx, "u3"); err != nil || exists(filepath.Join(m.Layout().PodsDir(), newPodPrefix+"u3")) {
		t.Fatalf("new pod dir: %v", err)
	}
}

func TestTearDownRefuses(t *testing.T) {
	m, fm := newTestManager(t)
	ctx := context.Background()
	// Someone else's pod dir.
	writeFile(t, filepath.Join(m.Layout().PodDir("kubelets"), "volumes", "data"), "x")
	if err := m.TearDown(ctx, "kubelets"); !errors.Is(err, ErrNoRecord) {
		t.Errorf("someone else's pod: %v, want ErrNoRecord", err)
	}
	if !exists(filepath.Join(m.Layout().PodDir("kubelets"), "volumes", "data")) {
		t.Error("someone else's pod dir was touched")
	}
	// A busy mount: nothing removed.
	recorded(t, m, "u1")
	dir := m.Layout().VolumeDir("u1", podconfig.PluginEmptyDir, "mem")
	writeFile(t, filepath.Join(dir, "data"), "x")
	fm.table[dir] = "tmpfs"
	fm.unmountErr = errors.New("umount " + dir + ": device or resource busy")
	if err := m.TearDown(ctx, "u1"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("busy mount: %v", err)
	}
	if !exists(filepath.Join(dir, "data")) || !exists(m.Layout().RecordFile("u1")) {
		t.Error("files removed while a mount was left")
	}
	// A pods dir that is a link.
	m2, _ := newTestManager(t)
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "u1", podconfig.RecordFileName), `{"uid":"u1"}`)
	if err := os.Symlink(elsewhere, m2.Layout().PodsDir()); err != nil {
		t.Fatal(err)
	}
	if err := m2.TearDown(ctx, "u1"); err == nil {
		t.Error("TearDown followed a pods dir that is a link")
	}
	if !exists(filepath.Join(elsewhere, "u1", podconfig.RecordFileName)) {
		t.Error("removed through a link")
	}
}

func TestTearDownUnknownVolumePlugin(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	// A volume dir of a plugin the agent does not make: only empty dirs
	// go (removeOrphanedPodVolumeDirs); a file there stops the removal.
	other := m.Layout().VolumeDir("u1", "kubernetes.io~csi", "pv")
	writeFile(t, filepath.Join(other, "mount", "data"), "x")
	err := m.TearDown(context.Background(), "u1")
	if err == nil || !strings.Contains(err.Error(), "is not a directory: not removed") {
		t.Fatalf("TearDown: %v", err)
	}
	if !exists(filepath.Join(other, "mount", "data")) || !exists(m.Layout().RecordFile("u1")) {
		t.Error("removed a file of an unknown volume, or the record")
	}
	if err := os.Remove(filepath.Join(other, "mount", "data")); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(context.Background(), "u1"); err != nil || exists(m.Layout().PodDir("u1")) {
		t.Errorf("empty dirs left: %v", err)
	}
}

func TestRemoveAllAtRefusesMountPoint(t *testing.T) {
	requireMount(t)
	base := t.TempDir()
	victim := t.TempDir()
	writeFile(t, filepath.Join(victim, "precious"), "keep")
	target := filepath.Join(base, "d", "bound")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	// A bind mount of the same file system: same device, another mount.
	if err := unix.Mount(victim, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(target, unix.MNT_DETACH)
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = removeAllAt(fd, "d", base)
	if err == nil || !strings.Contains(err.Error(), "it is a mount point") {
		t.Errorf("removeAllAt: %v", err)
	}
	if !exists(filepath.Join(victim, "precious")) {
		t.Error("removed a file in another mount")
	}
}

func TestMakeAndRemoveLogs(t *testing.T) {
	m, _ := newTestManager(t)
	l := m.Layout()
	dir := l.PodLogsDirectory("ns", "web", "u1")
	made, err := m.MakeLogsDir("ns", "web", "u1")
	if err != nil || made != dir {
		t.Fatalf("MakeLogsDir = %s %v, want %s", made, err, dir)
	}
	if got := mode(t, dir); got != fs.ModeDir|0o755&^umask(t) {
		t.Errorf("logs dir mode %v (createPodSandbox: 0755)", got)
	}
	if _, err := m.MakeLogsDir("ns", "web", "u1"); err != nil {
		t.Errorf("again: %v", err)
	}
	if _, err := m.MakeLogsDir("ns", "a/b", "u1"); err == nil {
		t.Error("a name with a slash was accepted")
	}
	writeFile(t, filepath.Join(dir, "app", "0.log"), "log")
	victim := t.TempDir()
	writeFile(t, filepath.Join(victim, "keep"), "x")
	if err := os.Symlink(victim, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	other := l.PodLogsDirectory("ns", "web", "u2")
	writeFile(t, filepath.Join(other, "app", "0.log"), "log")
	if err := m.RemoveLogs("ns", "web", "u1"); err != nil {
		t.Fatal(err)
	}
	if exists(dir) || !exists(other) || !exists(filepath.Join(victim, "keep")) {
		t.Error("removed the wrong things")
	}
	if err := m.RemoveLogs("ns", "web", "u1"); err != nil {
		t.Errorf("again: %v", err)
	}
	if err := m.RemoveLogs("ns", "../x", "u1"); err == nil {
		t.Error("a name with a slash was accepted")
	}
	// No pod logs directory at all.
	node := testNode(t)
	node.PodLogsDir = filepath.Join(t.TempDir(), "none")
	if err := newNodeTestManager(t, node).RemoveLogs("ns", "web", "u1"); err != nil {
		t.Errorf("no logs dir: %v", err)
	}
}

func TestRemovePodCgroups(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v2         bool
		cgroupRoot string // the node's; "" below is testNode's /kubepods
		driver     string
		paths      []string // pod cgroups, with container cgroups inside
		kept       bool     // left alone
	}{
		{name: "v1", paths: []string{
			"memory/kubepods/podu1/ctr1", "memory/kubepods/burstable/podu1/ctr2",
			"cpu,cpuacct/kubepods/besteffort/podu1", "pids/kubepods/podu1",
		}},
		{name: "v2", v2: true, paths: []string{"kubepods/burstable/podu1/ctr1", "kubepods/podu1"}},
		{name: "another cgroup root", v2: true, cgroupRoot: "/agent/pods", paths: []string{"agent/pods/besteffort/podu1/ctr1"}},
		{name: "systemd driver: systemd's slices", v2: true, driver: "systemd",
			paths: []string{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice"}, kept: true},
		{name: "no cgroup root: the runtime's cgroups", v2: true, cgroupRoot: "-", paths: []string{"kubepods/podu1"}, kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode(t)
			switch tc.cgroupRoot {
			case "":
			case "-":
				node.CgroupRoot = ""
			default:
				node.CgroupRoot = tc.cgroupRoot
			}
			node.CgroupDriver = tc.driver
			m := newNodeTestManager(t, node)
			root := m.cgroupFS
			if tc.v2 {
				writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory")
			}
			for _, p := range tc.paths {
				if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Another pod's cgroup, and the v1 "cpu" link to "cpu,cpuacct".
			if err := os.MkdirAll(filepath.Join(root, "memory/kubepods/podu2"), 0o755); err != nil {
				t.Fatal(err)
			}
			if !tc.v2 {
				if err := os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.RemovePodCgroups("u1"); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.paths {
				if exists(filepath.Join(root, p)) != tc.kept {
					t.Errorf("%s: exists %v, want %v", p, !tc.kept, tc.kept)
				}
			}
			if !exists(filepath.Join(root, "memory/kubepods/podu2")) {
				t.Error("another pod's cgroup was removed")
			}
			if err := m.RemovePodCgroups("u1"); err != nil {
				t.Errorf("again: %v", err)
			}
		})
	}
	// A cgroup that is not empty (a file stands for a process here).
	m, _ := newTestManager(t)
	writeFile(t, filepath.Join(m.cgroupFS, "memory/kubepods/podu1/cgroup.procs"), "42")
	if err := m.RemovePodCgroups("u1"); err == nil {
		t.Error("a cgroup that could not be removed gave no error")
	}
}

// A terminated pod that stays: its volumes torn down (tmpfs unmounted,
// emptyDir and downwardAPI contents removed), its directory and record
// kept; again: nothing to do. A directory without the agent's record is
// refused.
func TestTearDownVolumes(t *testing.T) {
	requireMount(t)
	m := newRealTestManager(t)
	recorded(t, m, "u1")
	ctx := context.Background()
	vols, err := m.SetUp(ctx, fullPod("u1"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vols["disk"].HostPath, "data"), "x")
	writeFile(t, filepath.Join(vols["mem"].HostPath, "data"), "x")
	for range 2 {
		if err := m.TearDownVolumes(ctx, "u1"); err != nil {
			t.Fatal(err)
		}
	}
	if mps, _ := (sysMounter{}).mounts(m.Layout().RootDir); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	for name, v := range vols {
		if exists(v.HostPath) {
			t.Errorf("volume %s left: %s", name, v.HostPath)
		}
	}
	if !exists(m.Layout().RecordFile("u1")) {
		t.Error("the pod record went: the pod stays")
	}

	if err := os.MkdirAll(filepath.Join(m.Layout().PodDir("theirs"), "volumes"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDownVolumes(ctx, "theirs"); !errors.Is(err, ErrNoRecord) {
		t.Errorf("a pod directory without a record: %v, want ErrNoRecord", err)
	}
}
