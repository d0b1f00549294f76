package podfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

func hostPathVol(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "x")
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	blk := filepath.Join(dir, "blk")
	haveBlk := unix.Mknod(blk, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))) == nil
	const chr = "/dev/null"
	link := filepath.Join(dir, "link-to-dir") // links are followed, as kubelet's os.Stat
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path    string
		typ     corev1.HostPathType
		wantErr string
	}{
		{dir, corev1.HostPathDirectory, ""},
		{link, corev1.HostPathDirectory, ""},
		{file, corev1.HostPathDirectory, "hostPath type check failed: " + file + " is not a directory"},
		{dir + "/missing", corev1.HostPathDirectory, "hostPath type check failed: " + dir + "/missing is not a directory"},
		{file, corev1.HostPathDirectoryOrCreate, "hostPath type check failed: " + file + " is not a directory"},
		{file, corev1.HostPathFile, ""},
		{dir, corev1.HostPathFile, "hostPath type check failed: " + dir + " is not a file"},
		{dir, corev1.HostPathFileOrCreate, "hostPath type check failed: " + dir + " is not a file"},
		{sock, corev1.HostPathSocket, ""},
		{file, corev1.HostPathSocket, "hostPath type check failed: " + file + " is not a socket file"},
		{chr, corev1.HostPathCharDev, ""},
		{file, corev1.HostPathCharDev, "hostPath type check failed: " + file + " is not a character device"},
		{chr, corev1.HostPathBlockDev, "hostPath type check failed: " + chr + " is not a block device"},
		{file, corev1.HostPathBlockDev, "hostPath type check failed: " + file + " is not a block device"},
		{blk, corev1.HostPathBlockDev, ""},
		{blk, corev1.HostPathCharDev, "hostPath type check failed: " + blk + " is not a character device"},
		{dir + "/anything", corev1.HostPathUnset, ""},
		{dir, "Bogus", "Bogus is an invalid volume type"},
		{dir + "/../etc", corev1.HostPathUnset, "invalid HostPath `" + dir + "/../etc`: must not contain '..'"},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.typ, filepath.Base(tc.path)), func(t *testing.T) {
			if tc.path == blk && !haveBlk {
				t.Skip("cannot make a block device here")
			}
			m, _ := newTestManager(t)
			recorded(t, m, "u1")
			vols, err := m.SetUp(context.Background(), testPod("u1", hostPathVol("h", tc.path, tc.typ)))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := vols["h"]; got != (podconfig.Volume{HostPath: tc.path}) {
					t.Errorf("volume %+v, want the path, read-write, no relabel", got)
				}
				return
			}
			want := `MountVolume.SetUp failed for volume "h" : ` + tc.wantErr
			if err == nil || err.Error() != want {
				t.Fatalf("error %v\nwant %s", err, want)
			}
			var me *MountError
			if !errors.As(err, &me) || me.Volume != "h" || me.Err.Error() != tc.wantErr {
				t.Errorf("errors.As(*MountError) = %+v", me)
			}
			if _, ok := vols["h"]; ok {
				t.Error("a failed volume is in the result")
			}
		})
	}
}

func TestHostPathCreateModes(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	dir := t.TempDir()
	newDir := filepath.Join(dir, "a", "b")
	newFile := filepath.Join(dir, "f")
	pod := testPod("u1",
		hostPathVol("d", newDir, corev1.HostPathDirectoryOrCreate),
		hostPathVol("f", newFile, corev1.HostPathFileOrCreate))
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	um := umask(t)
	for _, p := range []string{newDir, filepath.Dir(newDir)} {
		if got, want := mode(t, p), fs.ModeDir|(0o755&^um); got != want {
			t.Errorf("%s: mode %v, want %v (0755 under the umask, kubelet's makeDir)", p, got, want)
		}
	}
	if got, want := mode(t, newFile), 0o644&^um; got != want {
		t.Errorf("file mode %v, want %v (0644 under the umask, kubelet's makeFile)", got, want)
	}
	// Again: existing ones pass, nothing changes.
	writeFile(t, newFile, "kept")
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(newFile); string(data) != "kept" {
		t.Errorf("FileOrCreate changed an existing file: %q", data)
	}
}

