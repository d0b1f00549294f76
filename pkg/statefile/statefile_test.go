package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// outsideFile is a file outside the state directory, the target of links
// planted in it: it must never be written (or read through them).
func outsideFile(t *testing.T) (path string, content []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "precious")
	content = []byte("precious: not the agent's\n")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	return path, content
}

func assertUntouched(t *testing.T, path string, content []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(content), string(got), "the link's target outside the state directory was written")
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode()
}

func openTestDir(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := OpenDir(path)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// A missing state directory is created 0700 (its parents too); a new
// file is 0600 whatever the umask.
func TestOpenDirCreatesPrivate(t *testing.T) {
	old := unix.Umask(0)
	t.Cleanup(func() { unix.Umask(old) })
	path := filepath.Join(t.TempDir(), "a", "state")
	d := openTestDir(t, path+"/")
	assert.Equal(t, path, d.Path())
	assert.Equal(t, fs.ModeDir|0o700, mode(t, path))
	require.NoError(t, d.WriteFile("f", []byte("x")))
	assert.Equal(t, fs.FileMode(0o600), mode(t, filepath.Join(path, "f")))
}

// An existing directory that others could plant in, or that is not one,
// is refused with what to do; the refused directory is left as it was.
func TestOpenDirRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  []string
	}{
		{"a symbolic link to a directory", func(t *testing.T, path string) {
			real := t.TempDir()
			require.NoError(t, os.Chmod(real, 0o700))
			require.NoError(t, os.Symlink(real, path))
			t.Cleanup(func() {
				entries, err := os.ReadDir(real)
				require.NoError(t, err)
				assert.Empty(t, entries, "nothing written through the link")
			})
		}, []string{"is a symbolic link", "give the real directory's path"}},
		{"a dangling symbolic link", func(t *testing.T, path string) {
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "none"), path))
		}, []string{"is a symbolic link"}},
		{"a regular file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
		}, []string{"is not a directory", "remove it, or give another path"}},
		{"world-writable", func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chmod(path, 0o777))
		}, []string{"writable by its group or others (mode 0777)", "chmod 0700 "}},
		{"group-writable", func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chmod(path, 0o770))
		}, []string{"writable by its group or others (mode 0770)"}},
		{"another user's", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a directory to another uid")
			}
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.Chown(path, 65534, 65534))
		}, []string{"belongs to uid 65534, not to the agent's uid 0", "chown 0 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			tt.setup(t, path)
			before := mode(t, path)
			d, err := OpenDir(path)
			require.Error(t, err)
			assert.Nil(t, d)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), path)
			assert.Equal(t, before, mode(t, path), "left as it was")
		})
	}
}

// A directory of the agent's that others can only read or search (as
// systemd's StateDirectory= makes it, 0755) is made 0700.
func TestOpenDirTightensAReadableDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(path, 0o700))
	require.NoError(t, os.Chmod(path, 0o755))
	openTestDir(t, path)
	assert.Equal(t, fs.ModeDir|0o700, mode(t, path))
}

// names returns a suffix function giving each of list in turn, then
// "fresh0", "fresh1"…
func names(list ...string) func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n <= len(list) {
			return list[n-1]
		}
		return fmt.Sprintf("fresh%d", n-len(list)-1)
	}
}

// Links planted at the target's name and at the temporary file's name
// (here the first name WriteFile tries) never get their target written:
// the taken temporary name is skipped, and the rename replaces the link at
// the target, not what it points to.
func TestWriteFileFollowsNoLink(t *testing.T) {
	outside, content := outsideFile(t)
	path := filepath.Join(t.TempDir(), "state")
	d := openTestDir(t, path)
	d.suffix = names("planted")
	require.NoError(t, os.Symlink(outside, filepath.Join(path, "state.json")))
	require.NoError(t, os.Symlink(outside, filepath.Join(path, ".state.json.tmp-planted")))

	require.NoError(t, d.WriteFile("state.json", []byte("new")))
	assertUntouched(t, outside, content)
	assert.Equal(t, fs.FileMode(0o600), mode(t, filepath.Join(path, "state.json")), "a regular file in place of the link")
	got, err := os.ReadFile(filepath.Join(path, "state.json"))
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	assert.Equal(t, fs.ModeSymlink, mode(t, filepath.Join(path, ".state.json.tmp-planted")).Type(), "the planted link is left alone")
	entries, err := os.ReadDir(path)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary file left")
}

