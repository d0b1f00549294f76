package eviction

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxWalkEntries bounds a walk of what a workload wrote (a volume): past
// it the walk stops and says so, with what it counted (a lower bound).
const maxWalkEntries = 1 << 20

// errTooManyEntries: a walk stopped at maxWalkEntries.
var errTooManyEntries = errors.New("too many entries")

// diskUsage is du -s -B1 of root as kubelet's MetricsDu measures a
// volume: the blocks of every file and directory under it, each inode
// once, found with lstat (never following a link a container could have
// planted), staying on root's filesystem, and at most maxEntries entries
// (errTooManyEntries then, with the sum so far). A missing root uses
// nothing.
func diskUsage(root string, maxEntries int) (int64, error) {
	var rootStat unix.Stat_t
	if err := unix.Lstat(root, &rootStat); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, nil
		}
		return 0, fmt.Errorf("measure %s: %w", root, err)
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	entries := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		entries++
		if entries > maxEntries {
			return errTooManyEntries
		}
		info, err := d.Info() // lstat: WalkDir never follows a link
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if uint64(st.Dev) != uint64(rootStat.Dev) {
			if d.IsDir() {
				return fs.SkipDir // another filesystem mounted under it
			}
			return nil
		}
		if st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("measure %s: %w", root, err)
	}
	return total, nil
}

// filesUsage is kubelet's fileMetricsByDir summed: the blocks of each
// file directly in dir (not its subdirectories), found with lstat. A
// missing dir uses nothing.
func filesUsage(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("measure %s: %w", dir, err)
	}
	if len(entries) > maxWalkEntries {
		entries = entries[:maxWalkEntries]
	}
	var total int64
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile (rotated)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
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
