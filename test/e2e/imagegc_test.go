//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/imagegc"
)

// smallContainerd is a containerd of its own whose root (its images) is a
// tmpfs of size, started with hack/containerd-up.sh and stopped (by its
// PID file) and removed with hack/containerd-down.sh when the test ends,
// however it ends. Its pods must use the host's network.
type smallContainerd struct {
	dir, socket string
	env         []string
}

func startSmallContainerd(t *testing.T, size string) *smallContainerd {
	t.Helper()
	up := os.Getenv("CRI_PROBER_E2E_CONTAINERD_UP")
	require.NotEmpty(t, up, "CRI_PROBER_E2E_CONTAINERD_UP: run through make test-e2e")
	// A short path: the socket's must fit 108 bytes.
	dir, err := os.MkdirTemp("/var/tmp", "cpgc")
	require.NoError(t, err)
	s := &smallContainerd{dir: dir, socket: filepath.Join(dir, "containerd.sock")}
	// No pod of it has a network of its own: a bridge name and a subnet
	// (TEST-NET-1) no other containerd's cleanup mistakes for its own.
	s.env = append(os.Environ(), "CRI_PROBER_DIR="+dir, "CONTAINERD_ROOT_SIZE="+size,
		fmt.Sprintf("CNI_BRIDGE=cpgc%d", os.Getpid()%100000), "CNI_SUBNET=192.0.2.0/24")
	t.Cleanup(func() {
		down := exec.Command(filepath.Join(filepath.Dir(up), "containerd-down.sh"))
		down.Env = s.env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("containerd-down.sh: %v: %s", err, out)
		}
		os.RemoveAll(dir)
	})
	cmd := exec.Command(up, "--daemon-only")
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "containerd-up.sh: %s", out)
	return s
}

// importImage imports an image archive into the k8s.io namespace.
func (s *smallContainerd) importImage(t *testing.T, archive string) {
	t.Helper()
	out, err := exec.Command("ctr", "-a", s.socket, "-n", "k8s.io", "images", "import", archive).CombinedOutput()
	require.NoError(t, err, "import %s: %s", archive, out)
}

// usagePercent is the root's usage as kubelet computes it.
func (s *smallContainerd) usagePercent(t *testing.T) int {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(filepath.Join(s.dir, "root"), &st))
	return 100 - int(st.Bavail*100/st.Blocks)
}

// dataImages builds image archives of size random bytes each (one file,
// nothing to run), named localhost/gc-<name>:test.
func dataImages(t *testing.T, dir string, size int, names ...string) map[string]string {
	t.Helper()
	// hack/images.sh built it beside the e2e containerd's images.
	mkimage := filepath.Join(filepath.Dir(os.Getenv("CRI_PROBER_E2E_CONTAINERD_PIDFILE")), "bin", "mkimage")
	if _, err := os.Stat(mkimage); err != nil {
		mkimage = filepath.Join(dir, "mkimage")
		out, err := exec.Command("go", "build", "-o", mkimage, "../../hack/tools/mkimage").CombinedOutput()
		require.NoError(t, err, "build mkimage: %s", out)
	}
	archives := map[string]string{}
	for _, name := range names {
		data := filepath.Join(dir, name+".data")
		buf := make([]byte, size)
		_, _ = rand.Read(buf) // random: the layer does not compress
		require.NoError(t, os.WriteFile(data, buf, 0o644))
		archives[name] = filepath.Join(dir, name+".tar")
		out, err := exec.Command(mkimage, "-o", archives[name], "-name", "localhost/gc-"+name+":test", "-file", data+"=/data").CombinedOutput()
		require.NoError(t, err, "mkimage %s: %s", name, out)
	}
	return archives
}