func TestEmptyDirIdempotent(t *testing.T) {
	m, fm := newTestManager(t)
	recorded(t, m, "u1")
	pod := testPod("u1", corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	vols, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Layout().VolumeDir("u1", podconfig.PluginEmptyDir, "cache")
	if got := vols["cache"]; got != (podconfig.Volume{HostPath: dir, SELinuxRelabel: true}) {
		t.Errorf("volume %+v", got)
	}
	if got := mode(t, dir); got != fs.ModeDir|0o777 {
		t.Errorf("emptyDir mode %v, want drwxrwxrwx", got)
	}
	for _, d := range []string{m.Layout().VolumesDir("u1"), m.Layout().PluginsDir("u1")} {
		if got := mode(t, d); got != fs.ModeDir|0o750&^umask(t) {
			t.Errorf("%s mode %v (makePodDataDirs: 0750)", d, got)
		}
	}
	if !exists(filepath.Join(m.Layout().ReadyDir("u1", "cache"), "ready")) {
		t.Error("no ready file")
	}
	writeFile(t, filepath.Join(dir, "data"), "kept")
	vols2, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if vols2["cache"] != vols["cache"] {
		t.Errorf("second SetUp gave %+v", vols2)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(data) != "kept" {
		t.Errorf("the second SetUp lost the volume's data: %q %v", data, err)
	}
	if len(fm.table) != 0 {
		t.Errorf("a disk emptyDir mounted something: %v", fm.table)
	}
	// Removed by hand, ready file left: made again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, dir); got != fs.ModeDir|0o777 {
		t.Errorf("emptyDir not made again: %v", got)
	}
}

// Rows of kubelet's TestCalculateEmptyDirMemorySize, and the pod limits
// of cm.ResourceConfigForPod that bound a memory-backed volume.
func TestEmptyDirMemorySize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	limits := func(mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	requests := func(mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	for _, tc := range []struct {
		name        string
		allocatable *resource.Quantity
		resources   []corev1.ResourceRequirements // one per container
		sizeLimit   *resource.Quantity
		want        []string
	}{
		{name: "EmptyDirLocalLimit", allocatable: q("16Gi"), resources: []corev1.ResourceRequirements{limits("10Gi")}, sizeLimit: q("1Gi"),
			want: []string{"size=1073741824", "noswap"}},
		{name: "PodLocalLimit", allocatable: q("16Gi"), resources: []corev1.ResourceRequirements{limits("10Gi")}, sizeLimit: q("0"),
			want: []string{"size=10737418240", "noswap"}},
		{name: "NodeAllocatableLimit", allocatable: q("16Gi"), resources: []corev1.ResourceRequirements{requests("10Gi")}, sizeLimit: q("0"),
			want: []string{"size=17179869184", "noswap"}},
		{name: "pod limit is the sum of its containers'", allocatable: q("1Gi"), resources: []corev1.ResourceRequirements{limits("256Mi"), limits("128Mi")},
			want: []string{"size=402653184", "noswap"}},
		{name: "a container without a limit: no pod limit", allocatable: q("1Gi"), resources: []corev1.ResourceRequirements{limits("256Mi"), {}},
			want: []string{"size=1073741824", "noswap"}},
		{name: "pod limit over allocatable", allocatable: q("1Gi"), resources: []corev1.ResourceRequirements{limits("2Gi")},
			want: []string{"size=1073741824", "noswap"}},
		{name: "sizeLimit over pod limit", allocatable: q("1Gi"), resources: []corev1.ResourceRequirements{limits("256Mi")}, sizeLimit: q("512Mi"),
			want: []string{"size=268435456", "noswap"}},
		{name: "sizeLimit equal to the pod limit", allocatable: q("1Gi"), resources: []corev1.ResourceRequirements{limits("256Mi")}, sizeLimit: q("256Mi"),
			want: []string{"size=268435456", "noswap"}},
		// Kubelet always knows its allocatable; without one the size is 0
		// as in calculateEmptyDirMemorySize: no size option at all.
		{name: "unknown allocatable", resources: []corev1.ResourceRequirements{limits("256Mi")}, sizeLimit: q("10Mi"),
			want: []string{"noswap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode(t)
			delete(node.Allocatable, corev1.ResourceMemory)
			if tc.allocatable != nil {
				node.Allocatable[corev1.ResourceMemory] = *tc.allocatable
			}
			m := newNodeTestManager(t, node)
			fm := newFakeMounter()
			m.mnt = fm
			recorded(t, m, "u1")
			pod := testPod("u1", corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tc.sizeLimit}}})
			pod.Spec.Containers = nil
			for i, r := range tc.resources {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Resources: r})
			}
			if _, err := m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			dir := m.Layout().VolumeDir("u1", podconfig.PluginEmptyDir, "shm")
			if fm.table[dir] != "tmpfs" {
				t.Fatalf("no tmpfs at %s: %v", dir, fm.table)
			}
			if got := strings.Join(fm.options[dir], ","); got != strings.Join(tc.want, ",") {
				t.Errorf("options %s, want %s", got, strings.Join(tc.want, ","))
			}
		})
	}
}

