package eviction

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The entry bound bounds what a walk reads: a directory is read in
// batches, not whole (and sorted) before the first entry is counted, which
// took MiB for a directory a container filled with names.
func TestDiskUsageReadsInBatches(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("n", 250)
	for i := range 12000 {
		f, err := os.Create(filepath.Join(root, "a", long+strconv.Itoa(i)))
		if os.IsNotExist(err) {
			require.NoError(t, os.Mkdir(filepath.Join(root, "a"), 0o755))
			f, err = os.Create(filepath.Join(root, "a", long+strconv.Itoa(i)))
		}
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := diskUsage(root, 3)
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, errTooManyEntries)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated to count 3 entries")

	_, err = filesUsage(filepath.Join(root, "a"))
	assert.NoError(t, err)
}

// A directory swapped for a link (to a big file outside the volume)
// between its parent's listing and its own open is never followed: opened
// by path, it was, by a container racing the measurement.
func TestDiskUsageNeverFollowsSwappedLink(t *testing.T) {
	root := t.TempDir()
	vol := filepath.Join(root, "vol")
	outside := filepath.Join(root, "outside")
	writeFile(t, filepath.Join(outside, "big"), 16<<20)
	for i := range 2000 {
		writeFile(t, filepath.Join(vol, "a"+strconv.Itoa(i)), 0)
	}
	zz := filepath.Join(vol, "zz")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Remove(zz)
			_ = os.Mkdir(zz, 0o755)
			_ = os.Remove(zz)
			_ = os.Symlink(outside, zz)
		}
	}()
	defer wg.Wait()
	defer close(stop)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for walks := 0; walks < 200 && time.Now().Before(deadline); walks++ {
		used, _ := diskUsage(vol, maxWalkEntries)
		require.Less(t, used, int64(8<<20), "walk %d counted the file outside through a swapped link", walks)
	}
}

// A container's log directory holds the instances' files and may hold
// directories: filesUsage counts the files directly in it and skips the
// directories quietly (the walk went on; it was an error each pass).
func TestFilesUsageSkipsDirectories(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "big"), make([]byte, 1<<20), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0.log"), make([]byte, 8192), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1.log"), make([]byte, 8192), 0o644))
	got, err := filesUsage(dir)
	require.NoError(t, err)
	assert.Equal(t, int64(2*8192), got, "the two files, not the subdirectory's")
}
