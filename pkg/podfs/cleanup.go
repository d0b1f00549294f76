package podfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/fswalk"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// unmountRounds bounds TearDown's passes over the mount table: each pass
// unmounts the top mount of every mount point under the pod directory, so
// mounts stacked on one path need one pass each.
const unmountRounds = 8

// TearDown removes the pod directory of uid and everything in it, as
// kubelet's volume manager (each volume's TearDown) and then
// cleanupOrphanedPodDirs do once a pod is gone: it unmounts every mount at
// or under the directory (tmpfs volumes, subPath bind mounts, whatever
// else is there), deepest first, and then removes the files, never
// following a symbolic link and never crossing into another mount (kubelet's
// removeall.RemoveAllOneFilesystem), so that a link a container made in an
// emptyDir, or a mount that could not be removed, never costs a file
// outside the pod directory. The contents of the agent's own volume kinds
// (emptyDir, downwardAPI, projected) are removed, as their plugins'
// TearDown does; any other volume directory is only rmdir'ed (kubelet's
// removeOrphanedPodVolumeDirs). The pod record goes last, so that a
// TearDown cut short is finished by the next one.
//
// The subPath bind mounts go first, as kubelet's CleanSubPaths runs before
// each volume's TearDown: each <pod>/volume-subpaths/<volume>/<container>/
// <index> unmounted, then the tree removed.
//
// The caller stops the pod's containers first: a busy mount fails the
// unmount and TearDown returns its error having removed nothing of the
// volumes. A missing directory is no error; one without the agent's record
// is refused (ErrNoRecord) unless it is empty.
func (m *Manager) TearDown(ctx context.Context, uid string) error {
	if err := checkElem("pod UID", uid); err != nil {
		return err
	}
	defer m.lockPod(uid)()
	logger := klog.FromContext(ctx).WithValues("podUID", uid)
	podDir := m.layout.PodDir(types.UID(uid))

	pods, err := m.openPods()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer pods.Close()
	pfd := int(pods.Fd())
	// A pod directory that WriteRecord was making when the agent stopped.
	if err := removeAllAt(pfd, newPodPrefix+uid, m.layout.PodsDir()); err != nil {
		return err
	}

	dfd, ok, err := m.openPodDirAt(pfd, uid)
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	if _, err := readRecordAt(dfd, m.layout.RecordFile(types.UID(uid)), uid); err != nil {
		if !errors.Is(err, ErrNoRecord) || !dirEmpty(dfd) {
			return fmt.Errorf("tearing down pod %s: %w", uid, err)
		}
		// Empty, record removed: a TearDown was cut short before its rmdir.
		if err := unix.Unlinkat(pfd, uid, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("tearing down pod %s: %w", uid, &fs.PathError{Op: "rmdir", Path: podDir, Err: err})
		}
		return nil
	}

	// Volumes first, each by what its plugin's TearDown does.
	if err := m.tearDownVolumesAt(ctx, logger, dfd, uid); err != nil {
		return fmt.Errorf("tearing down pod %s: %w", uid, err)
	}
	// Then everything else but the record (cleanupOrphanedPodDirs).
	names, err := readDirNamesAt(dfd, podDir)
	if err != nil {
		return fmt.Errorf("tearing down pod %s: %w", uid, err)
	}
	var errs []error
	for _, name := range names {
		if name == podconfig.RecordFileName {
			continue
		}
		if err := removeAllAt(dfd, name, podDir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down pod %s: %w", uid, err)
	}
	if err := unix.Unlinkat(dfd, podconfig.RecordFileName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("tearing down pod %s: %w", uid, &fs.PathError{Op: "remove", Path: m.layout.RecordFile(types.UID(uid)), Err: err})
	}
	if err := unix.Unlinkat(pfd, uid, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("tearing down pod %s: %w", uid, &fs.PathError{Op: "rmdir", Path: podDir, Err: err})
	}
	_ = fsyncRetry(pfd)
	logger.V(2).Info("Removed the pod directory", "path", podDir)
	return nil
}

// TearDownVolumes tears down the volumes of a pod that terminated but
// stays (its manifest is still there), as kubelet's volume manager does
// once the pod's runtime may be removed: the subPath bind mounts and every
// mount under the pod directory (tmpfs volumes) unmounted, then the
// contents of the agent's own volume kinds (emptyDir, downwardAPI,
// projected) removed, as TearDown does, without following a link or
// crossing a mount. The pod directory, its record and its other files
// (etc-hosts, containers/) stay, as kubelet leaves them until the pod is
// removed. A missing directory is no error; one without the agent's
// record is refused (ErrNoRecord).
func (m *Manager) TearDownVolumes(ctx context.Context, uid string) error {
	if err := checkElem("pod UID", uid); err != nil {
		return err
	}
	defer m.lockPod(uid)()
	pods, err := m.openPods()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer pods.Close()
	dfd, ok, err := m.openPodDirAt(int(pods.Fd()), uid)
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	if _, err := readRecordAt(dfd, m.layout.RecordFile(types.UID(uid)), uid); err != nil {
		return fmt.Errorf("tearing down the volumes of pod %s: %w", uid, err)
	}
	if err := m.tearDownVolumesAt(ctx, klog.FromContext(ctx).WithValues("podUID", uid), dfd, uid); err != nil {
		return fmt.Errorf("tearing down the volumes of pod %s: %w", uid, err)
	}
	return nil
}

// openPodDirAt opens the directory of pod uid in the pods directory open
// at pfd; ok is false when it is missing (err nil) or cannot be opened.
func (m *Manager) openPodDirAt(pfd int, uid string) (dfd int, ok bool, err error) {
	dfd, err = openDirAt(pfd, uid)
	if errors.Is(err, unix.ENOENT) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, m.podDirError(uid, err)
	}
	return dfd, true, nil
}