func TestEmptyDirMediumErrors(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	pod := testPod("u1",
		corev1.Volume{Name: "huge", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "HugePages-2Mi"}}},
		corev1.Volume{Name: "huge2", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}},
		corev1.Volume{Name: "odd", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Tape"}}},
		corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		corev1.Volume{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "busybox"}}},
	)
	vols, err := m.SetUp(context.Background(), pod)
	var se *SetUpError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a *SetUpError", err)
	}
	want := []string{
		`MountVolume.SetUp failed for volume "huge" : emptyDir medium "HugePages-2Mi": hugepages volumes are not supported by cri-prober`,
		`MountVolume.SetUp failed for volume "huge2" : emptyDir medium "HugePages": hugepages volumes are not supported by cri-prober`,
		`MountVolume.SetUp failed for volume "odd" : unknown storage medium "Tape"`,
		`MountVolume.SetUp failed for volume "cm" : configMap volumes are not supported in a pod cri-prober runs: a static pod may use emptyDir, hostPath and downwardAPI volumes`,
	}
	if len(se.Failed) != len(want) {
		t.Fatalf("failed %v", err)
	}
	for i, f := range se.Failed {
		if f.Error() != want[i] {
			t.Errorf("got  %s\nwant %s", f.Error(), want[i])
		}
	}
	if _, ok := vols["ok"]; !ok || len(vols) != 1 {
		t.Errorf("volumes %v: want the good one only (an image volume is the runtime's)", vols)
	}
}

func TestSetUpRefusesUnownedPodDir(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod("u1", corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if _, err := m.SetUp(context.Background(), pod); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no pod dir: %v", err)
	}
	if err := os.MkdirAll(m.Layout().PodDir("u1"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetUp(context.Background(), pod); !errors.Is(err, ErrNoRecord) {
		t.Errorf("someone else's pod dir: %v, want ErrNoRecord", err)
	}
	if exists(m.Layout().VolumesDir("u1")) {
		t.Error("SetUp wrote into someone else's pod dir")
	}
}

func downwardPod(uid string, mode *int32, items ...corev1.DownwardAPIVolumeFile) *corev1.Pod {
	return testPod(uid, corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items, DefaultMode: mode}}})
}

