package podfs

import (
	"errors"
	"io/fs"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"golang.org/x/sys/unix"
)

// Bits kubelet's SetVolumeOwnership adds for an fsGroup (volume_linux.go).
const (
	rwMask   = 0o660
	roMask   = 0o440
	execMask = 0o110
)

// ownership is a pod's fsGroup, applied to its managed volumes as
// kubelet's volume.VolumeOwnership.ChangePermissions does: every file and
// directory's group becomes the fsGroup, files gain group (and owner)
// read, and write unless the volume is read-only, directories also the
// setgid bit and search. nil fsGroup: nothing.
type ownership struct {
	fsGroup *int64
	policy  *corev1.PodFSGroupChangePolicy
}

func podOwnership(pod *corev1.Pod) ownership {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return ownership{fsGroup: sc.FSGroup, policy: sc.FSGroupChangePolicy}
	}
	return ownership{}
}

// apply changes dir's tree. Like kubelet it logs, and goes on past, what
// it cannot change in a file; it fails only when the tree cannot be read.
// Unlike kubelet's (by path), it works by descriptors, opening nothing
// through a link: a container that swaps a directory for a link while the
// walk runs cannot make the agent chown or chmod a host file.
func (o ownership) apply(logger klog.Logger, dir string, readOnly bool) error {
	if o.fsGroup == nil {
		return nil
	}
	fd, err := openRetry(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if o.policy != nil && *o.policy == corev1.FSGroupChangeOnRootMismatch && !o.rootMismatch(fd, readOnly) {
		logger.V(3).Info("Skipping permission and ownership change for volume", "path", dir)
		return nil
	}
	return o.walk(logger, fd, dir, readOnly)
}

// rootMismatch is kubelet's requiresPermissionChange: the root's group is
// not the fsGroup, or its mode lacks the bits or setgid.
func (o ownership) rootMismatch(fd int, readOnly bool) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return true
	}
	if int64(st.Gid) != *o.fsGroup {
		return true
	}
	want := uint32(rwMask)
	if readOnly {
		want = roMask
	}
	want |= execMask
	return st.Mode&want != want || st.Mode&unix.S_ISGID == 0
}

// walk changes the directory fd's entries, then the directory itself
// (kubelet's walkDeep order).
func (o ownership) walk(logger klog.Logger, fd int, path string, readOnly bool) error {
	names, err := readDirNamesAt(fd, path)
	if err != nil {
		return err
	}
	for _, name := range names {
		child := path + "/" + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return &fs.PathError{Op: "lstat", Path: child, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cfd, err := openDirAt(fd, name)
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return &fs.PathError{Op: "open", Path: child, Err: err}
			}
			err = o.walk(logger, cfd, child, readOnly)
			unix.Close(cfd)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			cfd, err := openRetry(func() (int, error) {
				return unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			})
			if err != nil {
				logger.Error(err, "Cannot open a file to change its ownership", "path", child)
				continue
			}
			o.change(logger, cfd, child, readOnly)
			unix.Close(cfd)
		default:
			// A link (whose own mode means nothing: kubelet skips its
			// chmod too), a device, a socket, a FIFO: the group only.
			if err := unix.Fchownat(fd, name, -1, int(*o.fsGroup), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				logger.Error(err, "Lchown failed", "path", child)
			}
		}
	}
	o.change(logger, fd, path, readOnly)
	return nil
}

// change is kubelet's changeFilePermission for an open file or directory.
func (o ownership) change(logger klog.Logger, fd int, path string, readOnly bool) {
	if err := unix.Fchown(fd, -1, int(*o.fsGroup)); err != nil {
		logger.Error(err, "Lchown failed", "path", path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		logger.Error(err, "chmod failed", "path", path)
		return
	}
	mask := uint32(rwMask)
	if readOnly {
		mask = roMask
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		mask |= unix.S_ISGID | execMask
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777|mask); err != nil {
		logger.Error(err, "chmod failed", "path", path)
	}
}
