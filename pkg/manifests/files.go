package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Limits on what a manifest directory can make the agent read. Whoever can
// write into the directory must not be able to stall or exhaust the agent
// by what they put there (a FIFO, a link to /dev/zero, a million files).
const (
	// MaxFileSize is the most a manifest file may hold: 1 MiB. The
	// DaemonSet ships manifests in a ConfigMap, which holds at most 1 MiB
	// in all, so no file it mounts is larger; a Pod manifest is a few KiB,
	// so that is hundreds of pods per file. (The API server stores no
	// object over etcd's 1.5 MiB; kubelet's static-pod source has no limit
	// at all.) A larger file is refused, never cut: a cut file is another
	// file.
	MaxFileSize = 1 << 20
	// MaxFiles is how many manifest files one scan reads, the
	// first in name order: several times what a node runs (kubelet's
	// default is 110 pods), and enough to bound one reload's work.
	MaxFiles = 1000
	// MaxDirEntries is how many entries of the directory one scan
	// looks at, manifests or not: listing a name is cheap, but a directory
	// of a million entries must not take seconds and a million allocations
	// every poll.
	MaxDirEntries = 10 * MaxFiles
)

// listing is one bounded look at a manifest directory.
type listing struct {
	dir     *os.File       // the directory, checked; its files are read beneath it; close it
	files   []string       // the manifest files to read, in name order
	errs    []*spec.Error  // manifest files not read (the limits), in name order
	skipped []*spec.Notice // entries that are not manifest files, in name order
}

// report is what the listing says of the directory, as a file before its
// files (spec.Combine).
func (l *listing) report() spec.File { return spec.File{Errors: l.errs, Skipped: l.skipped} }

// close closes the listing's directory.
func (l *listing) close() { l.dir.Close() }

// read reads the manifest file path of the listing (see readManifestAt).
func (l *listing) read(path string) ([]byte, error) {
	return readManifestAt(l.dir, filepath.Base(path))
}

// listDir lists the manifest files of dir in name order: names ending in
// one of Extensions (any name with anyName, as kubelet's
// static-pod source reads "[^.]*"), at most MaxFiles of them, among the
// first MaxDirEntries entries. Names starting with "." (editor
// leftovers, a ConfigMap volume's ..data) are skipped silently; other
// names and subdirectories are skipped with a notice; manifest files past
// the limits are reported as errors. Whether a listed name leads to a
// regular file is found out when it is read. err is set when dir cannot
// be read or is refused (checkManifestDir). Close the listing.
func listDir(dir string, anyName bool) (*listing, error) {
	// O_DIRECTORY: a FIFO given as the directory fails at once instead of
	// waiting for a writer. A link to the directory is followed: the path
	// is the operator's choice, and the directory it leads to is checked.
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest directory: %w", err)
	}
	l, err := list(d, dir, anyName)
	if err != nil {
		d.Close()
		return nil, err
	}
	return l, nil
}

// list is listDir of the directory d, opened.
func list(d *os.File, dir string, anyName bool) (*listing, error) {
	if err := checkManifestDir(d, dir); err != nil {
		return nil, err
	}
	var entries []fs.DirEntry
	more := false
	for {
		batch, err := d.ReadDir(min(256, MaxDirEntries-len(entries)))
		entries = append(entries, batch...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the manifest directory: %w", err)
		}
		if len(entries) == MaxDirEntries {
			extra, _ := d.ReadDir(1)
			more = len(extra) > 0
			break
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	l := &listing{dir: d}
	if more {
		l.errs = append(l.errs, &spec.Error{Source: dir, Detail: fmt.Sprintf(
			"more than %d entries: only the first %d the system listed are looked at, the others are ignored; keep manifests in a directory of their own", MaxDirEntries, MaxDirEntries)})
	}
	var skipped []string
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, "."):
			// Editor leftovers, and a ConfigMap volume's ..data links.
		case e.IsDir():
			l.skipped = append(l.skipped, &spec.Notice{Source: path, Kind: spec.NoticeDirectory, Detail: "a directory: manifests in subdirectories are not read"})
		case !anyName && !hasManifestExtension(name):
			ext := filepath.Ext(name)
			if ext == "" {
				ext = "no extension"
			}
			l.skipped = append(l.skipped, &spec.Notice{Source: path, Kind: spec.NoticeNotManifestFile, Detail: "not a manifest (" + ext + ")"})
		case len(l.files) == MaxFiles:
			skipped = append(skipped, path)
		default:
			// Whatever its type: readManifestAt looks at what the name
			// leads to when it opens it, and says why it refuses.
			l.files = append(l.files, path)
		}
	}
	if len(skipped) > 0 {
		// One report for them all, naming the first: a million files
		// are not a million messages.
		l.errs = append(l.errs, &spec.Error{Source: skipped[0], Detail: fmt.Sprintf(
			"not read, nor the %d manifest file(s) after it in name order: at most %d manifest files are read from a directory", len(skipped)-1, MaxFiles)})
	}
	return l, nil
}