func TestDownwardAPIAtomicLayout(t *testing.T) {
	m, fm := newTestManager(t)
	recorded(t, m, "u1")
	pod := downwardPod("u1", nil,
		corev1.DownwardAPIVolumeFile{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		corev1.DownwardAPIVolumeFile{Path: "meta/name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr.To[int32](0o400)},
		corev1.DownwardAPIVolumeFile{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}},
	)
	// The values are podconfig's: the pod's labels and name, the cpu
	// limit the container lacks read from the node's allocatable.
	pod.Labels = map[string]string{"app": "web"}
	vols, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := m.Layout().VolumeDir("u1", podconfig.PluginDownwardAPI, "info")
	if got := vols["info"]; got != (podconfig.Volume{HostPath: dir, ReadOnly: true, SELinuxRelabel: true}) {
		t.Errorf("volume %+v", got)
	}
	if fm.table[dir] != "tmpfs" || strings.Join(fm.options[dir], ",") != "size=1073741824,noswap" {
		t.Errorf("no tmpfs of the node's allocatable memory under the volume: %v %v", fm.table, fm.options)
	}
	if !exists(filepath.Join(m.Layout().ReadyDir("u1", "wrapped_info"), "ready")) {
		t.Error("no ready file of the wrapped emptyDir")
	}

	target, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(target, "..2026_03_04_05_06_07.") || !isTsDirName(target) {
		t.Errorf("..data -> %s, want the clock's timestamped directory", target)
	}
	if got := mode(t, filepath.Join(dir, target)); got != fs.ModeDir|0o755 {
		t.Errorf("timestamped dir mode %v", got)
	}
	for name, want := range map[string]string{"labels": "..data/labels", "meta": "..data/meta", "cpu": "..data/cpu"} {
		got, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %s", name, got, err, want)
		}
	}
	for path, want := range map[string]struct {
		content string
		mode    fs.FileMode
	}{
		"labels":    {`app="web"`, 0o644},
		"meta/name": {"web", 0o400},
		"cpu":       {"2", 0o644},
	} {
		full := filepath.Join(dir, path)
		data, err := os.ReadFile(full)
		if err != nil || string(data) != want.content {
			t.Errorf("%s = %q (%v), want %q", path, data, err, want.content)
		}
		fi, err := os.Stat(full)
		if err != nil || fi.Mode() != want.mode {
			t.Errorf("%s mode %v, want %v", path, fi.Mode(), want.mode)
		}
	}

	// The same again: nothing rewritten.
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != target {
		t.Errorf("an unchanged payload was rewritten: %s -> %s", target, again)
	}

	// A change: a new directory, the old one gone, a dropped item's link
	// gone.
	pod.Labels["app"] = "web2"
	pod.Spec.Volumes[0].DownwardAPI.Items = pod.Spec.Volumes[0].DownwardAPI.Items[:2]
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	next, _ := os.Readlink(filepath.Join(dir, "..data"))
	if next == target {
		t.Fatal("a changed payload was not written to a new directory")
	}
	if exists(filepath.Join(dir, target)) {
		t.Error("the old timestamped directory is still there")
	}
	if exists(filepath.Join(dir, "cpu")) {
		t.Error("the dropped item's link is still there")
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "labels")); string(data) != `app="web2"` {
		t.Errorf("labels = %q", data)
	}
}

