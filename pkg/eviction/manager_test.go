package eviction

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeRuntime answers ListContainerStats and ImageFsInfo from its fields.
type fakeRuntime struct {
	writable   map[string]uint64
	mountpoint string
	statsErr   error
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	var out []*runtimeapi.ContainerStats
	for id, b := range f.writable {
		out = append(out, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: id},
			WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: &runtimeapi.UInt64Value{Value: b}}})
	}
	return out, f.statsErr
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.mountpoint == "" {
		return &runtimeapi.ImageFsInfoResponse{}, nil
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.mountpoint}}}}, nil
}

type fixedView struct{ v *pods.View }

func (f fixedView) View() *pods.View { return f.v }

type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Record(e events.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }

func (r *recorder) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.events {
		s = append(s, e.Reason+": "+e.Message)
	}
	return s
}

// staticView is the view of one running static pod made of obj, its
// container app running as instance "app-1".
func staticView(obj *corev1.Pod, uid string) *pods.View {
	m := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web-node", UID: uid, RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}, Object: obj}
	sb := &cri.Sandbox{ID: "sb1", Namespace: "ns", Name: "web-node", UID: uid, State: cri.SandboxReady, CreatedAt: t0,
		Annotations: map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: uid}}
	c := &cri.Container{ID: "app-1", SandboxID: "sb1", Name: "app", State: cri.StateRunning, CreatedAt: t0}
	return pods.Resolve(cri.NewSnapshot(t0, []*cri.Sandbox{sb}, []*cri.Container{c}), pods.Inputs{StaticPods: []*spec.Pod{m}})
}

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644))
}

// Enforced: a static pod whose emptyDir passes its sizeLimit is evicted
// as kubelet evicts a pod that is not critical (its Evicted event,
// kubelet_evictions{eviction_signal="emptydirfs.limit"}, the resolver
// told); it is evicted once, and forgotten with its pod. The volume is
// measured at most once a minute (kubelet's volumeStatsAggPeriod cache).
func TestEvictsAnEmptyDirPastItsSizeLimit(t *testing.T) {
	const uid = "u1"
	obj := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: quantity("1Mi")}}}},
		Containers: []corev1.Container{{Name: "app"}},
	}}
	layout := podconfig.Layout{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	vol := layout.VolumeDir(types.UID(uid), podconfig.PluginEmptyDir, "scratch")
	writeFile(t, filepath.Join(vol, "a"), 512<<10)
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	view := fixedView{staticView(obj, uid)}
	clk := clocktesting.NewFakeClock(t0)
	m := New(&fakeRuntime{}, view, layout, Config{LocalStorageLimits: spec.LocalStorageEnforce},
		WithRecorder(rec), WithRegisterer(reg), WithClock(clk))

	m.Synchronize(t.Context())
	assert.Empty(t, m.Evicted(), "within its limit")
	families, err := reg.Gather()
	require.NoError(t, err)
	assert.Empty(t, families, "as kubelet's: no series before the first eviction")

	writeFile(t, filepath.Join(vol, "sub", "b"), 2<<20)
	clk.Step(30 * time.Second)
	assert.Empty(t, m.Synchronize(t.Context()))
	assert.Empty(t, m.Evicted(), "the volume's usage as measured less than a minute ago")
	clk.Step(30 * time.Second)
	evicted := m.Synchronize(t.Context())
	msg := `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `
	assert.Equal(t, map[string]string{uid: msg}, m.Evicted())
	if assert.Len(t, evicted, 1) {
		assert.Equal(t, uid, evicted[0].UID)
	}
	families, err = reg.Gather()
	require.NoError(t, err)
	if assert.Len(t, families, 1) {
		assert.Equal(t, "[ALPHA] Cumulative number of pod evictions by eviction signal", families[0].GetHelp(), "kubelet's HELP text")
	}
	select {
	case <-m.Changed():
	default:
		t.Fatal("the resolver is not told")
	}
	assert.Equal(t, []string{"Evicted: " + msg}, rec.reasons())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.evictions.WithLabelValues("emptydirfs.limit")))

	m.Synchronize(t.Context())
	assert.Len(t, rec.reasons(), 1, "evicted once")
	assert.Equal(t, uint64(1), m.Evictions(), "what the state API reports")

	m.viewer = fixedView{pods.Resolve(nil, pods.Inputs{})}
	m.Synchronize(t.Context())
	assert.Empty(t, m.Evicted(), "forgotten with its pod")
}

