// Package statefile keeps an agent's state files safe from the node's other
// users and from crashes. A state directory is the agent's own: created
// 0700, and refused when it is a symbolic link, not a directory, another
// user's, or writable by its group or others. In it no link is ever
// followed: a file is written whole through a temporary file of a unique
// name (created O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), fsynced, renamed over
// the target, and the directory fsynced; or appended to (O_APPEND, fsynced);
// and read only when it is a regular file of the agent's, up to a stated
// size. Every operation is relative to the directory opened once, so the
// directory cannot be swapped under it.
//
// It imports nothing from this module: every layer may use it.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by the errors of ReadFile and Append for a file the
// agent does not write there: a symbolic link, not a regular file, another
// user's, a file with other names (hard links), or one over its size. Such
// a file is not read or written; its user may set it aside (Rename).
var ErrUnsafe = errors.New("not a state file of the agent's")

// tempAttempts bounds the names tried for a temporary file (each taken name,
// a leftover or a planted link, costs one attempt).
const tempAttempts = 100

// Dir is a state directory, opened without following a link. Close it.
// Not safe for concurrent use.
type Dir struct {
	path   string
	fd     int // O_DIRECTORY|O_NOFOLLOW
	sys    system
	suffix func() string // a temporary file's unique part
}

// OpenDir opens the state directory path, creating it (0700) and its
// parents (0755) when missing. An existing directory is refused when it is
// a symbolic link, not a directory, not owned by the agent's effective
// uid, or writable by its group or others; one that is only readable or
// searchable by them is made 0700. Each error says what to do. (Links in
// its parents are followed: they are the operator's choice of path, and
// only the directory itself is the agent's.)
func OpenDir(path string) (*Dir, error) {
	return openDir(path, realSystem{})
}

func openDir(path string, sys system) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state directory: no path given")
	}
	path = filepath.Clean(path) // a trailing slash would follow a link
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	fd, err := openRetry(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, dirOpenError(path, err)
	}
	if err := checkDir(path, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Dir{path: path, fd: fd, sys: sys, suffix: randomSuffix}, nil
}

// dirOpenError says why path could not be opened as a directory.
func dirOpenError(path string, err error) error {
	fi, lerr := os.Lstat(path)
	switch {
	case lerr == nil && fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return fmt.Errorf("state directory %s is a symbolic link (to %q): the agent follows no link in its state; "+
			"give the real directory's path, or remove the link so that the agent creates the directory", path, target)
	case lerr == nil && !fi.IsDir():
		return fmt.Errorf("state directory %s is not a directory (%s): remove it, or give another path", path, fi.Mode().Type())
	}
	return fmt.Errorf("state directory %s: %w", path, err)
}

// checkDir refuses a directory other users could plant files in, and makes
// one they could only read 0700.
func checkDir(path string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("state directory %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("state directory %s is not a directory: remove it, or give another path", path)
	}
	uid := os.Geteuid()
	if u := Trust(st.Uid, st.Mode, uid); u != nil {
		if u.OtherOwner {
			return fmt.Errorf("state directory %s belongs to uid %d, not to the agent's uid %d: "+
				"chown %d %s (and chmod 0700 it), or give a directory of the agent's own", path, st.Uid, uid, uid, path)
		}
		return fmt.Errorf("state directory %s is writable by its group or others (mode %04o): "+
			"whoever can write there can plant links or files in the agent's state; chmod 0700 %s", path, u.Mode, path)
	}
	mode := st.Mode & 0o7777
	if mode != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("state directory %s has mode %04o and cannot be made 0700: %w", path, mode, err)
		}
	}
	return nil
}

// Untrusted says why a file or directory is not its owner's alone, so that
// what it holds may be another user's doing.
type Untrusted struct {
	UID        uint32 // its owner
	Mode       uint32 // its permission bits (07777)
	OtherOwner bool   // it belongs to none of the trusted uids; else its group or others may write it
}

// Trust returns nil when only one of the trusted uids can change a file or
// directory of owner uid and mode (st_uid and st_mode, as fstat gives
// them): it belongs to one of them, and neither its group nor others may
// write it. Otherwise it says which is wrong, its owner first.
func Trust(uid, mode uint32, trusted ...int) *Untrusted {
	u := &Untrusted{UID: uid, Mode: mode & 0o7777, OtherOwner: true}
	for _, t := range trusted {
		if int64(t) == int64(uid) {
			u.OtherOwner = false
		}
	}
	if !u.OtherOwner && u.Mode&0o022 == 0 {
		return nil
	}
	return u
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// Close closes the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// WriteFile replaces the file name with data, never half written and never
// through a link: data goes to a new temporary file of a unique name
// (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) which is fsynced and renamed over name
// (replacing a link there, not its target), and then the directory is
// fsynced so that the rename survives a crash.
func (d *Dir) WriteFile(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	tmp, f, err := d.createTemp(name)
	if err != nil {
		return err
	}
	err = d.sys.write(f, data)
	if err == nil {
		err = d.sys.fsync(f)
	}
	if cerr := d.sys.close(f); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.sys.renameat(d.fd, tmp, name)
	}
	if err != nil {
		d.sys.unlinkat(d.fd, tmp) // best effort: the error to say is err
		return fmt.Errorf("writing %s: %w", d.join(name), err)
	}
	if err := d.sys.fsyncDir(d.fd); err != nil {
		return fmt.Errorf("writing %s: syncing the directory: %w", d.join(name), err)
	}
	return nil
}

