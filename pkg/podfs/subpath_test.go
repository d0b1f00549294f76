package podfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSubPath(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil { // an emptyDir's mode
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(vol, "exists"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vol, "file"), "x")
	if err := os.Symlink("/etc", filepath.Join(vol, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("exists", filepath.Join(vol, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(vol, "up")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		subPath    string
		want       string // relative to vol
		wantErr    string
		wantCreate bool // a *SubPathError of making the directory
		wantPrep   bool // a *SubPathError of the check
	}{
		{subPath: "", want: "."},
		{subPath: "exists", want: "exists"},
		{subPath: "file", want: "file"},
		{subPath: "inside", want: "exists"},
		{subPath: "new/deeper", want: "new/deeper"},
		{subPath: "/etc", wantErr: "error SubPath `/etc` must not be an absolute path"},
		{subPath: "a/../../etc", wantErr: "unable to provision SubPath `a/../../etc`: must not contain '..'"},
		{subPath: "..", wantErr: "unable to provision SubPath `..`: must not contain '..'"},
		{subPath: "etc", wantErr: `subpath "/etc" not within volume path "` + vol + `"`, wantPrep: true},
		{subPath: "etc/passwd", wantErr: `subpath "/etc/passwd" not within volume path "` + vol + `"`, wantPrep: true},
		{subPath: "etc/cri-prober-test-new", wantErr: "path /etc is outside of allowed base " + vol, wantCreate: true},
		{subPath: "up", wantErr: "not within volume path", wantPrep: true},
		// Stat fails with ENOTDIR, not ENOENT: kubelet's PathExists errs, it
		// makes nothing and the check fails.
		{subPath: "file/x", wantErr: "not a directory", wantPrep: true},
	} {
		t.Run(tc.subPath, func(t *testing.T) {
			got, err := SubPath(vol, tc.subPath)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(vol, tc.want); got != want && !(tc.subPath == "" && got == vol) {
					t.Errorf("SubPath = %s, want %s", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			var se *SubPathError
			isSE := errors.As(err, &se)
			if isSE != (tc.wantCreate || tc.wantPrep) || (isSE && se.Create != tc.wantCreate) {
				t.Errorf("error %T %+v: want create %v prepare %v", err, se, tc.wantCreate, tc.wantPrep)
			}
		})
	}
	if exists("/etc/cri-prober-test-new") {
		os.Remove("/etc/cri-prober-test-new")
		t.Fatal("SafeMakeDir made a directory in /etc through a link")
	}
	// Made with the volume's mode, whatever the umask.
	for _, d := range []string{"new", "new/deeper"} {
		if got := mode(t, filepath.Join(vol, d)); got != fs.ModeDir|0o777 {
			t.Errorf("%s: mode %v, want the volume's drwxrwxrwx", d, got)
		}
	}
}

func TestSubPathErrorMessage(t *testing.T) {
	e := &SubPathError{Create: true, Err: errors.New("detail")}
	if got := e.Message("data", "app"); got != `failed to create subPath directory for volumeMount "data" of container "app"` {
		t.Error(got)
	}
	e.Create = false
	if got := e.Message("data", "app"); got != `failed to prepare subPath for volumeMount "data" of container "app"` {
		t.Error(got)
	}
}

func TestBindSubPath(t *testing.T) {
	requireMount(t)
	m := newRealTestManager(t)
	owned(t, m, "u1")
	pod := testPod("u1", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	vols, err := m.SetUp(context.Background(), pod, PodValues{})
	if err != nil {
		t.Fatal(err)
	}
	vol := vols["data"].HostPath
	ctx := context.Background()

	target, err := m.BindSubPath(ctx, "u1", "data", "app", 0, vol, "logs/app")
	if err != nil {
		t.Fatal(err)
	}
	if want := m.Layout().SubPathTarget("u1", "data", "app", 0); target != want {
		t.Errorf("target %s, want %s", target, want)
	}
	// The mount is of the checked directory: a file made there shows.
	writeFile(t, filepath.Join(vol, "logs/app/x"), "through")
	if data, err := os.ReadFile(filepath.Join(target, "x")); err != nil || string(data) != "through" {
		t.Fatalf("bind mount does not show the subPath: %q %v", data, err)
	}
	// The container swaps the directory for a link to /etc: the mount
	// still shows the old directory, not /etc.
	if err := os.Rename(filepath.Join(vol, "logs/app"), filepath.Join(vol, "logs/old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(vol, "logs/app")); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(target, "passwd")) {
		t.Error("the bind mount follows a link swapped in")
	}
	// And a new bind of it is refused.
	if _, err := m.BindSubPath(ctx, "u1", "data", "app", 1, vol, "logs/app"); err == nil {
		t.Error("a subPath through a link to /etc was bound")
	}
	// Again for a restart, same file: kept.
	if err := os.Remove(filepath.Join(vol, "logs/app")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(vol, "logs/old"), filepath.Join(vol, "logs/app")); err != nil {
		t.Fatal(err)
	}
	if again, err := m.BindSubPath(ctx, "u1", "data", "app", 0, vol, "logs/app"); err != nil || again != target {
		t.Errorf("again: %s %v", again, err)
	}
	// A file subPath: bound on a file.
	writeFile(t, filepath.Join(vol, "conf"), "cfg")
	ft, err := m.BindSubPath(ctx, "u1", "data", "app", 2, vol, "conf")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(ft); string(data) != "cfg" {
		t.Errorf("file subPath reads %q", data)
	}

	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if exists(m.Layout().PodDir("u1")) {
		t.Error("pod dir left")
	}
	if mps, _ := (sysMounter{}).mounts(m.Layout().Root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}