// tearDownVolumesAt tears down the volumes of the pod whose directory is
// open at dfd: subPaths, then every mount under the directory, then the
// volumes' contents (removeVolumes). The caller holds the pod's lock.
func (m *Manager) tearDownVolumesAt(ctx context.Context, logger klog.Logger, dfd int, uid string) error {
	if err := m.cleanSubPaths(ctx, dfd, types.UID(uid)); err != nil {
		return err
	}
	if err := m.unmountAll(ctx, m.layout.PodDir(types.UID(uid))); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.removeVolumes(logger, dfd, types.UID(uid))
}

// cleanSubPaths is kubelet's CleanSubPaths for every volume of the pod:
// the mounts under <pod>/volume-subpaths unmounted, deepest first, then
// the directory removed, never through a link or into a mount left.
func (m *Manager) cleanSubPaths(ctx context.Context, dfd int, uid types.UID) error {
	dir := m.layout.VolumeSubpathsDir(uid)
	if err := m.unmountAll(ctx, dir); err != nil {
		return err
	}
	return removeAllAt(dfd, relElem(dir), filepath.Dir(dir))
}

// unmountAll unmounts everything mounted at or under dir, deepest first,
// and fails if anything is left.
func (m *Manager) unmountAll(ctx context.Context, dir string) error {
	logger := klog.FromContext(ctx)
	for range unmountRounds {
		mps, err := m.mnt.mounts(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := m.mnt.unmount(mp.path); err != nil {
				return err
			}
			logger.V(3).Info("Unmounted", "path", mp.path, "fsType", mp.fsType)
		}
	}
	mps, err := m.mnt.mounts(dir)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		return fmt.Errorf("%s is still mounted after %d rounds of unmounting", mps[0].path, unmountRounds)
	}
	return nil
}

// removeVolumes removes <pod>/volumes: the contents of the agent's own
// volume kinds (their plugins' TearDown: os.RemoveAll after the unmount),
// only empty directories of any other (removeOrphanedPodVolumeDirs).
func (m *Manager) removeVolumes(logger klog.Logger, dfd int, uid types.UID) error {
	volumesDir := m.layout.VolumesDir(uid)
	vfd, err := openDirAt(dfd, relElem(volumesDir))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: volumesDir, Err: err}
	}
	defer unix.Close(vfd)
	plugins, err := readDirNamesAt(vfd, volumesDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, plugin := range plugins {
		dirsOnly := plugin != podconfig.PluginEmptyDir && plugin != podconfig.PluginDownwardAPI && plugin != podconfig.PluginProjected
		if dirsOnly {
			logger.Info("Unknown volume plugin directory in the pod directory: removing only its empty directories", "path", filepath.Join(volumesDir, plugin))
		}
		if err := removeAt(vfd, plugin, volumesDir, dirsOnly); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := unix.Unlinkat(dfd, relElem(volumesDir), unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "rmdir", Path: volumesDir, Err: err}
	}
	return nil
}