func TestDownwardAPIModesAndErrors(t *testing.T) {
	m, fm := newTestManager(t)
	recorded(t, m, "u1")
	pod := downwardPod("u1", ptr.To[int32](0o440),
		corev1.DownwardAPIVolumeFile{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}})
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, filepath.Join(m.Layout().VolumeDir("u1", podconfig.PluginDownwardAPI, "info"), "..data", "name")); got != 0o440 {
		t.Errorf("defaultMode not applied: %v", got)
	}

	// Two bad fields: kubelet's aggregate text; nothing made.
	bad := downwardPod("u2", nil,
		corev1.DownwardAPIVolumeFile{Path: "a", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
		corev1.DownwardAPIVolumeFile{Path: "b", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}})
	recorded(t, m, "u2")
	// A volume file reads the pod's metadata only (ExtractFieldPath), not
	// the env var's spec and status fields.
	_, err := m.SetUp(context.Background(), bad)
	want := `MountVolume.SetUp failed for volume "info" : [unsupported fieldPath: spec.nodeName, unsupported fieldPath: status.podIP]`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	if exists(m.Layout().VolumeDir("u2", podconfig.PluginDownwardAPI, "info")) || fm.table[m.Layout().VolumeDir("u2", podconfig.PluginDownwardAPI, "info")] != "" {
		t.Error("a volume whose data failed was made")
	}

	// An item path the atomic writer refuses: the volume is torn down.
	evil := downwardPod("u3", nil, corev1.DownwardAPIVolumeFile{Path: "..x/y", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}})
	recorded(t, m, "u3")
	_, err = m.SetUp(context.Background(), evil)
	want = `MountVolume.SetUp failed for volume "info" : invalid path: must not start with '..': ..x/y`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	dir := m.Layout().VolumeDir("u3", podconfig.PluginDownwardAPI, "info")
	if exists(dir) || fm.table[dir] != "" || exists(m.Layout().ReadyDir("u3", "wrapped_info")) {
		t.Error("a failed volume was left mounted or made")
	}
}

func TestDownwardAPILeftoversOfACrash(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	pod := downwardPod("u1", nil, corev1.DownwardAPIVolumeFile{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}})
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := m.Layout().VolumeDir("u1", podconfig.PluginDownwardAPI, "info")
	current, _ := os.Readlink(filepath.Join(dir, "..data"))
	// A write cut short: a new timestamped dir and ..data_tmp, not renamed.
	stale := "..2026_01_01_00_00_00.123"
	writeFile(t, filepath.Join(dir, stale, "name"), "old")
	if err := os.Symlink(stale, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	pod.Name = "web2"
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	now, _ := os.Readlink(filepath.Join(dir, "..data"))
	if want := []string{now, "..data", "name"}; !equalStrings(names, want) || now == current {
		t.Errorf("volume holds %v, want %v", names, want)
	}
}

func TestNestedMountpoints(t *testing.T) {
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	pod := downwardPod("u1", nil, corev1.DownwardAPIVolumeFile{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "info", MountPath: "/etc/info"},
		{Name: "cache", MountPath: "/etc/info/cache"},
		{Name: "cache", MountPath: "/etc/info/cache/deeper"},
	}
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := m.Layout().VolumeDir("u1", podconfig.PluginDownwardAPI, "info")
	if got := mode(t, filepath.Join(dir, "cache")); !got.IsDir() {
		t.Errorf("no nested mount point: %v", got)
	}
	if exists(filepath.Join(dir, "cache", "deeper")) {
		t.Error("a mount point nested twice was made")
	}
}

func TestFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group to any fsGroup needs root")
	}
	m, _ := newTestManager(t)
	recorded(t, m, "u1")
	pod := downwardPod("u1", ptr.To[int32](0o400), corev1.DownwardAPIVolumeFile{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](4242)}
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	check := func(path string, wantMode fs.FileMode) {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 4242 {
			t.Errorf("%s group %d, want the fsGroup", path, gid)
		}
		if wantMode != 0 && fi.Mode() != wantMode {
			t.Errorf("%s mode %v, want %v", path, fi.Mode(), wantMode)
		}
	}
	api := m.Layout().VolumeDir("u1", podconfig.PluginDownwardAPI, "info")
	ts, _ := os.Readlink(filepath.Join(api, "..data"))
	check(filepath.Join(api, ts, "name"), 0o440)                  // read-only volume: g+r
	check(filepath.Join(api, ts), fs.ModeDir|fs.ModeSetgid|0o755) // dirs: setgid, g+x
	check(filepath.Join(api, "name"), 0)                          // the link: its group only
	check(m.Layout().VolumeDir("u1", podconfig.PluginEmptyDir, "cache"), fs.ModeDir|fs.ModeSetgid|0o777)
}