// Enforced: a container whose writable layer and logs pass its limit is
// evicted with kubelet's message: the pod's total trips first when it is
// the only container with a limit, as under kubelet.
func TestEvictsAContainerPastItsLimit(t *testing.T) {
	const uid = "u2"
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: storageLimit("1Mi")}}}}
	layout := podconfig.Layout{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	rt := &fakeRuntime{writable: map[string]uint64{"app-1": 512 << 10}}
	rec := &recorder{}
	m := New(rt, fixedView{staticView(obj, uid)}, layout, Config{LocalStorageLimits: spec.LocalStorageEnforce}, WithRecorder(rec))
	m.Synchronize(t.Context())
	assert.Empty(t, m.Evicted())

	writeFile(t, filepath.Join(layout.ContainerLogsDirectory("ns", "web-node", uid, "app"), "0.log"), 1<<20)
	m.Synchronize(t.Context())
	assert.Equal(t, map[string]string{uid: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "}, m.Evicted())
}

// By default (kubelet's outcome for a static pod), nothing is measured
// and nothing evicted; a pod others made is never evicted.
func TestIgnoredByDefault(t *testing.T) {
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: storageLimit("1Mi")}}}}
	rt := &fakeRuntime{writable: map[string]uint64{"app-1": 10 << 20}, statsErr: errors.New("not asked")}
	m := New(rt, fixedView{staticView(obj, "u3")}, podconfig.Layout{RootDir: t.TempDir()}, Config{})
	m.Synchronize(t.Context())
	assert.Empty(t, m.Evicted())
	assert.Zero(t, m.Evictions())
	assert.False(t, m.Enforced())
}

type fakeGC struct{ containers, images int }

func (f *fakeGC) DeleteAllUnusedContainers(context.Context) error { f.containers++; return nil }
func (f *fakeGC) DeleteUnusedImages(context.Context) (int64, error) {
	f.images++
	return 0, nil
}

// Node disk pressure: kubelet's EvictionThresholdMet event, container and
// image GC run first, the DiskPressure condition and its events; no pod
// is evicted for it.
func TestDiskPressure(t *testing.T) {
	root := t.TempDir()
	free := int64(50)
	fs := func(path string) (FsStats, uint64, error) {
		return FsStats{AvailableBytes: free, CapacityBytes: 100, InodesFree: 100, Inodes: 100}, 1, nil
	}
	th, err := ParseThresholds(map[string]string{"nodefs.available": "10%", "imagefs.available": "15%"})
	require.NoError(t, err)
	rec, gc := &recorder{}, &fakeGC{}
	clk := clocktesting.NewFakeClock(t0)
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	m := New(&fakeRuntime{mountpoint: "/var/lib/containerd"}, fixedView{staticView(obj, "u4")}, podconfig.Layout{RootDir: root},
		Config{EvictionHard: th, NodeName: "node1", PressureTransitionPeriod: time.Minute},
		WithRecorder(rec), WithStatfs(fs), WithGarbageCollectors(gc, gc), WithClock(clk))

	m.Synchronize(t.Context())
	active, _ := m.DiskPressure()
	assert.False(t, active)
	assert.Empty(t, rec.reasons())

	free = 12
	m.Synchronize(t.Context())
	active, since := m.DiskPressure()
	assert.True(t, active)
	assert.Equal(t, t0, since)
	assert.Equal(t, []string{"NodeHasDiskPressure: Node node1 status is now: NodeHasDiskPressure", "EvictionThresholdMet: Attempting to reclaim ephemeral-storage"}, rec.reasons())
	assert.Equal(t, fakeGC{containers: 1, images: 1}, *gc, "the images on nodefs: both collected")
	assert.Empty(t, m.Evicted(), "static pods are not evicted for node pressure")

	free = 50
	clk.Step(30 * time.Second)
	m.Synchronize(t.Context())
	active, _ = m.DiskPressure()
	assert.True(t, active, "within the transition period")
	clk.Step(time.Minute)
	m.Synchronize(t.Context())
	active, _ = m.DiskPressure()
	assert.False(t, active)
	assert.Contains(t, rec.reasons(), "NodeHasNoDiskPressure: Node node1 status is now: NodeHasNoDiskPressure")
	assert.Equal(t, fakeGC{containers: 1, images: 1}, *gc)
}

// A walk counts blocks as du does, each inode once, never follows a link
// and stays on the volume's filesystem; it is bounded.
func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "big"), 4<<20)
	writeFile(t, filepath.Join(dir, "a"), 1<<20)
	require.NoError(t, os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "a-again")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "big"), filepath.Join(dir, "filelink")))
	used, err := diskUsage(dir, maxWalkEntries)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, used, int64(1<<20))
	assert.Less(t, used, int64(2<<20), "the hard link once, the links not followed")

	_, err = diskUsage(dir, 2)
	assert.ErrorIs(t, err, errTooManyEntries)
	used, err = diskUsage(filepath.Join(dir, "missing"), maxWalkEntries)
	assert.NoError(t, err)
	assert.Zero(t, used)
	used, err = diskUsage(filepath.Join(dir, "link"), maxWalkEntries)
	assert.NoError(t, err)
	assert.Less(t, used, int64(4<<20), "a volume directory replaced by a link is not followed")
}

