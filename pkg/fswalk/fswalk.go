// Package fswalk walks a directory tree a workload may have built (an
// emptyDir a container wrote), as GNU rm's fts and du walk one, bounded
// whatever the tree: iteratively with at most three descriptors open (the
// root the caller holds, the directory being read and one being opened),
// reading each directory in batches of one getdents buffer, never following
// a link (every directory is opened O_NOFOLLOW and its dev/inode checked
// against its parent's listing, so that one swapped for a link or moved
// between the listing and the open is not entered), never leaving the root's
// mount, counting the entries it visits against a bound, and naming entries
// in errors by short paths relative to the root.
//
// It imports nothing of ours: pkg/podfs removes volumes with it and
// pkg/eviction measures them.
package fswalk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// bufSize is one getdents batch: at most about 1,300 names (24-byte
	// records) are in memory at a time, as os.RemoveAll's removeAllFrom
	// reads 1,024 names at a time.
	bufSize = 32 << 10
	// maxErrors is how many errors a walk keeps (the others are counted),
	// and maxFailures how many it tolerates before it stops.
	maxErrors   = 8
	maxFailures = 1024
	// maxRescans is how many times a directory is listed again when its
	// Leave asks (entries missed by a file system whose offsets move when
	// entries are removed, or added meanwhile).
	maxRescans = 8
	// pathHead and pathTail bound a path in an error: its first and last
	// bytes around "…".
	pathHead = 64
	pathTail = 160
)

var (
	// ErrTooManyEntries is returned when a walk passes its MaxEntries.
	ErrTooManyEntries = errors.New("too many entries")
	// SkipDir, returned by Visit for a directory, leaves it unentered.
	SkipDir = errors.New("skip this directory")
	// ErrRescan, returned by Leave, lists the directory again (at most a
	// few times).
	ErrRescan = errors.New("list the directory again")
	// ErrBelow, returned by Visit or Leave, marks the entry failed for an
	// error already reported under it: it is counted, not reported again.
	ErrBelow = errors.New("failed for an error below")
)

// Entry is one entry of the tree, given to Visit and Leave.
type Entry struct {
	// Dir is the open directory holding the entry, valid during the call
	// only; Name its name there.
	Dir  int
	Name string
	// Stat is the entry's lstat, taken from Dir.
	Stat unix.Stat_t
	// Depth is 1 for the root's entries.
	Depth int
	// MountPoint: a directory on another file system or mount, which the
	// walk does not enter.
	MountPoint bool
	// Done and Failed, for Leave: how many of the directory's entries were
	// visited without and with an error in its last listing.
	Done, Failed int

	w *walk
}

