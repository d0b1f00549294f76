package spec

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ManifestDir keeps the pods of a manifest directory up to date: it looks
// at the files' names, sizes and modification times every interval and
// reloads when anything changed. Polling needs nothing from the kernel and
// catches edits through any path (editors that rename, bind mounts,
// ConfigMap-style symlink swaps).
type ManifestDir struct {
	dir     string
	clock   clock.Clock
	changed chan struct{}

	mu          sync.Mutex
	fingerprint string
	pods        []*Pod
	errs        []*Error
}

// NewManifestDir returns a watcher of dir; call Reload or Run to read it.
func NewManifestDir(dir string, clk clock.Clock) *ManifestDir {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &ManifestDir{dir: dir, clock: clk, changed: make(chan struct{}, 1)}
}

// Pods returns the valid pods and the problems found at the last reload.
func (d *ManifestDir) Pods() ([]*Pod, []*Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods, d.errs
}

// Changed is signalled after a reload that found something different.
func (d *ManifestDir) Changed() <-chan struct{} { return d.changed }

// Reload reads the directory if any file changed and reports whether it
// did.
func (d *ManifestDir) Reload() bool {
	fp := fingerprint(d.dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if fp == d.fingerprint && d.fingerprint != "" {
		return false
	}
	d.fingerprint = fp
	d.pods, d.errs = LoadDir(d.dir)
	select {
	case d.changed <- struct{}{}:
	default:
	}
	return true
}

// Run reloads every interval until ctx is done.
func (d *ManifestDir) Run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx).WithValues("dir", d.dir)
	for {
		if d.Reload() {
			pods, errs := d.Pods()
			logger.Info("Loaded pod manifests", "pods", len(pods), "problems", len(errs))
		}
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(interval):
		}
	}
}

// fingerprint summarises the directory's files; an unreadable directory
// has its error as fingerprint, so that it is reported once and reloaded
// when it becomes readable.
func fingerprint(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, e := range entries {
		// Stat follows symlinks: a swapped target is a change.
		fi, err := os.Stat(dir + "/" + e.Name())
		if err != nil {
			fmt.Fprintf(&b, "%s:error;", e.Name())
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return "ok:" + b.String()
}
