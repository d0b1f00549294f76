package manifests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/inputs"
)

// Who may change the manifests the agent reads (security review finding
// 8): an exec probe or a lifecycle hook runs any command in the containers
// of the pod it names, and with --static-pod-path a manifest starts any
// container, so writing a manifest is root on the node.

const (
	whyDirText  = "whoever can write in the manifest directory can add a manifest, and a manifest runs commands in containers (exec probes, lifecycle hooks) or, as a static pod, starts any container"
	whyFileText = "whoever can change a manifest changes the commands it runs in containers (exec probes, lifecycle hooks) or, as a static pod, the containers it starts"
	outsideText = "only files beneath it are read, through relative links, as whoever can change a file elsewhere could run commands in containers; copy the file into the directory"
)

// needRoot skips a test that gives files to another uid.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another uid")
	}
}

// eachResolver runs f with openat2, and as on a kernel without it (Linux
// before 5.6; or a seccomp profile older than it).
func eachResolver(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("without openat2", func(t *testing.T) {
		saved := openat2
		openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
		t.Cleanup(func() { openat2 = saved })
		f(t)
	})
}

// mountedReadOnly makes every directory look mounted read-only, as a
// volume kubelet mounts in a container is.
func mountedReadOnly(t *testing.T) {
	saved := fstatfs
	fstatfs = func(fd int, st *unix.Statfs_t) error {
		err := unix.Fstatfs(fd, st)
		st.Flags |= unix.ST_RDONLY
		return err
	}
	t.Cleanup(func() { fstatfs = saved })
}

// namedPod is webPod named name.
func namedPod(name string) string {
	return strings.Replace(inputs.WebPod(3), "name: web", "name: "+name, 1)
}

// writeOwned writes a manifest of pod name at path with mode and owner uid
// (and gid).
func writeOwned(t *testing.T, path, name string, mode fs.FileMode, uid int) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(namedPod(name)), 0o600))
	require.NoError(t, os.Chmod(path, mode)) // not the umask's
	require.NoError(t, os.Chown(path, uid, uid))
}

