package imagegc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/imagegc"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// node is a fake runtime whose image filesystem holds its images and
// other bytes, with the collector's clock, events and series.
type node struct {
	rt     *fakeruntime.Runtime
	client *cri.Client
	clock  *clocktesting.FakeClock
	events *events.Ring
	reg    *prometheus.Registry
	// capacity of the image filesystem, and what else it holds.
	capacity, other int64
}

func newNode(t *testing.T, capacity, other int64) *node {
	t.Helper()
	n := &node{rt: fakeruntime.NewForTest(t), clock: clocktesting.NewFakeClock(start), events: events.NewRing(16),
		reg: prometheus.NewRegistry(), capacity: capacity, other: other}
	var err error
	n.client, err = cri.Dial(t.Context(), n.rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { n.client.Close() })
	n.rt.SetImageFs("/images")
	n.rt.SetSandboxImage("localhost/pause:test")
	return n
}

// statfs is the filesystem: its capacity, less its images and the rest.
func (n *node) statfs(path string) (int64, int64, error) {
	if path != "/images" {
		return 0, 0, errors.New("no such path")
	}
	fs, err := n.client.ImageFsInfo(context.Background())
	if err != nil {
		return 0, 0, err
	}
	used := int64(fs.GetImageFilesystems()[0].GetUsedBytes().GetValue())
	return n.capacity, n.capacity - used - n.other, nil
}

func (n *node) manager(t *testing.T, cfg imagegc.Config) *imagegc.Manager {
	t.Helper()
	m, err := imagegc.New(n.client, cfg, imagegc.WithClock(n.clock), imagegc.WithRecorder(n.events),
		imagegc.WithRegisterer(n.reg), imagegc.WithStatfs(n.statfs))
	require.NoError(t, err)
	return m
}

// use runs a container of image (by ID, as the agent's pods name it).
func (n *node) use(image string, state runtimeapi.ContainerState) string {
	sb := n.rt.AddSandbox("default", "p-"+image[len(image)-4:], "uid-"+image)
	return n.rt.AddContainer(sb, "c", state, fakeruntime.WithImage(image))
}

