package podfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// SubPathError is the failure to make, check or bind-mount a subPath
// inside its volume. Its text is the detail, for the agent's log; kubelet
// tells the pod's owner only Message's text, which does not describe the
// host's files: PrepareContainer returns a *podconfig.ConfigError of that
// text wrapping the SubPathError.
type SubPathError struct {
	// Create: making the missing directory failed (SafeMakeDir); else
	// the path was refused, could not be opened or mounted
	// (PrepareSafeSubpath).
	Create bool
	Err    error
}

func (e *SubPathError) Error() string { return e.Err.Error() }
func (e *SubPathError) Unwrap() error { return e.Err }

// Message is kubelet's text for the failure of the subPath of the
// volumeMount named volumeMount in container (makeMounts).
func (e *SubPathError) Message(volumeMount, container string) string {
	if e.Create {
		return fmt.Sprintf("failed to create subPath directory for volumeMount %q of container %q", volumeMount, container)
	}
	return fmt.Sprintf("failed to prepare subPath for volumeMount %q of container %q", volumeMount, container)
}

// prepareSubPath is kubelet's makeMounts for a subPath (checked already:
// podconfig's SubPathMounts) before the bind mount: a missing subPath is
// made a directory with the volume's mode, one component at a time
// without following a link (subpath.SafeMakeDir), so that the runtime
// does not make it 0755 root's, not writable by the pod's user; a
// *SubPathError with Create when that fails.
func prepareSubPath(volumeHostPath, subPath string) error {
	path := filepath.Join(volumeHostPath, subPath)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fi, err := os.Stat(volumeHostPath)
		if err != nil {
			return &SubPathError{Err: err}
		}
		if err := safeMakeDir(subPath, volumeHostPath, fi.Mode()); err != nil {
			return &SubPathError{Create: true, Err: err}
		}
	}
	return nil
}

// openSubPath is the first half of kubelet's doBindSubPath: both paths'
// links resolved, the path must be in the volume, and is opened (O_PATH)
// component by component refusing a link (doSafeOpen).
func openSubPath(path, volumePath string) (string, int, error) {
	realVolume, err := filepath.EvalSymlinks(volumePath)
	if err != nil {
		return "", -1, fmt.Errorf("error resolving symlinks in %q: %v", volumePath, err)
	}
	realPath, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", -1, fmt.Errorf("error resolving symlinks in %q: %v", path, err)
	}
	if !pathWithinBase(realPath, realVolume) {
		return "", -1, fmt.Errorf("subpath %q not within volume path %q", realPath, realVolume)
	}
	fd, err := safeOpen(realPath, realVolume)
	if err != nil {
		return "", -1, fmt.Errorf("error opening subpath %v: %v", realPath, err)
	}
	return realPath, fd, nil
}

// bindSubPath is kubelet's subpather.PrepareSafeSubpath (doBindSubPath)
// for the subPath sp of container in the pod uid, with m.mu held: the
// path, its links resolved, must be in the volume and is opened without
// meeting a link (a link out of the volume, to /etc, is refused), and
// what was opened is bind-mounted, through the agent's descriptor of it
// (/proc/<pid>/fd/<n>), onto Layout.SubPathBindTarget, which is what the
// runtime mounts: whatever a container that can write in the volume does
// to the path afterwards, the mount is of what was checked. A mount
// already there of the same file is kept (a restarted container); one of
// another file is replaced. TearDown unmounts them (CleanSubPaths).
// Errors are *SubPathError.
func (m *Manager) bindSubPath(ctx context.Context, uid types.UID, container string, sp podconfig.SubPathMount) (string, error) {
	logger := klog.FromContext(ctx)
	if err := prepareSubPath(sp.VolumeHostPath, sp.SubPath); err != nil {
		return "", err
	}
	resolved, fd, err := openSubPath(filepath.Join(sp.VolumeHostPath, sp.SubPath), sp.VolumeHostPath)
	if err != nil {
		return "", &SubPathError{Err: err}
	}
	defer unix.Close(fd)

	target := m.layout.SubPathBindTarget(uid, sp.Volume, container, sp.Index)
	mps, err := m.mnt.mounts(target)
	if err != nil {
		return "", &SubPathError{Err: err}
	}
	if isMounted(mps, target) {
		// prepareSubpathTarget: kept if it is the same file.
		s, serr := os.Lstat(resolved)
		t, terr := os.Lstat(target)
		if serr == nil && terr == nil && os.SameFile(s, t) {
			logger.V(5).Info("Skipping bind-mounting subpath: already mounted", "target", target)
			return target, nil
		}
		if err := m.mnt.unmount(target); err != nil {
			return "", &SubPathError{Err: err}
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", &SubPathError{Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &SubPathError{Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", &SubPathError{Err: err}
		}
	} else {
		// A file is a mount point for any kind that is not a directory.
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o640)
		if err != nil {
			return "", &SubPathError{Err: err}
		}
		f.Close()
	}
	src := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
	if err := m.mnt.bind(src, target); err != nil {
		// cleanSubPath: the target and its empty parents go.
		_ = os.Remove(target)
		removeEmptyDirs(m.layout.PodDir(uid), filepath.Dir(target))
		return "", &SubPathError{Err: fmt.Errorf("error mounting %s: %w", resolved, err)}
	}
	logger.V(3).Info("Bound subPath", "path", resolved, "target", target)
	return target, nil
}