func podNamesOf(pods []*spec.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// A manifest another user owns, or that its group or others may write, is
// refused by name, saying what to do; the rest of the directory loads.
// Once it is root's alone, the next reload reads it (a chown alone changes
// neither its size, time nor mode). Fails on the old code: every file
// loads.
func TestLoadDirRefusesManifestsOthersCanChange(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	writeOwned(t, filepath.Join(dir, "a.yaml"), "a", 0o644, 0)
	theirs := filepath.Join(dir, "b.yaml")
	writeOwned(t, theirs, "b", 0o644, 65534)
	groupWritable := filepath.Join(dir, "c.yaml")
	writeOwned(t, groupWritable, "c", 0o664, 0)
	theirsWritable := filepath.Join(dir, "d.yaml")
	writeOwned(t, theirsWritable, "d", 0o666, 65534)
	writeOwned(t, filepath.Join(dir, "e.yaml"), "e", 0o600, 0) // root's alone: read

	pods, errs := LoadDir(dir)
	assert.Equal(t, []string{"a", "e"}, podNamesOf(pods))
	assert.Equal(t, []string{
		theirs + ": refused: it belongs to uid 65534, not to root: " + whyFileText + "; chown root " + theirs,
		groupWritable + ": refused: it is writable by its group or others (mode 0664): " + whyFileText + "; chmod go-w " + groupWritable,
		theirsWritable + ": refused: it belongs to uid 65534, not to root: " + whyFileText + "; chown root " + theirsWritable + ", and chmod go-w it (mode 0666)",
	}, messages(errs))

	d := NewDir(dir, nil)
	require.True(t, d.Reload())
	_, errs = d.Pods()
	require.Len(t, errs, 3)
	require.NoError(t, os.Chown(theirs, 0, 0))
	require.True(t, d.Reload(), "the chown is a change")
	pods, errs = d.Pods()
	assert.Equal(t, []string{"a", "b", "e"}, podNamesOf(pods))
	assert.Len(t, errs, 2)
}

// A manifest directory another user owns, or that its group or others may
// write in (even sticky, as /tmp), is refused whole, saying what to do: a
// reload loads it once it is fixed. Fails on the old code: it loads.
func TestLoadDirRefusesADirectoryOthersCanWriteIn(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name string
		mode fs.FileMode
		uid  int
		want string // %s: the directory
	}{
		{"another user's", 0o755, 65534, "refused: it belongs to uid 65534, not to root: " + whyDirText + "; chown root %s"},
		{"another user's, writable by all", 0o777, 65534, "refused: it belongs to uid 65534, not to root: " + whyDirText + "; chown root %s, and chmod go-w it (mode 0777)"},
		{"group-writable", 0o775, 0, "refused: it is writable by its group or others (mode 0775): " + whyDirText + "; chmod go-w %s"},
		{"sticky and writable by all, as /tmp", os.ModeSticky | 0o777, 0, "refused: it is writable by its group or others (mode 1777): " + whyDirText + "; chmod go-w %s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pods")
			require.NoError(t, os.Mkdir(dir, 0o755))
			writeOwned(t, filepath.Join(dir, "a.yaml"), "a", 0o644, 0)
			require.NoError(t, os.Chmod(dir, tt.mode))
			require.NoError(t, os.Chown(dir, tt.uid, tt.uid))

			pods, errs := LoadDir(dir)
			assert.Empty(t, pods)
			assert.Equal(t, []string{dir + ": " + fmt.Sprintf(tt.want, dir)}, messages(errs))

			d := NewDir(dir, nil, AsStatic(spec.Static{NodeName: "node"}))
			require.True(t, d.Reload())
			pods, _ = d.Pods()
			assert.Empty(t, pods)
			require.NoError(t, os.Chown(dir, 0, 0))
			require.NoError(t, os.Chmod(dir, 0o755))
			require.True(t, d.Reload())
			pods, errs = d.Pods()
			assert.Equal(t, []string{"a-node"}, podNamesOf(pods))
			assert.Empty(t, errs)
		})
	}
}

// A link out of the manifest directory is refused, wherever it leads (a
// file of root's elsewhere, another user's home); a relative link beneath
// it is followed. Fails on the old code: the links out load.
func TestLoadDirRefusesALinkOutOfTheDirectory(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		dir := t.TempDir()
		elsewhere := t.TempDir()
		roots := filepath.Join(elsewhere, "roots.yaml")
		require.NoError(t, os.WriteFile(roots, []byte(namedPod("roots")), 0o644))
		alices := filepath.Join(elsewhere, "alice.yaml")
		require.NoError(t, os.WriteFile(alices, []byte(namedPod("alice")), 0o644))
		if os.Geteuid() == 0 {
			require.NoError(t, os.Chown(alices, 65534, 65534))
		}
		relative, err := filepath.Rel(dir, roots)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(roots, filepath.Join(dir, "a.yaml")))
		require.NoError(t, os.Symlink(relative, filepath.Join(dir, "b.yaml")))
		require.NoError(t, os.Symlink(alices, filepath.Join(dir, "c.yaml")))
		// Beneath: a subdirectory, through a relative link.
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "inner.yaml"), []byte(namedPod("inner")), 0o644))
		require.NoError(t, os.Symlink("sub/inner.yaml", filepath.Join(dir, "d.yaml")))

		r := Load(dir)
		assert.Equal(t, []string{"inner"}, podNamesOf(r.Pods))
		assert.Equal(t, []string{
			filepath.Join(dir, "a.yaml") + `: refused: a symbolic link out of the manifest directory (to "` + roots + `"): ` + outsideText,
			filepath.Join(dir, "b.yaml") + `: refused: a symbolic link out of the manifest directory (to "` + relative + `"): ` + outsideText,
			filepath.Join(dir, "c.yaml") + `: refused: a symbolic link out of the manifest directory (to "` + alices + `"): ` + outsideText,
		}, messages(r.Errors))
	})
}

