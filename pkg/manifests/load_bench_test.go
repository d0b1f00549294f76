package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cri-prober/cri-prober/test/inputs"
)

// manifestDir writes a directory of n manifest files (and a few that are
// not manifests) for the reload benchmarks.
func manifestDir(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	data, err := os.ReadFile("../spec/testdata/good/pods.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		// Three pods, named after the file: no pod is defined twice.
		doc := strings.NewReplacer("name: web", fmt.Sprintf("name: web-%d", i), "name: worker", fmt.Sprintf("name: worker-%d", i)).
			Replace(inputs.WebPod(3) + "---\n" + string(data))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("pod%03d.yaml", i)), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"README.md", "notes.txt", "LICENSE"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("text\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkLoadManifest is one file of three pods, as a reload reads it.
func BenchmarkLoadManifest(b *testing.B) {
	data, err := os.ReadFile("../spec/testdata/good/pods.yaml")
	if err != nil {
		b.Fatal(err)
	}
	data = append([]byte(inputs.WebPod(3)+"---\n"), data...)
	b.ReportAllocs()
	for b.Loop() {
		pods, errs := loadPods("pods.yaml", data)
		if len(pods) != 3 || len(errs) != 0 {
			b.Fatal(pods, errs)
		}
	}
}

// BenchmarkReloadUnchanged is a tick of the directory's poll when nothing
// changed.
func BenchmarkReloadUnchanged(b *testing.B) {
	d := NewDir(manifestDir(b, 50), nil)
	if !d.Reload() {
		b.Fatal("no first load")
	}
	b.ReportAllocs()
	for b.Loop() {
		if d.Reload() {
			b.Fatal("reloaded")
		}
	}
}

// BenchmarkReloadChanged is a reload of every file of the directory.
func BenchmarkReloadChanged(b *testing.B) {
	d := NewDir(manifestDir(b, 50), nil)
	b.ReportAllocs()
	for b.Loop() {
		d.fingerprint = ""
		if !d.Reload() {
			b.Fatal("not reloaded")
		}
	}
}
