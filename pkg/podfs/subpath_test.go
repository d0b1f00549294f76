package podfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// Rows of kubelet's makeMounts with the real subpather (TestMakeMounts,
// subpath_linux_test's TestSafeMakeDir and TestBindSubPath): which
// subPaths are bound where, what is made, and kubelet's messages.
func TestPrepareContainerSubPaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts []corev1.VolumeMount
		env    []corev1.EnvVar
		image  bool // volume "img" is an image volume
		// bound: volumeMount index -> the path under the volume the mount
		// shows (resolved)
		bound   map[int]string
		made    []string // directories made, with the volume's mode
		wantErr string   // the ConfigError's message
		detail  string   // in the SubPathError it wraps
		create  bool     // that SubPathError is SafeMakeDir's
	}{
		{name: "no subPath", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}}},
		{name: "existing directory", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "exists"}},
			bound: map[int]string{0: "exists"}},
		{name: "existing file", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/f", SubPath: "file"}},
			bound: map[int]string{0: "file"}},
		{name: "missing: made with the volume's mode", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "new/deeper"}},
			bound: map[int]string{0: "new/deeper"}, made: []string{"new", "new/deeper"}},
		{name: "link inside the volume", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "inside"}},
			bound: map[int]string{0: "exists"}},
		{name: "subPathExpr", env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "data", MountPath: "/logs", SubPathExpr: "logs/$(POD)"}},
			bound:  map[int]string{1: "logs/web"}, made: []string{"logs", "logs/web"}},
		{name: "image volume: the runtime's", image: true, mounts: []corev1.VolumeMount{{Name: "img", MountPath: "/i", SubPath: "etc"}}},
		{name: "absolute", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "/etc"}},
			wantErr: "error SubPath `/etc` must not be an absolute path"},
		{name: "backsteps", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "a/../../etc"}},
			wantErr: "unable to provision SubPath `a/../../etc`: must not contain '..'"},
		{name: "subPathExpr of an unset variable", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPathExpr: "$(NONE)"}},
			wantErr: "missing value for NONE"},
		{name: "missing volume", mounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/d", SubPath: "x"}},
			wantErr: `cannot find volume "nope" to mount into container "c"`},
		{name: "link out of the volume", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "etc/passwd"}},
			wantErr: `failed to prepare subPath for volumeMount "data" of container "c"`, detail: `subpath "/etc/passwd" not within volume path`},
		{name: "link up and out", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "up"}},
			wantErr: `failed to prepare subPath for volumeMount "data" of container "c"`, detail: "not within volume path"},
		{name: "making a directory through a link out", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "etc/cri-prober-test-new"}},
			wantErr: `failed to create subPath directory for volumeMount "data" of container "c"`, detail: "is outside of allowed base", create: true},
		// Stat fails with ENOTDIR, not ENOENT: kubelet's PathExists errs,
		// it makes nothing and the check fails.
		{name: "under a file", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "file/x"}},
			wantErr: `failed to prepare subPath for volumeMount "data" of container "c"`, detail: "not a directory"},
		// Kubelet prepares mount 0 before it finds mount 1 wrong: so here.
		{name: "first prepared, second refused", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/a", SubPath: "exists"}, {Name: "data", MountPath: "/b", SubPath: "/abs"}},
			bound: map[int]string{0: "exists"}, wantErr: "error SubPath `/abs` must not be an absolute path"},
		{name: "first refused, second not prepared", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/a", SubPath: "etc"}, {Name: "data", MountPath: "/b", SubPath: "exists"}},
			wantErr: `failed to prepare subPath for volumeMount "data" of container "c"`, detail: "not within volume path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, fm := newTestManager(t)
			recorded(t, m, "u1")
			pod := testPod("u1", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			ctx := context.Background()
			vols, err := m.SetUp(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			if tc.image {
				vols["img"] = podconfig.Volume{Image: &runtimeapi.ImageSpec{Image: "busybox"}}
			}
			vol := vols["data"].HostPath
			if err := os.MkdirAll(filepath.Join(vol, "exists"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(vol, "file"), "x")
			for name, target := range map[string]string{"etc": "/etc", "inside": "exists", "up": "../.."} {
				if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
					t.Fatal(err)
				}
			}
			pod.Spec.Containers[0].Env = tc.env
			pod.Spec.Containers[0].VolumeMounts = tc.mounts

			in, err := m.PrepareContainer(ctx, containerInput(pod, nil, vols))
			if tc.wantErr != "" {
				var ce *podconfig.ConfigError
				if !errors.As(err, &ce) || ce.Message != tc.wantErr {
					t.Fatalf("error %v, want ConfigError %q", err, tc.wantErr)
				}
				var se *SubPathError
				if isSE := errors.As(err, &se); isSE != (tc.detail != "") {
					t.Errorf("wraps a SubPathError: %v, want %v", isSE, tc.detail != "")
				} else if isSE && (se.Create != tc.create || !strings.Contains(se.Error(), tc.detail)) {
					t.Errorf("SubPathError %+v (%v), want create %v and %q", se, se, tc.create, tc.detail)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if exists("/etc/cri-prober-test-new") {
				os.Remove("/etc/cri-prober-test-new")
				t.Fatal("SafeMakeDir made a directory in /etc through a link")
			}
			if len(in.SubPaths) != len(tc.bound) {
				t.Errorf("subPaths %v, want %d", in.SubPaths, len(tc.bound))
			}
			var binds int
			for _, typ := range fm.table {
				if typ == "bind" {
					binds++
				}
			}
			if binds != len(tc.bound) {
				t.Errorf("%d bind mounts, want %d: %v", binds, len(tc.bound), fm.table)
			}
			for i, rel := range tc.bound {
				target := m.Layout().SubPathBindTarget("u1", "data", "c", i)
				if in.SubPaths[i] != target || fm.table[target] != "bind" {
					t.Errorf("mount %d: subPath %q (mounts %v), want bound at %s", i, in.SubPaths[i], fm.table, target)
				}
				// The target is of the subPath's kind: a directory for a
				// directory, a file for anything else.
				src, _ := os.Stat(filepath.Join(vol, rel))
				if dst, err := os.Lstat(target); err != nil || dst.IsDir() != src.IsDir() {
					t.Errorf("mount %d: target %v %v for a source dir %v", i, dst, err, src.IsDir())
				}
			}
			for _, d := range tc.made {
				if got := mode(t, filepath.Join(vol, d)); got != fs.ModeDir|0o777 {
					t.Errorf("%s: mode %v, want the volume's drwxrwxrwx", d, got)
				}
			}
			if tc.wantErr != "" {
				return
			}
			// What the runtime is handed: kubelet's paths.
			cfg, err := podconfig.Container(in, m.Node())
			if err != nil {
				t.Fatal(err)
			}
			for i, rel := range tc.bound {
				if got, want := cfg.Mounts[i].HostPath, m.Layout().SubPathBindTarget("u1", "data", "c", i); got != want {
					t.Errorf("config mount %d (%s) host path %s, want %s", i, rel, got, want)
				}
			}
		})
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

// The bind mounts for real: what a container does to the path after the
// check does not change what is mounted; a restart keeps the mount;
// TearDown unmounts them all (CleanSubPaths).
func TestPrepareContainerBindsForReal(t *testing.T) {
	requireMount(t)
	m := newRealTestManager(t)
	recorded(t, m, "u1")
	pod := testPod("u1", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	pod.Spec.Containers[0].Name = "app"
	ctx := context.Background()
	vols, err := m.SetUp(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	vol := vols["data"].HostPath
	writeFile(t, filepath.Join(vol, "conf"), "cfg")
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/logs", SubPath: "logs/app"},
		{Name: "data", MountPath: "/etc/app.conf", SubPath: "conf"},
	}
	in, err := m.PrepareContainer(ctx, containerInput(pod, nil, vols))
	if err != nil {
		t.Fatal(err)
	}
	target := m.Layout().SubPathBindTarget("u1", "data", "app", 0)
	if in.SubPaths[0] != target {
		t.Errorf("target %s, want %s", in.SubPaths[0], target)
	}
	// The mount is of the checked directory: a file made there shows.
	writeFile(t, filepath.Join(vol, "logs/app/x"), "through")
	if data, err := os.ReadFile(filepath.Join(target, "x")); err != nil || string(data) != "through" {
		t.Fatalf("bind mount does not show the subPath: %q %v", data, err)
	}
	// A file subPath: bound on a file.
	if data, _ := os.ReadFile(in.SubPaths[1]); string(data) != "cfg" {
		t.Errorf("file subPath reads %q", data)
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
	// And its next start is refused.
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, vols)); err == nil {
		t.Error("a subPath through a link to /etc was bound")
	}
	// Put back: the next start keeps the mount of the same directory.
	if err := os.Remove(filepath.Join(vol, "logs/app")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(vol, "logs/old"), filepath.Join(vol, "logs/app")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PrepareContainer(ctx, containerInput(pod, nil, vols)); err != nil {
		t.Fatal(err)
	}
	if n := countMounts(t, target); n != 1 {
		t.Errorf("the subPath is mounted %d times after a restart", n)
	}

	if err := m.TearDown(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if exists(m.Layout().PodDir("u1")) {
		t.Error("pod dir left")
	}
	if mps, _ := (sysMounter{}).mounts(m.Layout().RootDir); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	var st unix.Stat_t
	if err := unix.Lstat(target, &st); err == nil {
		t.Error("a subPath target left")
	}
}