// configMapVolume lays dir out as kubelet writes a ConfigMap volume (its
// AtomicWriter): the files (mode 0644, its defaultMode) in a directory of
// their own, ..data a link to it, each name a link to ..data/name.
func configMapVolume(t *testing.T, dir, version string, files map[string]string) {
	t.Helper()
	ts := "..2025_11_26_13_44_00." + version
	require.NoError(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(dir, ts), 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ts, name), []byte(content), 0o644))
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	// Swapped whole, as kubelet swaps it: a new link renamed over the old.
	require.NoError(t, os.Symlink(ts, filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
}

// A ConfigMap volume loads through its ..data links, and its updates (a
// new ..data) are seen: as the brief of the DaemonSet has it, and as
// kubelet mounts it in fact, a directory 0777 (an emptyDir's mode) on a
// read-only mount. A directory writable by others that is not such a
// volume is refused, and so is a file of it that others may write
// (defaultMode 0666). Fails on the old code: the refused ones load.
func TestLoadDirReadsAConfigMapVolume(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		t.Run("0755", func(t *testing.T) {
			dir := t.TempDir()
			configMapVolume(t, dir, "1", map[string]string{"pods.yaml": namedPod("web"), "more.yaml": namedPod("db")})
			d := NewDir(dir, nil)
			require.True(t, d.Reload())
			pods, errs := d.Pods()
			assert.Empty(t, errs)
			assert.Equal(t, []string{"db", "web"}, podNamesOf(pods))
			assert.Equal(t, filepath.Join(dir, "pods.yaml")+":1", pods[1].Source, "named as the volume names it")

			configMapVolume(t, dir, "2", map[string]string{"pods.yaml": namedPod("web2"), "more.yaml": namedPod("db")})
			require.True(t, d.Reload())
			pods, errs = d.Pods()
			assert.Empty(t, errs)
			assert.Equal(t, []string{"db", "web2"}, podNamesOf(pods))
		})

		// mkVolume makes a ConfigMap volume of mode 0777, as kubelet makes it.
		mkVolume := func(t *testing.T) string {
			dir := t.TempDir()
			configMapVolume(t, dir, "1", map[string]string{"pods.yaml": namedPod("web")})
			require.NoError(t, os.Chmod(dir, 0o777))
			return dir
		}
		// refused checks that dir is refused as writable by all.
		refused := func(t *testing.T, dir string) {
			pods, errs := LoadDir(dir)
			assert.Empty(t, pods)
			assert.Equal(t, []string{dir + ": refused: it is writable by its group or others (mode 0777): " + whyDirText + "; chmod go-w " + dir}, messages(errs))
		}
		t.Run("0777, mounted read-only, as kubelet mounts it", func(t *testing.T) {
			mountedReadOnly(t)
			pods, errs := LoadDir(mkVolume(t))
			assert.Empty(t, errs)
			assert.Equal(t, []string{"web"}, podNamesOf(pods))
		})
		t.Run("0777, not mounted read-only", func(t *testing.T) {
			refused(t, mkVolume(t))
		})
		t.Run("0777, read-only, without ..data", func(t *testing.T) {
			mountedReadOnly(t)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(namedPod("web")), 0o644))
			require.NoError(t, os.Chmod(dir, 0o777))
			refused(t, dir)
		})
		t.Run("0777, read-only, ..data writable by others", func(t *testing.T) {
			mountedReadOnly(t)
			dir := mkVolume(t)
			require.NoError(t, os.Chmod(filepath.Join(dir, "..data")+"/", 0o777))
			refused(t, dir)
		})
		t.Run("0777, read-only, ..data out of the directory", func(t *testing.T) {
			mountedReadOnly(t)
			dir := mkVolume(t)
			require.NoError(t, os.Remove(filepath.Join(dir, "..data")))
			require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(dir, "..data")))
			refused(t, dir)
		})
		t.Run("a file writable by others (defaultMode: 0666)", func(t *testing.T) {
			mountedReadOnly(t)
			dir := mkVolume(t)
			link := filepath.Join(dir, "pods.yaml")
			require.NoError(t, os.Chmod(link, 0o666))
			pods, errs := LoadDir(dir)
			assert.Empty(t, pods)
			assert.Equal(t, []string{link + ": refused: it is writable by its group or others (mode 0666): " + whyFileText + "; chmod go-w " + link}, messages(errs))
		})
	})
}

