package manifests

import (
	"bytes"
	"fmt"
	"net"
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

// releaseFIFO opens a FIFO for writing, without waiting, and closes it: a
// reader blocked in its open gets end of file.
func releaseFIFO(path string) func() {
	return func() {
		if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	}
}

func messages(errs []*spec.Error) []string {
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return msgs
}

// loadPods loads data as a file of a manifest directory: its pods and
// errors.
func loadPods(path string, data []byte) ([]*spec.Pod, []*spec.Error) {
	f := spec.DecodeFile(path, data, nil)
	return f.Pods, f.Errors
}

func notices(skipped []*spec.Notice) []string {
	var msgs []string
	for _, n := range skipped {
		msgs = append(msgs, n.String())
	}
	return msgs
}

// A FIFO among the manifests (or as the directory) used to block the load
// (its open waits for a writer) and with it start-up and the manager: now
// it is skipped at once, reported by path, and the rest loads. Fails on the
// old code: the load never returns.
func TestLoadDirSkipsAFIFOPromptly(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(inputs.WebPod(3)), 0o644))
	fifo := filepath.Join(dir, "b.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	var pods []*spec.Pod
	var errs []*spec.Error
	inputs.Promptly(t, 8<<20, releaseFIFO(fifo), func() { pods, errs = LoadDir(dir) })
	require.Len(t, pods, 1, "the rest of the directory loads")
	assert.Equal(t, []string{fifo + ": skipped: a named pipe (FIFO), not a regular file: only regular files, directly or through a symbolic link, are read"},
		messages(errs))

	t.Run("as the directory", func(t *testing.T) {
		inputs.Promptly(t, 8<<20, releaseFIFO(fifo), func() { pods, errs = LoadDir(fifo) })
		assert.Empty(t, pods)
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0].Error(), fifo+": cannot read the manifest directory: ")
		assert.Contains(t, errs[0].Error(), "not a directory")
	})
	t.Run("as a file", func(t *testing.T) {
		inputs.Promptly(t, 8<<20, releaseFIFO(fifo), func() { r := Load(fifo); pods, errs = r.Pods, r.Errors })
		assert.Empty(t, pods)
		assert.Len(t, errs, 1)
	})
}

// A link to /dev/zero used to be read until memory ran out: now it is
// refused having read nothing, in a manifest directory as a link out of
// it, given by name as not a regular file; and a device made in the
// directory is not opened either. Fails on the old code: the load
// allocates without end (the test panics past 512 MiB).
func TestLoadDirSkipsALinkToDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	const only = "only regular files, directly or through a symbolic link, are read"
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(inputs.WebPod(3)), 0o644))
	link := filepath.Join(dir, "zero.yaml")
	require.NoError(t, os.Symlink("/dev/zero", link))

	var pods []*spec.Pod
	var errs []*spec.Error
	inputs.Promptly(t, 8<<20, nil, func() { pods, errs = LoadDir(dir) })
	require.Len(t, pods, 1)
	assert.Equal(t, []string{link + `: refused: a symbolic link out of the manifest directory (to "/dev/zero"): ` + outsideText},
		messages(errs))

	t.Run("given by name", func(t *testing.T) {
		inputs.Promptly(t, 8<<20, nil, func() { r := Load(link); pods, errs = r.Pods, r.Errors })
		assert.Empty(t, pods)
		assert.Equal(t, []string{link + ": skipped: a symbolic link to a character device, not to a regular file: " + only}, messages(errs))
	})
	t.Run("made in the directory", func(t *testing.T) {
		require.NoError(t, os.Remove(link))
		dev := filepath.Join(dir, "dev.yaml")
		if err := unix.Mknod(dev, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
			t.Skipf("cannot make a device like /dev/zero: %v", err)
		}
		require.NoError(t, os.Symlink("dev.yaml", filepath.Join(dir, "devlink.yaml")))
		inputs.Promptly(t, 8<<20, nil, func() { pods, errs = LoadDir(dir) })
		require.Len(t, pods, 1)
		assert.Equal(t, []string{
			dev + ": skipped: a character device, not a regular file: " + only,
			filepath.Join(dir, "devlink.yaml") + ": skipped: a symbolic link to a character device, not to a regular file: " + only,
		}, messages(errs))
	})
}