// Contract (issue 29, item 4; kubelet's image_gc_manager.go): with the
// agent keeping the node (static pods), when the image filesystem is used
// at or above --image-gc-high-threshold, unused images are removed least
// recently used first (never used: the first detected first) down to
// --image-gc-low-threshold; the image in use and the sandbox image
// (containerd 1.6 does not pin it) are kept; kubelet_image_garbage_
// collected_total{reason="space"} counts them. When what is left cannot
// be removed (in use, pinned) and other data fills the disk,
// FreeDiskSpaceFailed with kubelet's text, then ImageGCFailed at the
// second failure in a row.
func TestImageGarbageCollectionOnASmallImageFilesystem(t *testing.T) {
	parallel(t) // its own containerd, its pod on the host's network
	images := filepath.Join(filepath.Dir(os.Getenv("CRI_PROBER_E2E_CONTAINERD_PIDFILE")), "images")
	work := t.TempDir()
	archives := dataImages(t, work, 4<<20, "c", "a", "b", "d")
	s := startSmallContainerd(t, "64m")
	s.importImage(t, filepath.Join(images, "pause.tar"))
	s.importImage(t, filepath.Join(images, "busybox.tar"))

	var lists atomic.Int64 // ListImages calls: one per collection
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/ListImages") {
			lists.Add(1)
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	c, err := cri.Dial(t.Context(), "unix://"+s.socket, cri.WithUnaryInterceptor(count))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// A whole collection after now: two more lists.
	collected := func(what string) {
		t.Helper()
		since := lists.Load()
		eventually(t, 30*time.Second, what, func() bool { return lists.Load() >= since+2 })
	}

	reg := prometheus.NewRegistry()
	o := startOwnerWith(t, c, func(cfg *engine.Config) {
		cfg.ImageGC = &imagegc.Config{HighThresholdPercent: 50, LowThresholdPercent: 40, Period: 2 * time.Second}
		cfg.AgentRegistry = reg
	})
	o.write(t, "app.yaml", `apiVersion: v1
kind: Pod
metadata: {name: gc, namespace: `+testNamespace+`}
spec:
  hostNetwork: true
  containers:
  - {name: app, image: `+busyboxImage+`, imagePullPolicy: Never, command: [sleep, "3600"]}
`)
	o.running(t, "gc", "app")

	// Detected one at a time, in this order (not their names'), below the
	// high threshold.
	order := []string{"c", "a", "b", "d"}
	for _, name := range order[:3] {
		s.importImage(t, archives[name])
		collected("the image " + name + " detected")
	}
	require.Less(t, s.usagePercent(t), 50, "below the high threshold before the last image")
	require.Empty(t, removed(t, c, order[:3]), "nothing removed below the high threshold")

	s.importImage(t, archives["d"])
	t.Logf("usage with every image: %d%%", s.usagePercent(t))
	eventually(t, 30*time.Second, "images removed", func() bool { return len(removed(t, c, order)) > 0 })
	collected("the collection done")
	gone := removed(t, c, order)
	k := len(gone)
	assert.Equal(t, order[:k], gone, "removed least recently detected first")
	assert.GreaterOrEqual(t, k, 2, "more than one image removed")
	// containerd removes an image's content and snapshots a moment after
	// RemoveImage (its own garbage collection).
	eventually(t, 30*time.Second, "down to the low threshold", func() bool { return s.usagePercent(t) <= 40 })
	for _, kept := range []string{busyboxImage, "localhost/pause:test"} {
		st, err := c.ImageStatus(t.Context(), kept, false)
		require.NoError(t, err)
		assert.NotNil(t, st.GetImage(), "%s kept", kept)
	}
	assert.Equal(t, float64(k), counterValue(t, reg, "kubelet_image_garbage_collected_total", "space"))
	assert.Empty(t, o.events.matching("", "", imagegc.ReasonFreeDiskSpaceFailed, ""))

	// Other data fills the disk to 80%: what is left is in use or pinned.
	ballast := filepath.Join(s.dir, "root", "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, (80-s.usagePercent(t))*(64<<20)/100), 0o600))
	o.waitEvent(t, "", "", imagegc.ReasonFreeDiskSpaceFailed, "Insufficient free disk space on the node's image filesystem (", time.Minute)
	ev := o.waitEvent(t, "", "", imagegc.ReasonImageGCFailed, "Failed to free sufficient space by deleting unused images", time.Minute)
	assert.Contains(t, ev.Message, "of 64.0 MiB used)")
	for _, kept := range []string{busyboxImage, "localhost/pause:test"} {
		st, err := c.ImageStatus(t.Context(), kept, false)
		require.NoError(t, err)
		assert.NotNil(t, st.GetImage(), "%s kept", kept)
	}
	require.NoError(t, os.Remove(ballast))
}

// removed lists the gc-<name> images no longer on the node, in order.
func removed(t *testing.T, c *cri.Client, names []string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		st, err := c.ImageStatus(t.Context(), "localhost/gc-"+name+":test", false)
		require.NoError(t, err)
		if st.GetImage() == nil {
			out = append(out, name)
		}
	}
	return out
}

// counterValue reads a counter with one label's value from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%q}", name, label)
	return 0
}
