package fswalk

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func openRoot(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// deepTree makes depth nested directories named name under dir by
// descriptors (the path passes PATH_MAX), a file "f" in the deepest.
func deepTree(t *testing.T, dir, name string, depth int) {
	t.Helper()
	cur := openRoot(t, dir)
	cur, err := unix.Dup(cur)
	require.NoError(t, err)
	for range depth {
		require.NoError(t, unix.Mkdirat(cur, name, 0o755))
		next, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		unix.Close(cur)
		cur = next
	}
	fd, err := unix.Openat(cur, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	require.NoError(t, err)
	unix.Close(fd)
	unix.Close(cur)
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// Every entry is visited once, a directory before its entries and left
// after them, across more entries than one getdents batch holds and with
// subdirectories among them (the walk leaves a directory's batch to enter
// one and resumes after it).
func TestWalkVisitsEachEntryOnce(t *testing.T) {
	dir := t.TempDir()
	want := map[string]bool{}
	long := strings.Repeat("n", 200)
	for i := range 600 {
		name := long + strconv.Itoa(i)
		if i%50 == 0 {
			require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name, "in"), nil, 0o644))
			want[name+"/in"] = true
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		}
		want[name] = true
	}
	got := map[string]int{}
	left := map[string]bool{}
	w := Walker{
		Visit: func(e *Entry) error {
			rel := strings.TrimPrefix(e.Path(), "./")
			got[rel]++
			assert.False(t, left[rel], "%s visited after it was left", rel)
			if e.Depth == 2 {
				assert.False(t, left[filepath.Dir(rel)], "an entry of %s after it was left", filepath.Dir(rel))
			}
			return nil
		},
		Leave: func(e *Entry) error {
			left[strings.TrimPrefix(e.Path(), "./")] = true
			assert.Equal(t, 1, e.Done)
			return nil
		},
	}
	require.NoError(t, w.Walk(openRoot(t, dir)))
	assert.Len(t, got, len(want))
	for name := range want {
		assert.Equal(t, 1, got[name], name)
	}
	assert.Len(t, left, 12)
}

// A tree deeper than the descriptors the agent may open is walked with a
// few: the walk closes a directory to enter one and returns through "..".
func TestWalkDeepTreeFewDescriptors(t *testing.T) {
	dir := t.TempDir()
	const depth = 1000
	deepTree(t, dir, "d", depth)
	root := openRoot(t, dir)
	before := openFDs(t)
	most, visited, leftRoot := 0, 0, false
	w := Walker{
		Visit: func(e *Entry) error {
			visited++
			if e.Depth%100 == 0 || e.Name == "f" {
				most = max(most, openFDs(t)-before)
			}
			return nil
		},
		Leave: func(e *Entry) error {
			leftRoot = leftRoot || e.Depth == 1
			return nil
		},
	}
	require.NoError(t, w.Walk(root))
	assert.Equal(t, depth+1, visited)
	assert.True(t, leftRoot)
	assert.LessOrEqual(t, most, 2, "descriptors open beside the root")
	assert.Equal(t, before, openFDs(t), "descriptors left open")
}

// A directory swapped for a link (to a tree outside) between its lstat and
// its open is not entered.
func TestWalkNeverFollowsSwappedDirectory(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
	zz := filepath.Join(dir, "zz")
	require.NoError(t, os.Mkdir(zz, 0o755))
	testHookBeforeOpen = func(name string) {
		if name == "zz" {
			require.NoError(t, os.Remove(zz))
			require.NoError(t, os.Symlink(outside, zz))
		}
	}
	defer func() { testHookBeforeOpen = nil }()
	var seen []string
	w := Walker{Visit: func(e *Entry) error {
		seen = append(seen, e.Name)
		return nil
	}}
	require.NoError(t, w.Walk(openRoot(t, dir)))
	assert.NotContains(t, seen, "secret")
	assert.NotContains(t, seen, "zz", "what was listed is gone: not visited")
}

// The entries are counted as they are visited: past the bound the walk
// stops, having read one batch, not the whole directory.
func TestWalkStopsAtMaxEntries(t *testing.T) {
	dir := t.TempDir()
	for i := range 3000 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644))
	}
	visited := 0
	w := Walker{MaxEntries: 10, Visit: func(*Entry) error {
		visited++
		return nil
	}}
	err := w.Walk(openRoot(t, dir))
	assert.ErrorIs(t, err, ErrTooManyEntries)
	assert.Equal(t, 10, visited)
}

// Errors name the entry from the root, cut to a few hundred bytes however
// deep it is; the walk goes on past them and says how many more there were.
func TestWalkErrorsShortPaths(t *testing.T) {
	bad := errors.New("bad")
	w := Walker{Root: "vol", Visit: func(e *Entry) error {
		if !e.IsDir() {
			return &os.PathError{Op: "remove", Path: e.Path(), Err: bad}
		}
		return nil
	}}

	deep := t.TempDir()
	name := strings.Repeat("x", 255)
	deepTree(t, deep, name, 100)
	err := w.Walk(openRoot(t, deep))
	require.ErrorIs(t, err, bad)
	assert.Less(t, len(err.Error()), 512, err.Error())
	assert.True(t, strings.HasPrefix(err.Error(), "remove vol/"+name[:60]), err.Error())
	assert.True(t, strings.HasSuffix(err.Error(), name[:100]+"/f: bad"), err.Error())
	assert.Contains(t, err.Error(), "…")

	wide := t.TempDir()
	for i := range 20 {
		require.NoError(t, os.WriteFile(filepath.Join(wide, "file"+strconv.Itoa(i)), nil, 0o644))
	}
	err = w.Walk(openRoot(t, wide))
	require.ErrorIs(t, err, bad)
	assert.Len(t, strings.Split(err.Error(), "\n"), maxErrors+1)
	assert.Contains(t, err.Error(), "and 12 more errors")
}

// Leave may ask for a directory to be listed again (entries missed or
// added); the walk does so a few times at most.
func TestWalkRescan(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "f"), nil, 0o644))
	visits, leaves := 0, 0
	w := Walker{
		Visit: func(e *Entry) error {
			if e.Name == "f" {
				visits++
			}
			return nil
		},
		Leave: func(*Entry) error {
			leaves++
			return ErrRescan
		},
	}
	err := w.Walk(openRoot(t, dir))
	assert.ErrorIs(t, err, unix.ENOTEMPTY)
	assert.Equal(t, maxRescans+1, visits)
	assert.Equal(t, maxRescans+1, leaves)
}

// SkipDir leaves a directory unentered and the walk going: its siblings
// and the entries after it are visited, and the walk ends without error.
func TestWalkSkipDir(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b", "c"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d, "inner"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, d, "f"), nil, 0o644))
	}
	var visited []string
	w := Walker{Root: dir, Visit: func(e *Entry) error {
		visited = append(visited, e.Name)
		if e.Name == "b" {
			return SkipDir
		}
		return nil
	}}
	require.NoError(t, w.Walk(openRoot(t, dir)))
	assert.ElementsMatch(t, []string{"a", "inner", "f", "b", "c", "inner", "f"}, visited, "b's entries skipped, the rest visited")
}