// kubelet's synchronize order: local storage limits first; a round that
// evicts a pod ends there, with no EvictionThresholdMet and no node-level
// reclaim, which the next round does.
func TestLocalStorageEvictionComesBeforeNodeReclaim(t *testing.T) {
	const uid = "u5"
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: storageLimit("1Mi")}}}}
	layout := podconfig.Layout{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	fs := func(string) (FsStats, uint64, error) {
		return FsStats{AvailableBytes: 5, CapacityBytes: 100, InodesFree: 100, Inodes: 100}, 1, nil
	}
	th, err := ParseThresholds(map[string]string{"nodefs.available": "10%"})
	require.NoError(t, err)
	rec, gc := &recorder{}, &fakeGC{}
	m := New(&fakeRuntime{writable: map[string]uint64{"app-1": 2 << 20}}, fixedView{staticView(obj, uid)}, layout,
		Config{LocalStorageLimits: spec.LocalStorageEnforce, EvictionHard: th, NodeName: "node1"},
		WithRecorder(rec), WithStatfs(fs), WithGarbageCollectors(gc, gc), WithClock(clocktesting.NewFakeClock(t0)))

	assert.Len(t, m.Synchronize(t.Context()), 1)
	active, _ := m.DiskPressure()
	assert.True(t, active, "the condition is kept before the pods are looked at")
	assert.Equal(t, []string{"NodeHasDiskPressure: Node node1 status is now: NodeHasDiskPressure",
		"Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "}, rec.reasons())
	assert.Equal(t, fakeGC{}, *gc, "no node-level reclaim in a round that evicted")

	assert.Empty(t, m.Synchronize(t.Context()))
	assert.Contains(t, rec.reasons(), "EvictionThresholdMet: Attempting to reclaim ephemeral-storage")
	assert.Equal(t, fakeGC{containers: 1, images: 1}, *gc)
}

// kubelet's PodIsFinished over the view: an evicted pod is cleaned up
// once nothing of it runs, or once it is gone.
func TestCleanedUp(t *testing.T) {
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	running := staticView(obj, "u6")
	p, ok := running.Pod("u6")
	require.True(t, ok)
	evicted := []*pods.Pod{p}
	assert.False(t, CleanedUp(running, evicted), "its container runs")
	assert.True(t, CleanedUp(pods.Resolve(nil, pods.Inputs{}), evicted), "gone")

	m := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web-node", UID: "u6", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}, Object: obj}
	sb := &cri.Sandbox{ID: "sb1", Namespace: "ns", Name: "web-node", UID: "u6", State: cri.SandboxNotReady, CreatedAt: t0,
		Annotations: map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: "u6"}}
	c := &cri.Container{ID: "app-1", SandboxID: "sb1", Name: "app", State: cri.StateExited, CreatedAt: t0}
	stopped := pods.Resolve(cri.NewSnapshot(t0, []*cri.Sandbox{sb}, []*cri.Container{c}), pods.Inputs{StaticPods: []*spec.Pod{m}})
	assert.True(t, CleanedUp(stopped, evicted), "its container and sandbox stopped")
}

// switchView is a view a test changes while the manager runs.
type switchView struct {
	mu sync.Mutex
	v  *pods.View
}

func (s *switchView) View() *pods.View { s.mu.Lock(); defer s.mu.Unlock(); return s.v }
func (s *switchView) set(v *pods.View) { s.mu.Lock(); s.v = v; s.mu.Unlock() }

// After an eviction the loop waits for the pod to be cleaned up, looking
// every second, before it synchronizes again.
func TestWaitForPodsCleanup(t *testing.T) {
	obj := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	view := &switchView{v: staticView(obj, "u7")}
	p, _ := view.View().Pod("u7")
	clk := clocktesting.NewFakeClock(t0)
	m := New(&fakeRuntime{}, view, podconfig.Layout{RootDir: t.TempDir()}, Config{}, WithClock(clk))
	done := make(chan struct{})
	go func() { defer close(done); m.waitForPodsCleanup(t.Context(), []*pods.Pod{p}) }()

	require.Eventually(t, func() bool { return clk.Waiters() == 2 }, 10*time.Second, time.Millisecond, "its timer and ticker")
	clk.Step(podCleanupPollFreq)
	select {
	case <-done:
		t.Fatal("returned while the pod runs")
	default:
	}
	view.set(pods.Resolve(nil, pods.Inputs{}))
	clk.Step(podCleanupPollFreq)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting once the pod is gone")
	}

	view.set(staticView(obj, "u7"))
	before := clk.Waiters() // a fake ticker stays a waiter once stopped
	timedOut := make(chan struct{})
	go func() { defer close(timedOut); m.waitForPodsCleanup(t.Context(), []*pods.Pod{p}) }()
	require.Eventually(t, func() bool { return clk.Waiters() == before+2 }, 10*time.Second, time.Millisecond, "its timer and ticker")
	clk.Step(podCleanupTimeout)
	select {
	case <-timedOut:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting past the timeout")
	}
}