// fingerprint summarises what a reload of the listing would read: the
// files' sizes, times, modes and owners (following links, so a swapped
// target is a change) and what was reported. Dot files are not in it:
// they are never read.
func (l *listing) fingerprint() string {
	var b strings.Builder
	b.WriteString("ok:")
	for _, path := range l.files {
		fi, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(&b, "%s:error;", path)
			continue
		}
		var uid uint32 // a refused file's chown is a change
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid = st.Uid
		}
		fmt.Fprintf(&b, "%s:%d:%d:%v:%d;", path, fi.Size(), fi.ModTime().UnixNano(), fi.Mode(), uid)
	}
	for _, e := range l.errs {
		fmt.Fprintf(&b, "%s;", e.Error())
	}
	for _, n := range l.skipped {
		fmt.Fprintf(&b, "%s;", n.String())
	}
	return b.String()
}

// errTooLarge refuses a file over MaxFileSize.
var errTooLarge = fmt.Errorf("refused: larger than %d bytes (1 MiB), the most a manifest file may hold; split it into several files", MaxFileSize)

// readManifest reads a file given by name (validate FILE, play FILE) if it
// is a regular file (directly or through a symbolic link, wherever it
// leads) of at most MaxFileSize bytes. Its owner and mode are not
// checked: the file is the invoking user's own choice, as a script they
// run is, and whoever can start pods with play already is root.
func readManifest(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0) // found, not opened: see openBeneath
	if err != nil {
		return nil, err
	}
	return readFound(fd, path, false, func() bool {
		fi, err := os.Lstat(path)
		return err == nil && fi.Mode()&fs.ModeSymlink != 0
	})
}

// readManifestAt reads the file name of a manifest directory, dir, if it
// is a regular file beneath the directory (directly or through symbolic
// links that stay beneath it, as a ConfigMap volume's do) of at most
// MaxFileSize bytes, root's or the agent's and writable by no one
// else: an exec probe or a lifecycle hook in it runs any command in the
// containers of the pod it names, and with --static-pod-path it starts any
// container, so whoever can change it must already be root.
func readManifestAt(dir *os.File, name string) ([]byte, error) {
	dirfd := int(dir.Fd())
	fd, err := openBeneath(dirfd, name)
	if errors.Is(err, errOutside) {
		to := ""
		if target, err := readlinkAt(dirfd, name); err == nil {
			to = fmt.Sprintf(" (to %q)", target)
		}
		return nil, fmt.Errorf("refused: a symbolic link out of the manifest directory%s: only files beneath it are read, through relative links, "+
			"as whoever can change a file elsewhere could run commands in containers; copy the file into the directory", to)
	}
	if err != nil {
		return nil, err
	}
	return readFound(fd, filepath.Join(dir.Name(), name), true, func() bool {
		var st unix.Stat_t
		return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
	})
}