// A file over MaxFileSize is refused by name, not read in part; one at
// the limit loads. Fails on the old code: the large file loads.
func TestLoadDirRefusesAFileOverTheLimit(t *testing.T) {
	dir := t.TempDir()
	padded := func(manifest string, size int) []byte {
		b := []byte(manifest + "# ")
		b = append(b, bytes.Repeat([]byte("x"), size-len(b)-1)...)
		return append(b, '\n')
	}
	atLimit := padded(inputs.WebPod(3), MaxFileSize)
	over := padded(strings.Replace(inputs.WebPod(3), "name: web", "name: db", 1), MaxFileSize+1)
	require.Len(t, atLimit, MaxFileSize)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), atLimit, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), over, 0o644))

	pods, errs := LoadDir(dir)
	require.Len(t, pods, 1)
	assert.Equal(t, filepath.Join(dir, "a.yaml")+":1", pods[0].Source, "the file at the limit")
	assert.Equal(t, []string{filepath.Join(dir, "b.yaml") + ": refused: larger than 1048576 bytes (1 MiB), the most a manifest file may hold; split it into several files"},
		messages(errs))
}

// Directories and sockets are reported by path and skipped; the old code
// skipped directories silently and failed to open a socket with ENXIO.
func TestLoadDirSkipsDirectoriesAndSockets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(inputs.WebPod(3)), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "old"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755))
	require.NoError(t, os.Symlink("old", filepath.Join(dir, "link.yaml")))
	sock, err := net.Listen("unix", filepath.Join(dir, "s.yaml"))
	require.NoError(t, err)
	defer sock.Close()

	r := Load(dir)
	require.Len(t, r.Pods, 1)
	const only = "only regular files, directly or through a symbolic link, are read"
	assert.Equal(t, []string{
		"skipped " + filepath.Join(dir, "old") + ": a directory: manifests in subdirectories are not read",
		"skipped " + filepath.Join(dir, "sub.yaml") + ": a directory: manifests in subdirectories are not read",
	}, notices(r.Skipped), "directories: noted, not errors")
	// Names of manifests that lead to no regular file are errors: what
	// they hold is not probed.
	assert.Equal(t, []string{
		filepath.Join(dir, "link.yaml") + ": skipped: a symbolic link to a directory, not to a regular file: " + only,
		filepath.Join(dir, "s.yaml") + ": skipped: a socket, not a regular file: " + only,
	}, messages(r.Errors))
}

// At most MaxFiles files are read per scan, the first in name
// order; the others are reported once, naming the first of them. Fails on
// the old code: every file is read.
func TestLoadDirReadsAtMostMaxManifestFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxFiles {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("a%04d.yaml", i)), nil, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "z1.yaml"), []byte(inputs.WebPod(3)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "z2.yaml"), []byte(inputs.WebPod(3)), 0o644))

	l, err := listDir(dir, false)
	require.NoError(t, err)
	l.close()
	files, ignored := l.files, l.errs
	assert.Equal(t, MaxFiles, len(files))
	pods, errs := LoadDir(dir)
	assert.Empty(t, pods, "z1.yaml and z2.yaml are not read")
	want := []string{filepath.Join(dir, "z1.yaml") + ": not read, nor the 1 manifest file(s) after it in name order: at most 1000 manifest files are read from a directory"}
	assert.Equal(t, want, messages(errs))
	assert.Equal(t, want, messages(ignored))
}

// A directory of more than MaxDirEntries entries is looked at no
// further, and says so. Fails on the old code: it lists them all.
func TestManifestFilesListsAtMostMaxManifestDirEntries(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxDirEntries + 1 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf(".junk%05d", i)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	l, err := listDir(dir, false)
	require.NoError(t, err)
	l.close()
	ignored := l.errs
	assert.Equal(t, []string{dir + ": more than 10000 entries: only the first 10000 the system listed are looked at, the others are ignored; keep manifests in a directory of their own"},
		messages(ignored))
}
