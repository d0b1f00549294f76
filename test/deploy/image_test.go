//go:build deploy

package deploy

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageArchive is what an image archive of make image holds.
type imageArchive struct {
	tags       []string
	entrypoint []string
	cmd        []string
	arch       string
	labels     map[string]string
	files      map[string]*tar.Header // by path in the image
	binary     string                 // the agent, taken out of the image
}

// readImageArchive reads an image archive (docker-archive format, as
// mkimage writes it) and takes the agent out of its layer into dir.
func readImageArchive(t *testing.T, path, dir string) imageArchive {
	t.Helper()
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(manifest) != 1 {
		t.Fatalf("%s: %d images, want 1", path, len(manifest))
	}
	var a imageArchive
	a.tags = manifest[0].RepoTags
	tag, err := name.NewTag(a.tags[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	a.entrypoint, a.cmd, a.arch, a.labels = cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Architecture, cfg.Config.Labels
	if cfg.OS != "linux" {
		t.Errorf("os %s", cfg.OS)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	a.files = map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			a.files["/"+strings.TrimSuffix(hdr.Name, "/")] = hdr
			if len(a.entrypoint) > 0 && "/"+hdr.Name == a.entrypoint[0] {
				a.binary = filepath.Join(dir, "cri-prober")
				f, err := os.OpenFile(a.binary, os.O_CREATE|os.O_WRONLY, os.FileMode(hdr.Mode))
				if err != nil {
					t.Fatal(err)
				}
				_, err = io.Copy(f, tr)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		rc.Close()
	}
	return a
}

// Contract (issue 16, item 8): make image writes, without a registry or
// docker, an image archive holding the DaemonSet's tag and the version's,
// the static agent as entrypoint with `run` as command, and the OCI labels
// of its version, revision, source and license. (test/e2e's
// TestImageRunsOnContainerd imports it into containerd and runs it; not
// parallel: make builds bin/cri-prober.)
func TestMakeImage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "image.tar")
	runMake(t, "image", "IMAGE_OUT="+out)
	a := readImageArchive(t, out, dir)

	ds := loadDaemonSet(t)
	image := agentContainer(t, ds).Image
	if !slices.Contains(a.tags, image) {
		t.Errorf("tags %v: the DaemonSet's %s is not among them", a.tags, image)
	}
	if !slices.Equal(a.entrypoint, []string{"/usr/bin/cri-prober"}) || !slices.Equal(a.cmd, []string{"run"}) {
		t.Errorf("entrypoint %v, cmd %v: want [/usr/bin/cri-prober] [run]", a.entrypoint, a.cmd)
	}
	if a.arch != runtime.GOARCH {
		t.Errorf("architecture %s, want %s", a.arch, runtime.GOARCH)
	}
	if a.binary == "" {
		t.Fatalf("no %v in the image; files: %v", a.entrypoint, a.files)
	}
	version := checkBinary(t, a.binary)
	repo, _, _ := strings.Cut(image, ":")
	tag := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version, "-")
	if !slices.Contains(a.tags, repo+":"+tag) {
		t.Errorf("tags %v: want %s:%s, the agent's version", a.tags, repo, tag)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.source":   "https://github.com/cri-prober/cri-prober",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if got := a.labels[k]; got != want {
			t.Errorf("label %s=%q, want %q", k, got, want)
		}
	}
	if a.labels["org.opencontainers.image.revision"] == "" {
		t.Error("no label org.opencontainers.image.revision")
	}
	if license := string(readFile(t, "LICENSE")); !strings.Contains(license, "Apache License") || !strings.Contains(license, "Version 2.0") {
		t.Error("LICENSE is not the Apache License 2.0 that the image's label says")
	}
	// The static agent on an empty base: nothing else to execute.
	for path, hdr := range a.files {
		if hdr.Typeflag == tar.TypeReg && hdr.Mode&0o111 != 0 && path != a.entrypoint[0] {
			t.Errorf("%s is executable in the image: only the agent should be", path)
		}
	}
}