// readFound reads the file found as fd (O_PATH, which it closes), path in
// what it says, if it is a regular file of at most MaxFileSize bytes
// and, with trust, root's or the agent's alone (untrusted). Nothing it
// does waits on anything but the file system, and it opens nothing but
// that regular file: a FIFO's open waits for a writer, and opening a
// device can act (a tape rewinds, a watchdog arms). What was found is what
// is checked and read, whatever its name leads to by now: it is reopened
// through /proc/self/fd, not by its name. linked says whether the name is
// a symbolic link, for what a refusal says.
func readFound(fd int, path string, trust bool, linked func() bool) ([]byte, error) {
	found := os.NewFile(uintptr(fd), path)
	defer found.Close()
	fi, err := found.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, regular(fi, linked())
	}
	if trust {
		if u := untrusted(fi); u != nil {
			return nil, refused(u, path, whyFile)
		}
	}
	if fi.Size() > MaxFileSize {
		return nil, errTooLarge
	}
	f, err := os.OpenFile(procFD(fd), os.O_RDONLY|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its path is /proc's, not the file's
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Not %w: the file is there, and its pods must not go.
			return nil, fmt.Errorf("cannot open it through /proc/self/fd: %v; the agent needs /proc mounted", err)
		}
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, opened) {
		return nil, fmt.Errorf("not read: %s opened another file than the one found; is /proc the proc file system?", procFD(fd))
	}
	// One byte over the limit tells a file at the limit from a larger one
	// (or one that grew since the Stat).
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, errTooLarge
	}
	return data, nil
}

// Why a manifest directory and its files must be root's (or the agent's)
// alone, for what a refusal says.
const (
	whyDir  = "whoever can write in the manifest directory can add a manifest, and a manifest runs commands in containers (exec probes, lifecycle hooks) or, as a static pod, starts any container"
	whyFile = "whoever can change a manifest changes the commands it runs in containers (exec probes, lifecycle hooks) or, as a static pod, the containers it starts"
)

// untrusted says why fi, a manifest directory's or file's, could be
// changed by someone other than root or the agent, as statefile.Trust
// checks the state directory; nil when it cannot.
func untrusted(fi fs.FileInfo) *statefile.Untrusted {
	st := fi.Sys().(*syscall.Stat_t)
	return statefile.Trust(st.Uid, st.Mode, 0, os.Geteuid())
}

// refused says why the manifest directory or file at path is refused (u),
// what whoever could change it could do (why), and what to do.
func refused(u *statefile.Untrusted, path, why string) error {
	if !u.OtherOwner {
		return fmt.Errorf("refused: it is writable by its group or others (mode %04o): %s; chmod go-w %s", u.Mode, why, path)
	}
	owners := "root"
	if euid := os.Geteuid(); euid != 0 {
		owners = fmt.Sprintf("root or the agent's uid %d", euid)
	}
	fix := "chown root " + path
	if u.Mode&0o022 != 0 {
		fix += fmt.Sprintf(", and chmod go-w it (mode %04o)", u.Mode)
	}
	return fmt.Errorf("refused: it belongs to uid %d, not to %s: %s; %s", u.UID, owners, why, fix)
}

// checkManifestDir refuses a manifest directory, d at path, that someone
// other than root or the agent could write in, but reads a volume kubelet
// wrote and mounted read-only (kubeletVolume).
func checkManifestDir(d *os.File, path string) error {
	fi, err := d.Stat()
	if err != nil {
		return fmt.Errorf("cannot read the manifest directory: %w", err)
	}
	u := untrusted(fi)
	if u == nil || !u.OtherOwner && kubeletVolume(int(d.Fd())) {
		return nil
	}
	return refused(u, path, whyDir)
}

