package logs

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A container's log directory is the workload's to write into (a container
// given /var/log as a hostPath can plant files and links there), so every
// operation on it and on the link directory goes through a logDir: the
// directory opened without following a link on the last components of its
// path, those under the operator's directories (a pod's and its
// container's log directories; the link directory), and each file in it
// acted on by name relative to that descriptor, never following a link: a
// link or any other file that is not regular is never opened, compressed,
// renamed or counted. Above them, the operator's paths (/var/log may be a
// link on some hosts) are followed.

// maxScanned bounds the entries a listing of a log directory reads, and
// maxListed the files of one log it returns: a directory holding more is
// not the runtime's doing.
const (
	maxScanned = 1 << 16
	maxListed  = 1 << 10
)

var errTooMany = errors.New("too many files")

// linkSeq numbers the temporary names of links being made.
var linkSeq atomic.Uint64

// logDir is an open log directory.
type logDir struct {
	fd   int
	path string
}

// openDir opens the directory at path without following a link on its
// last own components (the rest of the path is the operator's).
func openDir(path string, own int) (*logDir, error) {
	path = filepath.Clean(path)
	parts := []string{}
	top := path
	for range own {
		parts = append([]string{filepath.Base(top)}, parts...)
		top = filepath.Dir(top)
	}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for _, p := range parts {
		if err != nil {
			break
		}
		var next int
		next, err = unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		fd = next
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			err = fmt.Errorf("not a directory, or a symbolic link: %w", err)
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &logDir{fd: fd, path: path}, nil
}

// Directories' own components: a container's log directory is its pod's
// (<pod-logs-dir>/<ns>_<name>_<uid>/<container>), the link directory is
// one.
const (
	logDirOwn  = 2
	linkDirOwn = 1
)

func (d *logDir) Close() error { return unix.Close(d.fd) }

func (d *logDir) name(n string) string { return strings.TrimSuffix(d.path, "/") + "/" + n }

// file is a regular file of a log directory.
type file struct {
	name string
	size int64
}

// stat describes a file without following a link.
func (d *logDir) stat(name string) (size int64, mode fs.FileMode, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, 0, &fs.PathError{Op: "lstat", Path: d.name(name), Err: err}
	}
	return st.Size, modeOf(st.Mode), nil
}

func modeOf(m uint32) fs.FileMode {
	perm := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return perm
	case unix.S_IFDIR:
		return perm | fs.ModeDir
	case unix.S_IFLNK:
		return perm | fs.ModeSymlink
	}
	return perm | fs.ModeIrregular
}

// list returns the regular files whose names start with prefix, and the
// names of the others (links, directories…), which are left alone.
func (d *logDir) list(prefix string) (files []file, others []string, err error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	scanned := 0
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			if len(files)+len(others) >= maxListed {
				return nil, nil, fmt.Errorf("list %s: more than %d files named %s*: %w", d.path, maxListed, prefix, errTooMany)
			}
			size, mode, err := d.stat(e.Name())
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return nil, nil, err
			case mode.IsRegular():
				files = append(files, file{name: e.Name(), size: size})
			default:
				others = append(others, e.Name())
			}
		}
		scanned += len(entries)
		switch {
		case err == io.EOF:
			return files, others, nil
		case err != nil:
			return nil, nil, fmt.Errorf("list %s: %w", d.path, err)
		case scanned >= maxScanned:
			return nil, nil, fmt.Errorf("list %s: more than %d entries: %w", d.path, maxScanned, errTooMany)
		}
	}
}

// remove removes a file (a link itself, never what it points to); one
// already gone counts as removed.
func (d *logDir) remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove", Path: d.name(name), Err: err}
	}
	return nil
}

// rename renames a file in the directory, replacing what has the new name
// (a link there is replaced, not followed).
func (d *logDir) rename(from, to string) error {
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.name(from), New: d.name(to), Err: err}
	}
	return nil
}

// openRegular opens a regular file for reading, never through a link.
func (d *logDir) openRegular(name string) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.name(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.name(name))
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v)", f.Name(), info.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// compress compresses a rotated file to <name>.gz with gzip, through
// <name>.gz.tmp, and removes it: kubelet's compressLog.
func (d *logDir) compress(name string) error {
	r, err := d.openRegular(name)
	if err != nil {
		return fmt.Errorf("failed to open log %q: %w", d.name(name), err)
	}
	defer r.Close()
	info, err := r.Stat()
	if err != nil {
		return fmt.Errorf("failed to stat log file: %w", err)
	}
	tmp := name + TmpSuffix
	if err := d.remove(tmp); err != nil {
		return err
	}
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(info.Mode().Perm()))
	if err != nil {
		return fmt.Errorf("failed to create temporary log %q: %w", d.name(tmp), err)
	}
	f := os.NewFile(uintptr(fd), d.name(tmp))
	defer func() {
		f.Close()
		_ = d.remove(tmp) // best effort, as kubelet's; gone once renamed
	}()
	w := gzip.NewWriter(f)
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("failed to compress %q to %q: %w", d.name(name), d.name(tmp), err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("failed to compress %q to %q: %w", d.name(name), d.name(tmp), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to compress %q to %q: %w", d.name(name), d.name(tmp), err)
	}
	compressed := name + CompressSuffix
	if err := d.rename(tmp, compressed); err != nil {
		return fmt.Errorf("failed to rename %q to %q: %w", d.name(tmp), d.name(compressed), err)
	}
	if err := d.remove(name); err != nil {
		return fmt.Errorf("failed to remove log %q after compress: %w", d.name(name), err)
	}
	return nil
}

// symlink makes name a link to target, replacing what has that name (a
// file or a link; a directory stays and is an error) without following
// it: the link is made under a temporary name, then renamed.
func (d *logDir) symlink(target, name string) error {
	tmp := fmt.Sprintf(".%d.%d%s", os.Getpid(), linkSeq.Add(1), TmpSuffix) // name+TmpSuffix could pass 255 bytes
	if err := d.remove(tmp); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, d.fd, tmp); err != nil {
		return &os.LinkError{Op: "symlink", Old: target, New: d.name(tmp), Err: err}
	}
	if err := d.rename(tmp, name); err != nil {
		_ = d.remove(tmp)
		return err
	}
	return nil
}