// createTemp creates a new file for name's next content, under a name no
// file or link has.
func (d *Dir) createTemp(name string) (string, *os.File, error) {
	var err error
	for range tempAttempts {
		tmp := "." + name + ".tmp-" + d.suffix()
		var f *os.File
		f, err = d.sys.openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return tmp, f, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return "", nil, fmt.Errorf("writing %s: creating a temporary file: %w", d.join(name), err)
}

// Append appends data to the file name, which must exist: a regular file of
// the agent's with no other name, opened without following a link. The
// file is fsynced before Append returns. An error may leave part of data
// written: its user then rewrites the file whole (WriteFile).
func (d *Dir) Append(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	f, err := d.open(name, unix.O_WRONLY|unix.O_APPEND)
	if err != nil {
		return err
	}
	defer d.sys.close(f) // fsynced before: a close error loses nothing
	if _, err := d.check(name, f, -1, true); err != nil {
		return err
	}
	if err := d.sys.write(f, data); err != nil {
		return fmt.Errorf("appending to %s: %w", d.join(name), err)
	}
	if err := d.sys.fsync(f); err != nil {
		return fmt.Errorf("appending to %s: %w", d.join(name), err)
	}
	return nil
}

// ReadFile returns the content of the file name if it is a regular file of
// the agent's of at most limit bytes; it is opened without following a
// link and without blocking (a FIFO there is refused, not waited on). A
// missing file's error matches fs.ErrNotExist; a refused one's ErrUnsafe.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.open(name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer d.sys.close(f)
	if _, err := d.check(name, f, limit, false); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", d.join(name), err)
	case int64(len(data)) > limit:
		return nil, fmt.Errorf("%s grew over its limit of %d bytes: %w", d.join(name), limit, ErrUnsafe)
	}
	return data, nil
}

// Rename renames the file (or link, or whatever it is) from to to, in the
// directory, and fsyncs the directory: to set a file aside. A file at to
// is replaced.
func (d *Dir) Rename(from, to string) error {
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	if err := d.sys.renameat(d.fd, from, to); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", d.join(from), to, err)
	}
	if err := d.sys.fsyncDir(d.fd); err != nil {
		return fmt.Errorf("renaming %s to %s: syncing the directory: %w", d.join(from), to, err)
	}
	return nil
}

// open opens name for flag, never following a link, never blocking on a
// FIFO, never taking a terminal.
func (d *Dir) open(name string, flag int) (*os.File, error) {
	f, err := d.sys.openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		target, _ := os.Readlink(d.join(name))
		return nil, fmt.Errorf("%s is a symbolic link (to %q), not followed: %w", d.join(name), target, ErrUnsafe)
	case errors.Is(err, unix.ENXIO): // a FIFO without a reader, a socket
		return nil, fmt.Errorf("%s is not a regular file: %w", d.join(name), ErrUnsafe)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	return f, nil
}

// check refuses what the agent does not write: not a regular file, another
// user's, over limit bytes (limit < 0: any size), or (one) with another
// name. It returns the file's size.
func (d *Dir) check(name string, f *os.File, limit int64, one bool) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", d.join(name), err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file (%s): %w", d.join(name), fi.Mode().Type(), ErrUnsafe)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int64(st.Uid) != int64(uid) {
			return 0, fmt.Errorf("%s belongs to uid %d, not to the agent's uid %d: %w", d.join(name), st.Uid, uid, ErrUnsafe)
		}
		if one && uint64(st.Nlink) != 1 {
			return 0, fmt.Errorf("%s has %d names (hard links), not one: %w", d.join(name), st.Nlink, ErrUnsafe)
		}
	}
	if limit >= 0 && fi.Size() > limit {
		return 0, fmt.Errorf("%s is %d bytes, over its limit of %d: %w", d.join(name), fi.Size(), limit, ErrUnsafe)
	}
	return fi.Size(), nil
}

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

// checkName accepts a file's name in the directory, not a path.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return fmt.Errorf("state file name %q: want a name in the state directory", name)
	}
	return nil
}

func randomSuffix() string { return strconv.FormatUint(rand.Uint64(), 36) }

func openRetry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// system is what a Dir asks of the kernel: the real calls, or in a test a
// recorder of their order around them.
type system interface {
	openat(dirfd int, name string, flag int, perm uint32) (*os.File, error)
	write(f *os.File, data []byte) error
	fsync(f *os.File) error
	close(f *os.File) error
	renameat(dirfd int, from, to string) error
	unlinkat(dirfd int, name string) error
	fsyncDir(dirfd int) error
}

type realSystem struct{}

func (realSystem) openat(dirfd int, name string, flag int, perm uint32) (*os.File, error) {
	fd, err := openRetry(func() (int, error) { return unix.Openat(dirfd, name, flag, perm) })
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (realSystem) write(f *os.File, data []byte) error {
	_, err := f.Write(data) // all of data, or an error
	return err
}

func (realSystem) fsync(f *os.File) error { return f.Sync() }

func (realSystem) close(f *os.File) error { return f.Close() }

func (realSystem) renameat(dirfd int, from, to string) error {
	return unix.Renameat(dirfd, from, dirfd, to)
}

func (realSystem) unlinkat(dirfd int, name string) error { return unix.Unlinkat(dirfd, name, 0) }

func (realSystem) fsyncDir(dirfd int) error {
	for {
		if err := unix.Fsync(dirfd); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