// IsDir reports whether the entry is a directory.
func (e *Entry) IsDir() bool { return e.Stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// Path is the entry's path: Walker.Root, then its path from the root cut
// to a few hundred bytes (its first and last names), for an error or a
// log line.
func (e *Entry) Path() string {
	names := e.w.stack[1:e.Depth]
	var head strings.Builder
	i := 0
	for ; i < len(names) && head.Len() < pathHead; i++ {
		head.WriteString(names[i].name)
		head.WriteString("/")
	}
	tail := e.Name
	j := len(names)
	for ; j > i && len(tail) < pathTail; j-- {
		tail = names[j-1].name + "/" + tail
	}
	rel := head.String()
	if j > i {
		rel += "…/"
	}
	return e.w.root + "/" + Short(rel+tail)
}

// Short cuts a path to its first and last bytes, at most a few hundred.
func Short(p string) string {
	if len(p) <= pathHead+pathTail+len("/…/") {
		return p
	}
	return strings.ToValidUTF8(p[:pathHead], "") + "…" + strings.ToValidUTF8(p[len(p)-pathTail:], "")
}

// Walker is one walk's callbacks and bounds.
type Walker struct {
	// Root names the root in errors (a volume's name, say).
	Root string
	// MaxEntries, if positive, stops the walk with ErrTooManyEntries
	// past that many entries.
	MaxEntries int
	// Visit is called for every entry, a directory before its entries.
	// A directory is entered unless it is a mount point or Visit returns
	// an error (SkipDir to skip it quietly).
	Visit func(e *Entry) error
	// Leave, if set, is called for a directory after its entries, with
	// Dir its parent.
	Leave func(e *Entry) error
}

// frame is a directory on the way from the root to the one being read.
type frame struct {
	name     string
	st       unix.Stat_t
	off      int64 // getdents offset to resume after the last entry visited
	done     int
	failed   int
	rescans  int
	resumeAt bool // off must be sought before reading
}

type walk struct {
	w       *Walker
	root    string
	rootfd  int
	rootDev uint64
	stack   []*frame
	entries int
	errs    []error
	nerrs   int
	buf     []byte
}

// Walk walks the entries under the directory open as root (not closed),
// and returns the errors Visit and Leave returned (the first few, and how
// many more), those it met itself, or ErrTooManyEntries. It goes on past
// an error, up to a thousand.
func (w *Walker) Walk(root int) error {
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil {
		return fmt.Errorf("%s: %w", w.Root, err)
	}
	wk := &walk{w: w, root: w.Root, rootfd: root, rootDev: uint64(st.Dev), buf: make([]byte, bufSize)}
	if wk.root == "" {
		wk.root = "."
	}
	wk.stack = []*frame{{st: st, resumeAt: true}} // from the first entry
	err := wk.run()
	return errors.Join(append(wk.errorList(), err)...)
}

func (wk *walk) errorList() []error {
	errs := wk.errs
	if wk.nerrs > len(wk.errs) {
		errs = append(errs, fmt.Errorf("and %d more errors", wk.nerrs-len(wk.errs)))
	}
	return errs
}

// record keeps err (the first few) and says whether the walk goes on.
func (wk *walk) record(err error) bool {
	wk.nerrs++
	if len(wk.errs) < maxErrors {
		wk.errs = append(wk.errs, err)
	}
	return wk.nerrs < maxFailures
}

// testHookBeforeOpen, set by tests, runs between a directory's lstat and
// its open (where a container could swap it for a link).
var testHookBeforeOpen func(name string)

var errTooManyErrors = errors.New("too many errors: walk stopped")

// run is the walk proper: cur is the open directory of the top frame.
func (wk *walk) run() error {
	cur := wk.rootfd
	closeCur := func() {
		if cur != wk.rootfd {
			unix.Close(cur)
		}
	}
	defer func() { closeCur() }()
	for {
		f := wk.stack[len(wk.stack)-1]
		depth := len(wk.stack)
		if f.resumeAt {
			if _, err := unix.Seek(cur, f.off, 0); err != nil {
				return fmt.Errorf("%s: seek: %w", wk.framePath(), err)
			}
			f.resumeAt = false
		}
		n, err := unix.Getdents(cur, wk.buf)
		if err != nil {
			if !wk.record(fmt.Errorf("reading %s: %w", wk.framePath(), err)) {
				return errTooManyErrors
			}
			n = 0
		}
		if n == 0 {
			// The directory is done: back to its parent, and Leave it.
			if depth == 1 {
				return nil
			}
			parent, err := wk.up(cur)
			if err != nil {
				return err
			}
			closeCur()
			cur = parent
			wk.stack = wk.stack[:depth-1]
			pf := wk.stack[depth-2]
			pf.resumeAt = true
			e := Entry{Dir: cur, Name: f.name, Stat: f.st, Depth: depth - 1, Done: f.done, Failed: f.failed, w: wk}
			if wk.w.Leave == nil {
				pf.done++
				continue
			}
			err = wk.w.Leave(&e)
			switch {
			case err == nil:
				pf.done++
			case errors.Is(err, ErrRescan) && f.rescans < maxRescans:
				fd, ok := wk.open(cur, f.name, &f.st)
				if !ok {
					pf.done++ // gone meanwhile
					continue
				}
				closeCur()
				cur = fd
				*f = frame{name: f.name, st: f.st, rescans: f.rescans + 1}
				wk.stack = append(wk.stack, f)
			case errors.Is(err, ErrRescan):
				pf.failed++
				if !wk.record(fmt.Errorf("%s: entries keep appearing: %w", e.Path(), unix.ENOTEMPTY)) {
					return errTooManyErrors
				}
			default:
				pf.failed++
				if !errors.Is(err, ErrBelow) && !wk.record(err) {
					return errTooManyErrors
				}
			}
			continue
		}
		buf := wk.buf[:n]
		for len(buf) > 0 {
			reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
			if reclen < 19 || reclen > len(buf) {
				return fmt.Errorf("reading %s: bad directory record", wk.framePath())
			}
			off := int64(binary.NativeEndian.Uint64(buf[8:16]))
			name := buf[19:reclen]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			buf = buf[reclen:]
			f.off = off
			if string(name) == "." || string(name) == ".." {
				continue
			}
			child, descend, err := wk.visit(cur, string(name), depth)
			if err != nil {
				return err
			}
			if descend {
				closeCur()
				cur = child.fd
				f.resumeAt = true
				wk.stack = append(wk.stack, &frame{name: child.name, st: child.st})
				break
			}
		}
	}
}

type opened struct {
	fd   int
	name string
	st   unix.Stat_t
}

// visit visits the entry name of the directory cur, and opens it if the
// walk is to enter it. Its error stops the walk.
func (wk *walk) visit(cur int, name string, depth int) (opened, bool, error) {
	f := wk.stack[depth-1]
	e := Entry{Dir: cur, Name: name, Depth: depth, w: wk}
	if err := unix.Fstatat(cur, name, &e.Stat, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return opened{}, false, nil // removed meanwhile
		}
		f.failed++
		if !wk.record(fmt.Errorf("lstat %s: %w", e.Path(), err)) {
			return opened{}, false, errTooManyErrors
		}
		return opened{}, false, nil
	}
	wk.entries++
	if wk.w.MaxEntries > 0 && wk.entries > wk.w.MaxEntries {
		return opened{}, false, ErrTooManyEntries
	}
	fd := -1
	if e.IsDir() {
		if uint64(e.Stat.Dev) != wk.rootDev {
			e.MountPoint = true
		} else {
			if testHookBeforeOpen != nil {
				testHookBeforeOpen(name)
			}
			var ok bool
			fd, ok = wk.open(cur, name, &e.Stat)
			if !ok {
				return opened{}, false, nil // changed meanwhile: not what was listed
			}
			same, err := SameMount(cur, fd)
			if err != nil || !same {
				unix.Close(fd)
				fd = -1
				e.MountPoint = true
			}
		}
	}
	err := wk.w.Visit(&e)
	switch {
	case err == nil:
		if fd < 0 {
			f.done++
			return opened{}, false, nil
		}
		return opened{fd: fd, name: name, st: e.Stat}, true, nil
	case errors.Is(err, SkipDir):
		f.done++
		err = nil // skipped quietly: the walk goes on
	default:
		f.failed++
		if !errors.Is(err, ErrBelow) && !wk.record(err) {
			err = errTooManyErrors
		} else {
			err = nil
		}
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	return opened{}, false, err
}

// open opens the directory name in dir without following a link, and
// checks it is the one st describes; false if it is not (any more).
func (wk *walk) open(dir int, name string, st *unix.Stat_t) (int, bool) {
	fd, err := openDir(dir, name)
	if err != nil {
		return -1, false
	}
	var got unix.Stat_t
	if unix.Fstat(fd, &got) != nil || got.Dev != st.Dev || got.Ino != st.Ino {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// up opens the parent of the directory cur (the top frame): through "..",
// checked against the parent's recorded dev/inode, else again from the
// root by the recorded names, each checked.
func (wk *walk) up(cur int) (int, error) {
	depth := len(wk.stack)
	if depth == 2 {
		return wk.rootfd, nil
	}
	want := &wk.stack[depth-2].st
	if fd, ok := wk.open(cur, "..", want); ok {
		return fd, nil
	}
	fd := wk.rootfd
	for _, f := range wk.stack[1 : depth-1] {
		next, ok := wk.open(fd, f.name, &f.st)
		if fd != wk.rootfd {
			unix.Close(fd)
		}
		if !ok {
			return -1, fmt.Errorf("%s moved during the walk: cannot return to it", wk.framePath())
		}
		fd = next
	}
	return fd, nil
}

// framePath is the path of the directory being read.
func (wk *walk) framePath() string {
	depth := len(wk.stack)
	if depth == 1 {
		return wk.root
	}
	e := Entry{Name: wk.stack[depth-1].name, Depth: depth - 1, w: wk}
	return e.Path()
}

func openDir(dir int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// SameMount reports whether the directories parent and child are on the
// same mount: by mount ID (statx, Linux 5.8+), which tells a bind mount of
// the same file system apart; else by device, as kubelet's
// IsLikelyNotMountPoint.
func SameMount(parent, child int) (bool, error) {
	var a, b unix.Statx_t
	if err := unix.Statx(parent, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &a); err != nil {
		return false, err
	}
	if err := unix.Statx(child, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &b); err != nil {
		return false, err
	}
	if a.Mask&b.Mask&unix.STATX_MNT_ID != 0 && a.Mnt_id != b.Mnt_id {
		return false, nil
	}
	if b.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && b.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return false, nil
	}
	return a.Dev_major == b.Dev_major && a.Dev_minor == b.Dev_minor, nil
}