// kubeletVolume reports whether the directory dirfd, root's or the agent's
// and writable by its group or others, is a volume kubelet wrote (a
// ConfigMap's, a Secret's, a projected one) mounted read-only, as the
// DaemonSet mounts its ConfigMap of manifests: kubelet makes the volume's
// directory 0777 (an emptyDir's mode), writes its files in a directory of
// their own that the link ..data leads to, and links each name to
// ..data/name. Nobody writes in it through this read-only mount; kubelet
// writes in it through its own path, under /var/lib/kubelet/pods, which is
// root's alone. Its files are checked as any manifest is. A directory an
// operator made writable by others has no ..data leading to a directory
// of root's that no one else can write in (a read-only mount alone would
// not do: systemd's ProtectSystem= makes every mount read-only for the
// agent, not for the node's users).
func kubeletVolume(dirfd int) bool {
	var sfs unix.Statfs_t
	if err := fstatfs(dirfd, &sfs); err != nil || sfs.Flags&unix.ST_RDONLY == 0 {
		return false
	}
	fd, err := openBeneath(dirfd, "..data")
	if err != nil {
		return false
	}
	data := os.NewFile(uintptr(fd), "..data")
	defer data.Close()
	fi, err := data.Stat()
	return err == nil && fi.IsDir() && untrusted(fi) == nil
}

// fstatfs is unix.Fstatfs; a test says a directory is on a read-only
// mount with it.
var fstatfs = unix.Fstatfs

// openat2 is unix.Openat2; a test makes it fail as on a kernel without it.
var openat2 = unix.Openat2

// errOutside is a name leading out of its directory.
var errOutside = errors.New("leads out of the directory")

// resolveAttempts bounds the openat2 calls of one resolution that a rename
// elsewhere made fail with EAGAIN.
const resolveAttempts = 100

// openBeneath finds the file name leads to in the directory dirfd and
// returns it as an O_PATH descriptor: found, not opened (a device does not
// act, a FIFO does not wait; nor is the open interrupted, so there is no
// EINTR to retry). Links are followed only while they stay beneath the
// directory (errOutside otherwise): openat2's RESOLVE_BENEATH (Linux 5.6),
// which also refuses an absolute link; without it, the file found is
// refused unless /proc/self/fd names it beneath the directory.
func openBeneath(dirfd int, name string) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for range resolveAttempts {
		fd, err := openat2(dirfd, name, how)
		switch {
		case errors.Is(err, unix.EAGAIN):
			// A rename elsewhere raced a ".." in a link.
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			// No openat2 (before Linux 5.6), or a seccomp profile older
			// than it (an O_PATH open is refused with EACCES, never EPERM).
			return openBeneathProc(dirfd, name)
		case errors.Is(err, unix.EXDEV):
			return -1, errOutside
		}
		return fd, err
	}
	return -1, fmt.Errorf("resolving %s: renames elsewhere kept interrupting it: %w", name, unix.EAGAIN)
}

// openBeneathProc is openBeneath without openat2: the links are followed
// wherever they lead (an absolute one into the directory too), and the
// file found is refused unless /proc/self/fd names it beneath the
// directory.
func openBeneathProc(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	dir, err := os.Readlink(procFD(dirfd))
	if err == nil {
		var file string
		if file, err = os.Readlink(procFD(fd)); err == nil && !strings.HasPrefix(file, strings.TrimSuffix(dir, "/")+"/") {
			err = errOutside
		}
	}
	if err != nil {
		unix.Close(fd)
		if !errors.Is(err, errOutside) {
			// Not %w: the file is there, and its pods must not go.
			err = fmt.Errorf("cannot tell where it leads without /proc/self/fd: %v; the agent needs /proc mounted", err)
		}
		return -1, err
	}
	return fd, nil
}

// procFD is the name of the descriptor fd in /proc.
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// readlinkAt is where the link name in dirfd leads.
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// regular refuses anything but a regular file, saying what it is.
func regular(fi fs.FileInfo, linked bool) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	const only = "only regular files, directly or through a symbolic link, are read"
	if linked {
		return fmt.Errorf("skipped: a symbolic link to %s, not to a regular file: %s", fileKind(fi.Mode()), only)
	}
	return fmt.Errorf("skipped: %s, not a regular file: %s", fileKind(fi.Mode()), only)
}

// fileKind names a file's type for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return fmt.Sprintf("a file of mode %v", m)
	}
}
