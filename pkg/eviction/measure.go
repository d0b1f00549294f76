package eviction

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/fswalk"
)

// maxWalkEntries bounds a walk of what a workload wrote (a volume): past
// it the walk stops and says so, with what it counted (a lower bound).
const maxWalkEntries = 1 << 20

// errTooManyEntries: a walk stopped at maxWalkEntries.
var errTooManyEntries = fswalk.ErrTooManyEntries

// diskUsage is du -s -B1 of root as kubelet's DiskUsage measures a volume
// without quotas (pkg/volume/util/fs): the 512-byte blocks of root and of
// every file and directory under it, an inode with more than one link once,
// not entering a directory on another device (nor, here, another mount).
// The tree is a container's: it is walked by descriptors (pkg/fswalk),
// never following a link, read in batches and counted against maxEntries
// (errTooManyEntries then, with the sum so far). A missing root uses
// nothing; a link in its place is not followed.
func diskUsage(root string, maxEntries int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, nil
		}
		return 0, fmt.Errorf("measure %s: %w", root, err)
	}
	total := st.Blocks * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return total, nil
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return total, nil // replaced meanwhile: not followed
		}
		return total, fmt.Errorf("measure %s: %w", root, err)
	}
	defer unix.Close(fd)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	w := fswalk.Walker{Root: root, MaxEntries: maxEntries, Visit: func(e *fswalk.Entry) error {
		if e.MountPoint || uint64(e.Stat.Dev) != uint64(st.Dev) {
			return fswalk.SkipDir // another filesystem mounted under it
		}
		if e.Stat.Nlink > 1 {
			key := inode{uint64(e.Stat.Dev), e.Stat.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		total += e.Stat.Blocks * 512
		return nil
	}}
	if err := w.Walk(fd); err != nil {
		return total, fmt.Errorf("measure %s: %w", root, err)
	}
	return total, nil
}

// filesUsage is kubelet's fileMetricsByDir summed: the blocks of each
// file directly in dir (not its subdirectories), found with lstat, dir
// read in batches and at most maxWalkEntries entries. A missing dir uses
// nothing.
func filesUsage(dir string) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, nil
		}
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var total int64
	w := fswalk.Walker{Root: dir, MaxEntries: maxWalkEntries, Visit: func(e *fswalk.Entry) error {
		if e.IsDir() {
			return fswalk.SkipDir
		}
		total += e.Stat.Blocks * 512
		return nil
	}}
	if err := w.Walk(fd); err != nil {
		return total, fmt.Errorf("measure %s: %w", dir, err)
	}
	return total, nil
}

// fileUsage is one file's blocks (lstat); a missing file uses nothing.
func fileUsage(path string) int64 {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}

// Statfs is a filesystem's figures, and its device, by path.
type Statfs func(path string) (FsStats, uint64, error)

// statfs reads a filesystem's figures with statfs(2) (available: to an
// unprivileged user, as kubelet's cadvisor reports them) and the device
// of path.
func statfs(path string) (FsStats, uint64, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return FsStats{}, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FsStats{}, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	bsize := int64(s.Bsize)
	return FsStats{
		AvailableBytes: int64(s.Bavail) * bsize,
		CapacityBytes:  int64(s.Blocks) * bsize,
		InodesFree:     int64(s.Ffree),
		Inodes:         int64(s.Files),
	}, uint64(st.Dev), nil
}
