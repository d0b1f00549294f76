package imagegc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Statfs gives the capacity and available bytes of the filesystem holding
// a path, as cadvisor's GetDirFsInfo does for kubelet (blocks and blocks
// available to unprivileged users, times the block size).
type Statfs func(path string) (capacity, available int64, err error)

// statfs is Statfs on the host.
func statfs(path string) (capacity, available int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}
