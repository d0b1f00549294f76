package podfs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// nestDirs makes depth nested directories named name in the directory
// dirfd (by descriptors: the path passes PATH_MAX), with files files in
// each, and returns the deepest, open.
func nestDirs(t *testing.T, dirfd int, name string, depth, files int) int {
	t.Helper()
	cur, err := unix.Dup(dirfd)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(cur, name, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			fd, err := unix.Openat(cur, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
		}
		next, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(cur)
		cur = next
	}
	return cur
}

func openTestDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// A tree a container built twice as deep as the agent may open descriptors
// is removed (a descriptor per level ran out of them, failed the teardown
// and starved the agent's other goroutines).
func TestRemoveAllAtDeepTree(t *testing.T) {
	base := t.TempDir()
	fd := openTestDir(t, base)
	if err := unix.Mkdirat(fd, "v", 0o755); err != nil {
		t.Fatal(err)
	}
	vfd := openTestDir(t, filepath.Join(base, "v"))
	unix.Close(nestDirs(t, vfd, "d", 512, 2))

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	err := removeAllAt(fd, "v", base)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("removeAllAt: %.300v", err)
	}
	if exists(filepath.Join(base, "v")) {
		t.Error("the tree is left")
	}
}

// A mount point deep in a tree is refused, and the error names it by a
// short path (it named the whole path, tens of kilobytes).
func TestRemoveAllAtDeepMountPointShortError(t *testing.T) {
	requireMount(t)
	base := t.TempDir()
	victim := t.TempDir()
	writeFile(t, filepath.Join(victim, "precious"), "keep")
	fd := openTestDir(t, base)
	if err := unix.Mkdirat(fd, "v", 0o755); err != nil {
		t.Fatal(err)
	}
	vfd := openTestDir(t, filepath.Join(base, "v"))
	deepest := nestDirs(t, vfd, strings.Repeat("n", 100), 300, 0)
	defer unix.Close(deepest)
	if err := unix.Mkdirat(deepest, "bound", 0o755); err != nil {
		t.Fatal(err)
	}
	bfd, err := unix.Openat(deepest, "bound", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	target := "/proc/self/fd/" + strconv.Itoa(bfd)
	if err := unix.Mount(victim, target, "", unix.MS_BIND, ""); err != nil {
		unix.Close(bfd)
		t.Fatal(err)
	}
	unix.Close(bfd)
	defer func() {
		if fd, err := unix.Openat(deepest, "bound", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
			unix.Close(fd)
		}
	}()

	err = removeAllAt(fd, "v", base)
	if err == nil || !strings.Contains(err.Error(), "it is a mount point") {
		t.Fatalf("removeAllAt: %.300v", err)
	}
	if len(err.Error()) > 1024 {
		t.Errorf("an error of %d bytes: %.300s…", len(err.Error()), err)
	}
	if !strings.HasPrefix(err.Error(), "cannot delete directory "+filepath.Join(base, "v")+"/") || !strings.Contains(err.Error(), "/bound: it is a mount point") {
		t.Errorf("the error does not name the mount point from the volume: %s", err)
	}
	if !exists(filepath.Join(victim, "precious")) {
		t.Error("removed a file in another mount")
	}
}

// A wide tree on tmpfs (whose directory offsets moved as entries were
// removed, before Linux 6.6) is removed whole, files and directories
// interleaved past one batch.
func TestRemoveAllAtWideTmpfs(t *testing.T) {
	requireMount(t)
	base := t.TempDir()
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(base, unix.MNT_DETACH)
	long := strings.Repeat("w", 120)
	for i := range 2000 {
		p := filepath.Join(base, "v", long+strconv.Itoa(i))
		if i%40 == 0 {
			writeFile(t, filepath.Join(p, "inner"), "x")
			continue
		}
		writeFile(t, p, "x")
	}
	if err := removeAllAt(openTestDir(t, base), "v", base); err != nil {
		t.Fatalf("removeAllAt: %.300v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "v")); !os.IsNotExist(err) {
		t.Errorf("the tree is left: %v", err)
	}
}