// RemoveLogs removes kubelet's log directory of a pod,
// Layout.PodLogsDirectory (<podLogsDir>/<namespace>_<name>_<uid>), as
// kubelet's containerGC evictPodLogsDirectories does once the pod's
// content may be removed, without following links in it. A missing
// directory is no error.
func (m *Manager) RemoveLogs(namespace, name, uid string) error {
	for _, e := range [][2]string{{"namespace", namespace}, {"pod name", name}, {"pod UID", uid}} {
		if err := checkElem(e[0], e[1]); err != nil {
			return err
		}
	}
	dir := m.layout.PodLogsDirectory(namespace, name, types.UID(uid))
	parent := filepath.Dir(dir)
	fd, err := openRetry(func() (int, error) {
		return unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(fd)
	return removeAllAt(fd, relElem(dir), parent)
}

// RemovePodCgroups removes the pod's cgroup directories once they are
// empty, as kubelet's podContainerManager.Destroy does for a pod that is
// gone: the pod's cgroup as podconfig names it (PodCgroupName: under the
// node's CgroupRoot, /kubepods[/burstable|/besteffort]/pod<uid> with
// kubelet's defaults, for each QoS class since the pod may be gone) in
// each cgroup v1 hierarchy, or under the unified (v2) root, with the empty
// cgroups of containers left inside, deepest first (a cgroup directory is
// removed by rmdir, its control files with it). The runtime makes these
// directories with the cgroupfs driver; with the systemd driver they are
// systemd's slices, which it removes, and nothing is done here; nor
// without a CgroupRoot (the runtime's default parent). A cgroup that still
// has processes fails with EBUSY: the caller stops the pod first; kubelet
// would kill them, the agent leaves that to the runtime. Missing
// directories are no error.
func (m *Manager) RemovePodCgroups(uid string) error {
	if err := checkElem("pod UID", uid); err != nil {
		return err
	}
	if m.node.CgroupRoot == "" || m.node.CgroupDriver == "systemd" {
		return nil
	}
	defer m.lockPod(uid)()
	bases := []string{m.cgroupFS} // cgroup v2: the root is the hierarchy
	if _, err := os.Stat(filepath.Join(m.cgroupFS, "cgroup.controllers")); err != nil {
		// cgroup v1 (or hybrid): a hierarchy per directory, "unified"
		// among them; "cpu" -> "cpu,cpuacct" links name one twice.
		entries, err := os.ReadDir(m.cgroupFS)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				bases = append(bases, filepath.Join(m.cgroupFS, e.Name()))
			}
		}
	}
	var errs []error
	for _, base := range bases {
		for _, qos := range []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort} {
			name := podconfig.PodCgroupName(types.UID(uid), qos, m.node)
			if err := rmdirTree(filepath.Join(base, filepath.FromSlash(name))); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirTree removes the directory dir and the directories under it,
// deepest first, with rmdir alone: in a cgroup file system that removes
// empty cgroups, and fails on one with processes.
func rmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("cgroup %s still has processes: %w", dir, err)
		}
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// removeAllAt removes name in the directory dirfd (whose path is dirPath)
// and everything under it: RemoveAllOneFilesystem by descriptors, never
// following a link, refusing to enter another mount. It removes what it can
// and returns the errors. A missing name is no error.
func removeAllAt(dirfd int, name, dirPath string) error {
	return removeAt(dirfd, name, dirPath, false)
}

// removeAt is removeAllAt, or with dirsOnly RemoveDirsOneFilesystem: only
// directories are removed, a file is an error. The tree under name, which a
// container may have built, is removed as GNU rm does (pkg/fswalk): with a
// few descriptors whatever its depth, each directory read in batches, and
// errors naming paths relative to name, cut short.
func removeAt(dirfd int, name, dirPath string, dirsOnly bool) error {
	path := filepath.Join(dirPath, name)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if dirsOnly {
			return fmt.Errorf("%s is not a directory: not removed", path)
		}
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "remove", Path: path, Err: err}
		}
		return nil
	}
	fd, err := openDirAt(dirfd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	same, err := fswalk.SameMount(dirfd, fd)
	if err != nil {
		return &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	if !same {
		return fmt.Errorf("cannot delete directory %s: it is a mount point", path)
	}
	r := remover{dirsOnly: dirsOnly}
	w := fswalk.Walker{Root: path, Visit: r.visit, Leave: r.leave}
	for pass := 1; ; pass++ {
		if err := w.Walk(fd); err != nil {
			return err
		}
		err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		if errors.Is(err, unix.ENOTEMPTY) && pass < maxRemovePasses {
			continue // entries missed or added meanwhile: list it again
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "rmdir", Path: path, Err: err}
		}
		return nil
	}
}

// maxRemovePasses is how many times removeAt lists a directory that is
// still not empty once walked.
const maxRemovePasses = 3

// remover removes the entries of a walk: a file as it is visited, a
// directory once left.
type remover struct{ dirsOnly bool }

func (r remover) visit(e *fswalk.Entry) error {
	switch {
	case e.MountPoint:
		return fmt.Errorf("cannot delete directory %s: it is a mount point", e.Path())
	case e.IsDir():
		return nil
	case r.dirsOnly:
		return fmt.Errorf("%s is not a directory: not removed", e.Path())
	}
	if err := unix.Unlinkat(e.Dir, e.Name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: e.Path(), Err: err}
	}
	return nil
}

func (r remover) leave(e *fswalk.Entry) error {
	if e.Failed > 0 {
		return fswalk.ErrBelow // not empty: said below
	}
	err := unix.Unlinkat(e.Dir, e.Name, unix.AT_REMOVEDIR)
	switch {
	case err == nil || errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTEMPTY):
		return fswalk.ErrRescan
	}
	return &fs.PathError{Op: "rmdir", Path: e.Path(), Err: err}
}

// readDirNamesAt lists the directory fd without closing it.
func readDirNamesAt(fd int, path string) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(dup), path)
	defer f.Close()
	// The duplicate shares the offset: start from the beginning.
	if _, err := unix.Seek(dup, 0, 0); err != nil {
		return nil, &fs.PathError{Op: "seek", Path: path, Err: err}
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return names, nil
}

// dirEmpty reports whether the directory fd has no entries.
func dirEmpty(fd int) bool {
	names, err := readDirNamesAt(fd, "")
	return err == nil && len(names) == 0
}