// removeEmptyDirs removes endDir and its parents up to (not including)
// baseDir while they are empty (subpath.removeEmptyDirs).
func removeEmptyDirs(baseDir, endDir string) {
	if !pathWithinBase(endDir, baseDir) {
		return
	}
	for dir := endDir; dir != baseDir && dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if err := unix.Rmdir(dir); err != nil {
			return
		}
	}
}

// pathWithinBase is mount-utils' PathWithinBase: fullPath is basePath or
// under it, lexically.
func pathWithinBase(fullPath, basePath string) bool {
	rel, err := filepath.Rel(basePath, fullPath)
	if err != nil {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, "../")
}

// safeMakeDir is subpath.SafeMakeDir: makes subdir under base, each
// missing component by mkdirat in its opened parent and opened without
// following a link, so that a link swapped in meanwhile is never
// followed; the components made get perm whatever the umask.
func safeMakeDir(subdir, base string, perm fs.FileMode) error {
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("error resolving symlinks in %s: %s", base, err)
	}
	pathname := filepath.Join(realBase, subdir)
	if !pathWithinBase(pathname, realBase) {
		return fmt.Errorf("path %s is outside of allowed base %s", pathname, realBase)
	}
	if fi, err := os.Stat(pathname); err == nil {
		if fi.IsDir() {
			return nil // exists: kubelet's check, with no race-proof way to do more
		}
		return &fs.PathError{Op: "mkdir", Path: pathname, Err: unix.ENOTDIR}
	}
	existing, toCreate, err := findExistingPrefix(realBase, pathname)
	if err != nil {
		return fmt.Errorf("error opening directory %s: %s", pathname, err)
	}
	realExisting, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return fmt.Errorf("error opening directory %s: %s", existing, err)
	}
	if !pathWithinBase(realExisting, realBase) {
		return fmt.Errorf("path %s is outside of allowed base %s", realExisting, realBase)
	}
	parent, err := safeOpen(realExisting, realBase)
	if err != nil {
		return fmt.Errorf("cannot open directory %s: %s", existing, err)
	}
	defer func() { unix.Close(parent) }()
	kernelPerm := uint32(perm & fs.ModePerm)
	if perm&fs.ModeSetgid != 0 {
		kernelPerm |= unix.S_ISGID
	}
	if perm&fs.ModeSetuid != 0 {
		kernelPerm |= unix.S_ISUID
	}
	if perm&fs.ModeSticky != 0 {
		kernelPerm |= unix.S_ISVTX
	}
	current := realExisting
	for _, dir := range toCreate {
		current = filepath.Join(current, dir)
		// Relative to the opened parent (kubelet passes the absolute
		// path, which makes mkdirat ignore the descriptor).
		if err := unix.Mkdirat(parent, dir, kernelPerm); err != nil {
			return fmt.Errorf("cannot create directory %s: %s", current, err)
		}
		child, err := openRetry(func() (int, error) {
			return unix.Openat(parent, dir, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return fmt.Errorf("cannot open %s: %s", current, err)
		}
		unix.Close(parent)
		parent = child
		if err := unix.Fchmod(parent, kernelPerm); err != nil {
			return fmt.Errorf("chmod %q failed: %s", current, err)
		}
	}
	return nil
}

// findExistingPrefix returns the longest existing prefix of pathname under
// base (links followed, as kubelet's) and the components after it.
func findExistingPrefix(base, pathname string) (string, []string, error) {
	rel, err := filepath.Rel(base, pathname)
	if err != nil {
		return base, nil, err
	}
	dirs := strings.Split(rel, "/")
	current := base
	fd, err := openRetry(func() (int, error) { return unix.Open(current, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return pathname, nil, fmt.Errorf("error opening %s: %s", current, err)
	}
	defer func() { unix.Close(fd) }()
	for i, dir := range dirs {
		// O_PATH: a FIFO swapped in does not hang the open.
		child, err := openRetry(func() (int, error) { return unix.Openat(fd, dir, unix.O_PATH|unix.O_CLOEXEC, 0) })
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return current, dirs[i:], nil
			}
			return base, nil, err
		}
		unix.Close(fd)
		fd = child
		current = filepath.Join(current, dir)
	}
	return pathname, nil, nil
}

// safeOpen is subpath's doSafeOpen: opens pathname (links resolved
// already) from base one component at a time with O_PATH|O_NOFOLLOW,
// refusing a link met on the way (one swapped in since the resolution).
// The descriptor returned is the caller's to close.
func safeOpen(pathname, base string) (int, error) {
	pathname = filepath.Clean(pathname)
	base = filepath.Clean(base)
	rel, err := filepath.Rel(base, pathname)
	if err != nil {
		return -1, err
	}
	parent, err := openRetry(func() (int, error) {
		return unix.Open(base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, fmt.Errorf("cannot open directory %s: %s", base, err)
	}
	if rel == "." {
		return parent, nil
	}
	current := base
	for _, seg := range strings.Split(rel, "/") {
		current = filepath.Join(current, seg)
		if !pathWithinBase(current, base) {
			unix.Close(parent)
			return -1, fmt.Errorf("path %s is outside of allowed base %s", current, base)
		}
		child, err := openRetry(func() (int, error) {
			return unix.Openat(parent, seg, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		unix.Close(parent)
		if err != nil {
			return -1, fmt.Errorf("cannot open %s: %s", current, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(child, &st); err != nil {
			unix.Close(child)
			return -1, fmt.Errorf("error running fstat on %s with %v", current, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(child)
			return -1, fmt.Errorf("unexpected symlink found %s", current)
		}
		parent = child
	}
	return parent, nil
}