// A taken name for every attempt: WriteFile gives up rather than write
// anywhere else.
func TestWriteFileGivesUpWhenEveryTemporaryNameIsTaken(t *testing.T) {
	outside, content := outsideFile(t)
	path := filepath.Join(t.TempDir(), "state")
	d := openTestDir(t, path)
	d.suffix = func() string { return "same" }
	require.NoError(t, os.Symlink(outside, filepath.Join(path, ".f.tmp-same")))
	err := d.WriteFile("f", []byte("x"))
	require.ErrorIs(t, err, fs.ErrExist)
	assertUntouched(t, outside, content)
	assert.NoFileExists(t, filepath.Join(path, "f"))
}

// recorder records, in order, what a Dir asks of the kernel, and fails
// the calls named in fail.
type recorder struct {
	realSystem
	mu   sync.Mutex
	ops  []string
	fail map[string]error
}

func (r *recorder) record(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return r.fail[strings.Fields(op)[0]]
}

func flags(flag int) string {
	var out []string
	for _, f := range []struct {
		bit  int
		name string
	}{{unix.O_CREAT, "CREAT"}, {unix.O_EXCL, "EXCL"}, {unix.O_NOFOLLOW, "NOFOLLOW"}, {unix.O_APPEND, "APPEND"}} {
		if flag&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return strings.Join(out, "|")
}

func (r *recorder) openat(dirfd int, name string, flag int, perm uint32) (*os.File, error) {
	if err := r.record(fmt.Sprintf("openat %s %s %04o", name, flags(flag), perm)); err != nil {
		return nil, err
	}
	return r.realSystem.openat(dirfd, name, flag, perm)
}

func (r *recorder) write(f *os.File, data []byte) error {
	if err := r.record("write " + f.Name()); err != nil {
		return err
	}
	return r.realSystem.write(f, data)
}

func (r *recorder) fsync(f *os.File) error {
	if err := r.record("fsync " + f.Name()); err != nil {
		return err
	}
	return r.realSystem.fsync(f)
}

func (r *recorder) close(f *os.File) error {
	r.record("close " + f.Name())
	return r.realSystem.close(f)
}

func (r *recorder) renameat(dirfd int, from, to string) error {
	if err := r.record("renameat " + from + " " + to); err != nil {
		return err
	}
	return r.realSystem.renameat(dirfd, from, to)
}

func (r *recorder) unlinkat(dirfd int, name string) error {
	r.record("unlinkat " + name)
	return r.realSystem.unlinkat(dirfd, name)
}

func (r *recorder) fsyncDir(dirfd int) error {
	if err := r.record("fsyncdir"); err != nil {
		return err
	}
	return r.realSystem.fsyncDir(dirfd)
}

func recordedDir(t *testing.T, fail map[string]error) (*Dir, *recorder) {
	t.Helper()
	r := &recorder{fail: fail}
	d, err := openDir(filepath.Join(t.TempDir(), "state"), r)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	d.suffix = names()
	return d, r
}

// WriteFile: a new file (exclusive, no link, 0600), written, fsynced,
// closed, renamed over the target, then the directory fsynced: after a
// crash the target is the old content or the new, never part of it.
// Append: the existing file (no link), written, fsynced.
func TestSyncOrder(t *testing.T) {
	d, r := recordedDir(t, nil)
	require.NoError(t, d.WriteFile("f", []byte("a\n")))
	assert.Equal(t, []string{
		"openat .f.tmp-fresh0 CREAT|EXCL|NOFOLLOW 0600",
		"write .f.tmp-fresh0",
		"fsync .f.tmp-fresh0",
		"close .f.tmp-fresh0",
		"renameat .f.tmp-fresh0 f",
		"fsyncdir",
	}, r.ops)

	r.ops = nil
	require.NoError(t, d.Append("f", []byte("b\n")))
	assert.Equal(t, []string{
		"openat f NOFOLLOW|APPEND 0000",
		"write f",
		"fsync f",
		"close f",
	}, r.ops)
	got, err := os.ReadFile(filepath.Join(d.Path(), "f"))
	require.NoError(t, err)
	assert.Equal(t, "a\nb\n", string(got))
}

// A write or fsync that fails leaves the target as it was and no
// temporary file: nothing is renamed that was not fsynced.
func TestWriteFileFailureKeepsTheOldFile(t *testing.T) {
	for _, op := range []string{"write", "fsync", "renameat"} {
		t.Run(op, func(t *testing.T) {
			d, r := recordedDir(t, nil)
			require.NoError(t, d.WriteFile("f", []byte("old")))
			r.fail = map[string]error{op: syscall.EIO}
			err := d.WriteFile("f", []byte("new"))
			require.ErrorIs(t, err, syscall.EIO)
			got, rerr := os.ReadFile(filepath.Join(d.Path(), "f"))
			require.NoError(t, rerr)
			assert.Equal(t, "old", string(got))
			entries, rerr := os.ReadDir(d.Path())
			require.NoError(t, rerr)
			assert.Len(t, entries, 1, "the temporary file removed")
			if op != "renameat" {
				assert.NotContains(t, r.ops, "renameat .f.tmp-fresh1 f", "renamed after a failed %s", op)
			}
			assert.NotContains(t, r.ops[len(r.ops)-1], "fsyncdir")
		})
	}
}

// An append adds to the same file (same inode, earlier bytes unchanged);
// a link, a file with another name (hard link) or a missing file is
// refused and nothing is written.
func TestAppend(t *testing.T) {
	d := openTestDir(t, filepath.Join(t.TempDir(), "state"))
	path := filepath.Join(d.Path(), "log")
	require.NoError(t, d.WriteFile("log", []byte("one\n")))
	before, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, d.Append("log", []byte("two\n")))
	after, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "appended in place, not replaced")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(got))

	outside, content := outsideFile(t)
	require.NoError(t, os.Symlink(outside, filepath.Join(d.Path(), "link")))
	err = d.Append("link", []byte("evil\n"))
	require.ErrorIs(t, err, ErrUnsafe)
	assert.Contains(t, err.Error(), "is a symbolic link")
	assertUntouched(t, outside, content)

	hard := filepath.Join(filepath.Dir(d.Path()), "hard")
	require.NoError(t, os.WriteFile(hard, content, 0o600))
	require.NoError(t, os.Link(hard, filepath.Join(d.Path(), "hard")))
	err = d.Append("hard", []byte("evil\n"))
	require.ErrorIs(t, err, ErrUnsafe)
	assert.Contains(t, err.Error(), "has 2 names")
	assertUntouched(t, hard, content)

	require.ErrorIs(t, d.Append("none", []byte("x\n")), fs.ErrNotExist)
	assert.NoFileExists(t, filepath.Join(d.Path(), "none"), "an append creates nothing")
}