func (n *node) reasons() []string {
	var out []string
	for _, e := range n.events.Since(time.Time{}) {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// collected reads kubelet_image_garbage_collected_total{reason}: 0 when
// it has no such series (kubelet's: none before the first removal).
func (n *node) collected(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := n.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "kubelet_image_garbage_collected_total" {
			continue
		}
		assert.Equal(t, "[ALPHA] Total number of images garbage collected by the kubelet, whether through disk usage or image age.", f.GetHelp(),
			"kubelet's HELP text")
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// seriesOf counts the series of a family in the registry.
func (n *node) seriesOf(t *testing.T, name string) int {
	t.Helper()
	families, err := n.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// Over the high threshold the collector removes unused images, least
// recently used first, down to the low threshold; the image in use (a
// stopped container's too), the pinned one and the runtime's sandbox
// image are kept; each removal is counted by reason (kubelet's
// TestGarbageCollectBelowSuccess, TestFreeSpaceRemoveByLeastRecentlyUsed).
func TestGarbageCollectFreesDownToTheLowThreshold(t *testing.T) {
	n := newNode(t, 1000, 100)
	pause := n.rt.AddImage("localhost/pause:test", fakeruntime.WithImageSize(50))
	pinned := n.rt.AddImage("localhost/pinned:1", fakeruntime.WithImageSize(50), fakeruntime.Pinned())
	inUse := n.rt.AddImage("localhost/app:1", fakeruntime.WithImageSize(100))
	stopped := n.rt.AddImage("localhost/job:1", fakeruntime.WithImageSize(100))
	lru := n.rt.AddImage("localhost/old:1", fakeruntime.WithImageSize(200))
	recent := n.rt.AddImage("localhost/old:2", fakeruntime.WithImageSize(200))
	never := n.rt.AddImage("localhost/old:3", fakeruntime.WithImageSize(100))
	n.use(inUse, runtimeapi.ContainerState_CONTAINER_RUNNING)
	n.use(stopped, runtimeapi.ContainerState_CONTAINER_EXITED)
	// old:1 and old:2 were in use, old:1 before old:2.
	c1 := n.use(lru, runtimeapi.ContainerState_CONTAINER_RUNNING)
	c2 := n.use(recent, runtimeapi.ContainerState_CONTAINER_RUNNING)
	m := n.manager(t, imagegc.Config{HighThresholdPercent: 85, LowThresholdPercent: 60, MinAge: 2 * time.Minute})
	ctx := t.Context()

	// 90% used (800 of images, 100 else): but every image is young.
	require.Error(t, m.GarbageCollect(ctx, start), "at first everything is younger than the minimum age: nothing freed")
	assert.Zero(t, n.seriesOf(t, "kubelet_image_garbage_collected_total"), "as kubelet's: no series before the first removal")
	n.clock.Step(time.Minute)
	n.rt.DeleteContainer(c1)
	require.Error(t, m.GarbageCollect(ctx, start), "old:1 is unused but young: nothing freed")
	assert.Equal(t, 0.0, n.collected(t, imagegc.RemovedForSpace))
	n.clock.Step(time.Minute)
	n.rt.DeleteContainer(c2)
	n.clock.Step(2 * time.Minute)

	// Down to 60%: 300 bytes to free: old:3 (never used, 100), old:1 (200).
	require.NoError(t, m.GarbageCollect(ctx, start))
	assert.False(t, n.rt.HasImage(never))
	assert.False(t, n.rt.HasImage(lru))
	for _, kept := range []string{pause, pinned, inUse, stopped, recent} {
		assert.True(t, n.rt.HasImage(kept), kept)
	}
	assert.Equal(t, 2.0, n.collected(t, imagegc.RemovedForSpace))
	assert.Equal(t, 0.0, n.collected(t, imagegc.RemovedForAge))
	age, space := m.Removed()
	assert.Equal(t, []uint64{0, 2}, []uint64{age, space}, "what the state API reports")
	usage, err := m.ImageFs(ctx)
	require.NoError(t, err)
	assert.Equal(t, imagegc.Usage{Mountpoint: "/images", Used: 500, Capacity: 1000, Available: 400}, usage)
	last, ok := m.LastImageFs()
	require.True(t, ok)
	assert.Equal(t, imagegc.Measured{Usage: usage, At: n.clock.Now()}, last, "the last measurement, for the state API")
}

// Kubelet's TestGarbageCollectNotEnoughFreed: when removing every image
// it may does not reach the low threshold, FreeDiskSpaceFailed with
// kubelet's text; the loop tells ImageGCFailed from the second failure in
// a row, as kubelet's StartGarbageCollection.
func TestFreeDiskSpaceFailedAndImageGCFailed(t *testing.T) {
	n := newNode(t, 10<<30, 9<<30)
	n.rt.AddImage("localhost/pause:test", fakeruntime.WithImageSize(100<<20))
	app := n.rt.AddImage("localhost/app:1", fakeruntime.WithImageSize(400<<20))
	n.use(app, runtimeapi.ContainerState_CONTAINER_RUNNING)
	m := n.manager(t, imagegc.Config{HighThresholdPercent: 90, LowThresholdPercent: 80, Period: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	want := "FreeDiskSpaceFailed: Insufficient free disk space on the node's image filesystem (95% of 10.0 GiB used). " +
		"Failed to free sufficient space by deleting unused images (freed 0 bytes). " +
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data."
	require.Eventually(t, func() bool { return len(n.reasons()) == 1 && n.clock.HasWaiters() }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{want}, n.reasons(), "one failure: no ImageGCFailed yet")
	n.clock.Step(time.Minute)
	require.Eventually(t, func() bool { return len(n.reasons()) == 3 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{want, want, "ImageGCFailed: " + strings.TrimPrefix(want, "FreeDiskSpaceFailed: ")}, n.reasons())
}

// Kubelet's TestDeleteUnusedImages*: every unused, unpinned image old
// enough goes, whatever the usage; the bytes freed are returned.
func TestDeleteUnusedImages(t *testing.T) {
	n := newNode(t, 1000, 0)
	pause := n.rt.AddImage("localhost/pause:test", fakeruntime.WithImageSize(10))
	i0 := n.rt.AddImage("localhost/i:0", fakeruntime.WithImageSize(1024))
	i1 := n.rt.AddImage("localhost/i:1", fakeruntime.WithImageSize(2048))
	i2 := n.rt.AddImage("localhost/i:2", fakeruntime.WithImageSize(2048))
	n.use(i2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	m := n.manager(t, imagegc.Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 3 * time.Second})

	freed, err := m.DeleteUnusedImages(t.Context())
	require.NoError(t, err)
	assert.Zero(t, freed, "not old enough")
	n.clock.Step(3 * time.Second)
	freed, err = m.DeleteUnusedImages(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(1024+2048), freed)
	assert.False(t, n.rt.HasImage(i0))
	assert.False(t, n.rt.HasImage(i1))
	assert.True(t, n.rt.HasImage(i2))
	assert.True(t, n.rt.HasImage(pause), "the sandbox image")
}

// The maximum age removes an image unused for longer, whatever the usage,
// once it has passed since collection began (kubelet's
// TestGarbageCollectImageTooOld).
func TestGarbageCollectMaxAge(t *testing.T) {
	n := newNode(t, 1000, 0)
	old := n.rt.AddImage("localhost/old:1", fakeruntime.WithImageSize(10))
	app := n.rt.AddImage("localhost/app:1", fakeruntime.WithImageSize(10))
	n.use(app, runtimeapi.ContainerState_CONTAINER_RUNNING)
	m := n.manager(t, imagegc.Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: time.Minute})
	require.NoError(t, m.GarbageCollect(t.Context(), start))
	n.clock.Step(time.Minute)
	require.NoError(t, m.GarbageCollect(t.Context(), start))
	assert.True(t, n.rt.HasImage(old), "not unused for longer than a minute since collection began")
	n.clock.Step(time.Second)
	require.NoError(t, m.GarbageCollect(t.Context(), start))
	assert.False(t, n.rt.HasImage(old))
	assert.True(t, n.rt.HasImage(app))
	assert.Equal(t, 1.0, n.collected(t, imagegc.RemovedForAge))
	age, space := m.Removed()
	assert.Equal(t, []uint64{1, 0}, []uint64{age, space})
}

// An image filesystem without capacity is kubelet's InvalidDiskCapacity;
// a runtime that names no mountpoint gives none.
func TestGarbageCollectInvalidCapacity(t *testing.T) {
	n := newNode(t, 1000, 0)
	n.rt.SetImageFs("")
	m := n.manager(t, imagegc.DefaultConfig())
	require.ErrorIs(t, m.GarbageCollect(t.Context(), start), imagegc.ErrInvalidCapacity)
	assert.Equal(t, []string{"InvalidDiskCapacity: invalid capacity 0 on image filesystem"}, n.reasons())
}

// With the high threshold at 100 and no maximum age, kubelet starts no
// image collection: Run returns at once, having listed nothing.
func TestRunDisabled(t *testing.T) {
	n := newNode(t, 1000, 0)
	m := n.manager(t, imagegc.Config{HighThresholdPercent: 100, LowThresholdPercent: 80})
	n.rt.ResetCalls()
	m.Run(t.Context())
	assert.Zero(t, n.rt.Calls("ListImages"))
}
