package podfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/mountinfo"
)

// mounter is what the package asks of the kernel's mount table: the real
// system calls, or in tests that cannot mount a recorder of them.
type mounter interface {
	// mountTmpfs mounts a new tmpfs at dir with the given options.
	mountTmpfs(dir string, options []string) error
	// bind bind-mounts src (not recursively) at target.
	bind(src, target string) error
	// unmount unmounts target, never following a symbolic link; one that
	// is not a mount point is no error.
	unmount(target string) error
	// mounts lists the mount points at or under dir, with their file
	// system types.
	mounts(dir string) ([]mountPoint, error)
}

type mountPoint struct {
	path   string
	fsType string
}

// sysMounter is the real mount table of the agent's mount namespace.
type sysMounter struct{}

// mountTmpfs mounts like kubelet's emptyDir.setupTmpfs (mount -t tmpfs -o
// size=N[,noswap] tmpfs dir). kubelet adds noswap when the kernel has it
// (swap.IsTmpfsNoswapOptionSupported: 6.4+ or a trial mount); a kernel
// without it refuses the option with EINVAL, and the mount is tried again
// without it: the same result without a trial mount.
func (sysMounter) mountTmpfs(dir string, options []string) error {
	err := unix.Mount("tmpfs", dir, "tmpfs", 0, strings.Join(options, ","))
	if errors.Is(err, unix.EINVAL) {
		var rest []string
		for _, o := range options {
			if o != tmpfsNoswap {
				rest = append(rest, o)
			}
		}
		if len(rest) != len(options) {
			err = unix.Mount("tmpfs", dir, "tmpfs", 0, strings.Join(rest, ","))
		}
	}
	if err != nil {
		return fmt.Errorf("mount -t tmpfs -o %s tmpfs %s: %w", strings.Join(options, ","), dir, err)
	}
	return nil
}

func (sysMounter) bind(src, target string) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount --bind %s %s: %w", src, target, err)
	}
	return nil
}

func (sysMounter) unmount(target string) error {
	for {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // EINVAL: not a mount point
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("umount %s: %w", target, err)
		}
	}
}

func (sysMounter) mounts(dir string) ([]mountPoint, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountInfo(f, dir)
}

// parseMountInfo returns the mount points of a /proc/<pid>/mountinfo at or
// under dir, deepest first (the order to unmount them in), each once.
func parseMountInfo(r io.Reader, dir string) ([]mountPoint, error) {
	dir = filepath.Clean(dir)
	seen := map[string]bool{}
	var out []mountPoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		fields := strings.Fields(line[:sep])
		after := strings.Fields(line[sep+3:])
		if len(fields) < 5 || len(after) < 1 {
			continue
		}
		p := mountinfo.Unescape(fields[4])
		if p != dir && !strings.HasPrefix(p, dir+"/") {
			continue
		}
		if seen[p] {
			continue // stacked mounts: TearDown unmounts until none is left
		}
		seen[p] = true
		out = append(out, mountPoint{path: p, fsType: after[0]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := strings.Count(out[i].path, "/"), strings.Count(out[j].path, "/"); a != b {
			return a > b
		}
		return out[i].path > out[j].path
	})
	return out, nil
}

// isMountOf reports whether path is a mount point of file system fsType in
// mps.
func isMountOf(mps []mountPoint, path, fsType string) bool {
	for _, mp := range mps {
		if mp.path == path && mp.fsType == fsType {
			return true
		}
	}
	return false
}

// isMounted reports whether path is a mount point in mps.
func isMounted(mps []mountPoint, path string) bool {
	for _, mp := range mps {
		if mp.path == path {
			return true
		}
	}
	return false
}