// ReadFile reads only a regular file of the agent's, up to its limit: a
// link is not followed, a FIFO is refused without waiting for a writer.
func TestReadFileRefuses(t *testing.T) {
	d := openTestDir(t, filepath.Join(t.TempDir(), "state"))
	outside, _ := outsideFile(t)
	require.NoError(t, os.Symlink(outside, filepath.Join(d.Path(), "link")))
	require.NoError(t, unix.Mkfifo(filepath.Join(d.Path(), "fifo"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(d.Path(), "dir"), 0o700))
	require.NoError(t, d.WriteFile("big", []byte("0123456789")))
	if os.Geteuid() == 0 {
		require.NoError(t, d.WriteFile("theirs", []byte("x")))
		require.NoError(t, os.Chown(filepath.Join(d.Path(), "theirs"), 65534, 65534))
	}
	tests := []struct{ name, want string }{
		{"link", "is a symbolic link"},
		{"fifo", "is not a regular file"},
		{"dir", "is not a regular file"},
		{"big", "is 10 bytes, over its limit of 9"},
		{"theirs", "belongs to uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "theirs" && os.Geteuid() != 0 {
				t.Skip("needs root to give a file to another uid")
			}
			type result struct {
				data []byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				data, err := d.ReadFile(tt.name, 9)
				done <- result{data, err}
			}()
			select {
			case r := <-done:
				require.ErrorIs(t, r.err, ErrUnsafe)
				assert.Contains(t, r.err.Error(), tt.want)
				assert.Nil(t, r.data)
			case <-time.After(time.Minute): // a deadline for a hang, not a timing
				t.Fatal("ReadFile blocked")
			}
		})
	}

	got, err := d.ReadFile("big", 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(got))
	_, err = d.ReadFile("none", 10)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.False(t, errors.Is(err, ErrUnsafe))
}