// A file given by name (validate FILE, play FILE) is the invoking user's
// own choice, as a script they run is: its owner, mode and place are not
// checked (what it is still is: TestLoadDirSkipsALinkToDevZero).
func TestLoadFileByNameIsTheUsersChoice(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte(namedPod("web")), 0o600))
	require.NoError(t, os.Chmod(path, 0o666))
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(path, 65534, 65534))
	}
	require.NoError(t, os.Chmod(dir, 0o777))
	link := filepath.Join(t.TempDir(), "link.yaml")
	require.NoError(t, os.Symlink(path, link))
	for _, name := range []string{path, link} {
		r := Load(name)
		assert.Empty(t, r.Errors)
		assert.Equal(t, []string{"web"}, podNamesOf(r.Pods))
	}
}

// A name swapped between a regular file and a FIFO while it is read never
// gets the FIFO opened: what is opened is what was looked at (found with
// O_PATH, reopened through /proc/self/fd), not what the name leads to a
// moment later. Opening a device can act (a watchdog arms); opening a FIFO
// shows it, as it wakes a writer waiting for a reader. Fails on the old
// code (it looked, then opened by name): the writer wakes.
func TestLoadNeverOpensWhatIsSwappedInAfterALook(t *testing.T) {
	tests := []struct {
		name  string
		loads int // enough for the old code to open the FIFO, under load
		load  func(dir, path string)
	}{
		{"in a manifest directory", 3000, func(dir, _ string) { LoadDir(dir) }},
		{"given by name", 20000, func(_, path string) { readManifest(path) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".real"), []byte("a: 1\n"), 0o644))
			fifo := filepath.Join(dir, ".fifo")
			require.NoError(t, syscall.Mkfifo(fifo, 0o644))
			path := filepath.Join(dir, "a.yaml")
			require.NoError(t, os.Symlink(".real", path))

			// Waits in its open until someone opens the FIFO to read.
			woke := make(chan error, 1)
			go func() {
				fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_CLOEXEC, 0)
				if err == nil {
					unix.Close(fd)
				}
				woke <- err
			}()
			// Swapped with a link to the FIFO, atomically, again and again.
			other := filepath.Join(dir, ".other")
			require.NoError(t, os.Symlink(".fifo", other))
			exchange := func() error {
				return unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
			}
			if err := exchange(); err != nil {
				t.Skipf("this file system cannot swap two names: %v", err)
			}
			require.NoError(t, exchange())
			stop := make(chan struct{})
			swaps := make(chan int, 1)
			go func() {
				n := 0
				for ; ; n++ {
					select {
					case <-stop:
						swaps <- n
						return
					default:
					}
					if exchange() != nil {
						swaps <- -1
						return
					}
				}
			}()
			opened := false
			for i := 0; i < tt.loads && !opened; i++ {
				tt.load(dir, path)
				select {
				case err := <-woke:
					require.NoError(t, err)
					opened = true
				default:
				}
			}
			close(stop)
			n := <-swaps
			if !opened {
				// Release the writer with an open of ours.
				fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				require.NoError(t, err)
				require.NoError(t, <-woke)
				unix.Close(fd)
			}
			assert.False(t, opened, "the FIFO swapped in after a look was opened")
			assert.Greater(t, n, 0, "the name was swapped")
		})
	}
}
