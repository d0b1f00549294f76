package logs

import (
	"compress/gzip"
	"context"
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

// errOutside is a log path the agent does not act on: not under the pod
// logs directory, or not a plain path there.
var errOutside = errors.New("not under the pod logs directory")

// openBeneath opens the directory dir, which must lie under root (the
// agent's pod logs directory), resolving dir from a descriptor on root
// component by component with no link followed: openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, else a
// walk of O_NOFOLLOW|O_DIRECTORY opens. root itself is the operator's
// path, followed.
func openBeneath(root, dir string) (*logDir, error) {
	rel, err := beneath(root, dir)
	if err != nil {
		return nil, err
	}
	rfd, err := unix.Open(filepath.Clean(root), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	if rel == "." {
		return &logDir{fd: rfd, path: filepath.Clean(dir)}, nil
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) { // an older kernel, or a seccomp filter
		fd, err = walkBeneath(rfd, rel)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
			err = fmt.Errorf("not a directory, or a symbolic link: %w", err)
		}
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &logDir{fd: fd, path: filepath.Clean(dir)}, nil
}

// beneath is dir relative to root, if dir is an absolute path under root
// (root itself: ".") with no "." or ".." component.
func beneath(root, dir string) (string, error) {
	dir = strings.TrimSuffix(dir, "/")
	if root == "" || !filepath.IsAbs(root) || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return "", fmt.Errorf("%q: %w %q", dir, errOutside, root)
	}
	rel, err := filepath.Rel(filepath.Clean(root), dir)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%q: %w %q", dir, errOutside, root)
	}
	return rel, nil
}

// openLogBeneath opens the directory of a container's log file at path, which
// must lie under root (openBeneath), and returns the file's name in it.
func openLogBeneath(root, path string) (*logDir, string, error) {
	dir, base := filepath.Split(path)
	if !validComponent(base) {
		return nil, "", fmt.Errorf("%q: %w %q", path, errOutside, root)
	}
	d, err := openBeneath(root, dir)
	return d, base, err
}

// validComponent says whether s can be one component of a path: not
// empty, not "." or "..", no "/" and no NUL.
func validComponent(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// walkBeneath opens rel under the directory at rfd a component at a time,
// following no link.
func walkBeneath(rfd int, rel string) (int, error) {
	fd, err := unix.Dup(rfd)
	if err != nil {
		return -1, err
	}
	for _, p := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
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

// each calls fn with the name of each entry of the directory, read in
// batches: nothing is held but the batch; fn returns false to stop.
func (d *logDir) each(fn func(name string) bool) error {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if !fn(n) {
				return nil
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("list %s: %w", d.path, err)
		}
	}
}

// list returns the regular files whose names match, and the names of the
// others (links, directories…), which are left alone. It reads at most
// maxScanned entries and returns at most maxListed names: past either
// bound, full says so and what was found is returned, so that a
// directory a container filled still has its log rotated and its oldest
// files found removed, a batch at each round.
func (d *logDir) list(match func(name string) bool) (files []file, others []string, full bool, err error) {
	scanned := 0
	err = d.each(func(name string) bool {
		if scanned++; scanned > maxScanned {
			full = true
			return false
		}
		if !match(name) {
			return true
		}
		if len(files)+len(others) >= maxListed {
			full = true
			return false
		}
		size, mode, serr := d.stat(name)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
		case serr != nil:
			err = serr
			return false
		case mode.IsRegular():
			files = append(files, file{name: name, size: size})
		default:
			others = append(others, name)
		}
		return true
	})
	if err != nil {
		return nil, nil, false, err
	}
	return files, others, full, nil
}

// usage is the disk space the regular files of the directory take (their
// allocated blocks, as du counts them; kubelet's container log usage), of
// its first maxScanned entries.
func (d *logDir) usage() (int64, error) {
	var total int64
	scanned := 0
	err := d.each(func(name string) bool {
		if scanned++; scanned > maxScanned {
			return false
		}
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			total += st.Blocks * 512
		}
		return true
	})
	return total, err
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

// openRegular opens a regular file for reading, never through a link and
// never opening anything else: the name is first opened O_PATH (which
// opens no device, FIFO or socket: their open has no effect), its type
// checked on that descriptor, then that very file reopened for reading
// through /proc/self/fd, as runc does; what is planted between a listing
// and the open is never read.
func (d *logDir) openRegular(name string) (*os.File, error) {
	pfd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.name(name), Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: d.name(name), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file (%v)", d.name(name), modeOf(st.Mode).Type())
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "reopen", Path: d.name(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.name(name)), nil
}

// ErrTooLarge is a rotated file larger than the runtime could have
// written: compress removes it rather than read it.
var ErrTooLarge = errors.New("larger than a rotated log file can be")

// compress compresses a rotated file to <name>.gz with gzip, through
// <name>.tmp, and removes it: kubelet's compressLog. A file of more than
// limit bytes is not the runtime's (it rotates at MaxSize, and one round
// lets it pass that by what it writes in a monitor interval): it is
// removed, not read, and ErrTooLarge returned (a sparse terabyte planted
// under a rotated file's name would hold the only worker for hours). The
// copy stops with ctx.
func (d *logDir) compress(ctx context.Context, name string, limit int64) error {
	r, err := d.openRegular(name)
	if err != nil {
		return fmt.Errorf("failed to open log %q: %w", d.name(name), err)
	}
	defer r.Close()
	info, err := r.Stat()
	if err != nil {
		return fmt.Errorf("failed to stat log file: %w", err)
	}
	if info.Size() > limit {
		if err := d.remove(name); err != nil {
			return err
		}
		return fmt.Errorf("removed %q, of %d bytes, not compressed: %w (%d bytes)", d.name(name), info.Size(), ErrTooLarge, limit)
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
	n, err := io.Copy(w, io.LimitReader(ctxReader{ctx: ctx, r: r}, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("it grew past %d bytes: %w", limit, ErrTooLarge)
	}
	if err != nil {
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

// ctxReader reads r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
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