// Rename sets a link aside, not its target.
func TestRenameSetsALinkAside(t *testing.T) {
	d := openTestDir(t, filepath.Join(t.TempDir(), "state"))
	outside, content := outsideFile(t)
	require.NoError(t, os.Symlink(outside, filepath.Join(d.Path(), "f")))
	require.NoError(t, d.Rename("f", "f.bad"))
	assert.Equal(t, fs.ModeSymlink, mode(t, filepath.Join(d.Path(), "f.bad")).Type())
	assert.NoFileExists(t, filepath.Join(d.Path(), "f"))
	assertUntouched(t, outside, content)
}

// Names are names in the directory, never paths out of it.
func TestNamesStayInTheDirectory(t *testing.T) {
	d := openTestDir(t, filepath.Join(t.TempDir(), "state"))
	for _, name := range []string{"", ".", "..", "../x", "a/b", "/etc/passwd"} {
		assert.Error(t, d.WriteFile(name, nil), name)
		assert.Error(t, d.Append(name, nil), name)
		_, err := d.ReadFile(name, 1)
		assert.Error(t, err, name)
		assert.Error(t, d.Rename(name, "x"), name)
	}
}

// Trust accepts a file or directory that only one of the trusted uids can
// change, and otherwise says why not, its owner first.
func TestTrust(t *testing.T) {
	tests := []struct {
		name    string
		uid     uint32
		mode    uint32
		trusted []int
		want    *Untrusted
	}{
		{"root's, 0644", 0, unix.S_IFREG | 0o644, []int{0}, nil},
		{"the second uid's, 0700", 1000, unix.S_IFDIR | 0o700, []int{0, 1000}, nil},
		{"group-writable", 0, unix.S_IFREG | 0o664, []int{0}, &Untrusted{UID: 0, Mode: 0o664}},
		{"sticky and writable by all", 0, unix.S_IFDIR | 0o1777, []int{0}, &Untrusted{UID: 0, Mode: 0o1777}},
		{"another uid's", 65534, unix.S_IFREG | 0o644, []int{0, 1000}, &Untrusted{UID: 65534, Mode: 0o644, OtherOwner: true}},
		{"another uid's, writable by all", 65534, unix.S_IFREG | 0o666, []int{0}, &Untrusted{UID: 65534, Mode: 0o666, OtherOwner: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Trust(tt.uid, tt.mode, tt.trusted...))
		})
	}
}
