package spec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Limits on what a manifest directory can make the agent read. Whoever can
// write into the directory must not be able to stall or exhaust the agent
// by what they put there (a FIFO, a link to /dev/zero, a million files).
const (
	// MaxManifestSize is the most a manifest file may hold: 1 MiB. The
	// DaemonSet ships manifests in a ConfigMap, which holds at most 1 MiB
	// in all, so no file it mounts is larger; a Pod manifest is a few KiB,
	// so that is hundreds of pods per file. (The API server stores no
	// object over etcd's 1.5 MiB; kubelet's static-pod source has no limit
	// at all.) A larger file is refused, never cut: a cut file is another
	// file.
	MaxManifestSize = 1 << 20
	// MaxManifestFiles is how many manifest files one scan reads, the
	// first in name order: several times what a node runs (kubelet's
	// default is 110 pods), and enough to bound one reload's work.
	MaxManifestFiles = 1000
	// MaxManifestDirEntries is how many entries of the directory one scan
	// looks at, manifests or not: listing a name is cheap, but a directory
	// of a million entries must not take seconds and a million allocations
	// every poll.
	MaxManifestDirEntries = 10 * MaxManifestFiles
)

// listing is one bounded look at a manifest directory.
type listing struct {
	files   []string  // the manifest files to read, in name order
	errs    []*Error  // manifest files not read (the limits), in name order
	skipped []*Notice // entries that are not manifest files, in name order
}

// listDir lists the manifest files of dir in name order: names ending in
// one of ManifestExtensions (any name with anyName, as kubelet's
// static-pod source reads "[^.]*"), at most MaxManifestFiles of them, among the
// first MaxManifestDirEntries entries. Names starting with "." (editor
// leftovers, a ConfigMap volume's ..data) are skipped silently; other
// names and subdirectories are skipped with a notice; manifest files past
// the limits are reported as errors. Whether a listed name leads to a
// regular file is found out when it is read. err is set when dir cannot
// be read.
func listDir(dir string, anyName bool) (*listing, error) {
	// O_DIRECTORY: a FIFO given as the directory fails at once instead of
	// waiting for a writer.
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest directory: %w", err)
	}
	defer d.Close()
	var entries []fs.DirEntry
	more := false
	for {
		batch, err := d.ReadDir(min(256, MaxManifestDirEntries-len(entries)))
		entries = append(entries, batch...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the manifest directory: %w", err)
		}
		if len(entries) == MaxManifestDirEntries {
			extra, _ := d.ReadDir(1)
			more = len(extra) > 0
			break
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	l := &listing{}
	if more {
		l.errs = append(l.errs, &Error{Source: dir, Detail: fmt.Sprintf(
			"more than %d entries: only the first %d the system listed are looked at, the others are ignored; keep manifests in a directory of their own", MaxManifestDirEntries, MaxManifestDirEntries)})
	}
	var skipped []string
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, "."):
			// Editor leftovers, and a ConfigMap volume's ..data links.
		case e.IsDir():
			l.skipped = append(l.skipped, &Notice{Source: path, Kind: NoticeDirectory, Detail: "a directory: manifests in subdirectories are not read"})
		case !anyName && !hasManifestExtension(name):
			ext := filepath.Ext(name)
			if ext == "" {
				ext = "no extension"
			}
			l.skipped = append(l.skipped, &Notice{Source: path, Kind: NoticeNotManifestFile, Detail: "not a manifest (" + ext + ")"})
		case len(l.files) == MaxManifestFiles:
			skipped = append(skipped, path)
		default:
			// Whatever its type: readManifest looks at what the name
			// leads to when it opens it, and says why it refuses.
			l.files = append(l.files, path)
		}
	}
	if len(skipped) > 0 {
		// One report for them all, naming the first: a million files
		// are not a million messages.
		l.errs = append(l.errs, &Error{Source: skipped[0], Detail: fmt.Sprintf(
			"not read, nor the %d manifest file(s) after it in name order: at most %d manifest files are read from a directory", len(skipped)-1, MaxManifestFiles)})
	}
	return l, nil
}

// fingerprint summarises what a reload of the listing would read: the
// files' sizes, times and types (following links, so a swapped target is a
// change) and what was reported. Dot files are not in it: they are never
// read.
func (l *listing) fingerprint() string {
	var b strings.Builder
	b.WriteString("ok:")
	for _, path := range l.files {
		fi, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(&b, "%s:error;", path)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d:%v;", path, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	for _, e := range l.errs {
		fmt.Fprintf(&b, "%s;", e.Error())
	}
	for _, n := range l.skipped {
		fmt.Fprintf(&b, "%s;", n.String())
	}
	return b.String()
}

// errTooLarge refuses a file over MaxManifestSize.
var errTooLarge = fmt.Errorf("refused: larger than %d bytes (1 MiB), the most a manifest file may hold; split it into several files", MaxManifestSize)

// readManifest reads a manifest file if it is a regular file (directly or
// through a symbolic link) of at most MaxManifestSize bytes. Nothing it does
// waits on anything but the file system: a FIFO, a device or a socket is
// refused, and an endless file is read no further than the limit.
func readManifest(path string) ([]byte, error) {
	// Look before opening: a FIFO's open waits for a writer, and opening a
	// device can act (a tape rewinds, a watchdog arms).
	lfi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	linked := lfi.Mode()&fs.ModeSymlink != 0
	fi := lfi
	if linked {
		if fi, err = os.Stat(path); err != nil {
			return nil, err
		}
	}
	if err := regular(fi, linked); err != nil {
		return nil, err
	}
	if fi.Size() > MaxManifestSize {
		return nil, errTooLarge
	}
	// The name may lead elsewhere by now. O_NONBLOCK: should it be a FIFO,
	// the open returns at once (it changes nothing for a regular file's
	// reads); O_NOCTTY: a terminal does not become ours.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// What was opened decides, whatever the name leads to now.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(fi, linked); err != nil {
		return nil, err
	}
	// One byte over the limit tells a file at the limit from a larger one
	// (or one that grew since the Stat, or a /proc file that says 0).
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestSize {
		return nil, errTooLarge
	}
	return data, nil
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
