package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/events"
)

// fakeNode is a node report as the agent fills it.
type fakeNode NodeReport

func (f fakeNode) NodeReport() NodeReport { return NodeReport(f) }

// testNode is a node under disk pressure for 2 minutes at t0+5m, with
// images collected and two containers' logs kept.
func testNode() fakeNode {
	return fakeNode{
		Node:         "node1",
		DiskPressure: DiskPressureCondition(true, t0.Add(3*time.Minute)),
		ImageFs: &ImageFs{Mountpoint: "/var/lib/containerd", CapacityBytes: 100 << 30, AvailableBytes: 12 << 30, UsedBytes: 40 << 30,
			MeasuredAt: t0.Add(4 * time.Minute)},
		Reclaimed: Reclaimed{Since: t0, ImagesRemoved: 3, ContainersRemoved: 12, SandboxesRemoved: 1, PodsEvicted: 2},
		ContainerLogs: ContainerLogs{TotalBytes: 15<<20 + 512, Containers: []ContainerLog{
			{Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c1", Bytes: 15 << 20},
			{Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "worker", ContainerID: "c2", Bytes: 512},
		}},
		Settings: NodeSettings{ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: 5,
			ContainerGC:        &ContainerGCSettings{MinimumContainerTTLDuration: "0s", MaximumDeadContainersPerContainer: 1, MaximumDeadContainers: -1},
			ImageGC:            &ImageGCSettings{ImageGCHighThresholdPercent: 85, ImageGCLowThresholdPercent: 80, ImageMinimumGCAge: "2m0s", ImageMaximumGCAge: "0s"},
			LocalStorageLimits: "enforce", EvictionHard: []string{"nodefs.available<10%", "imagefs.available<15%"}},
	}
}

// GET /api/v1/node serves what the agent keeps on the node under the
// documented names (docs/api.md), kubelet's where it has them; an agent
// that keeps nothing there has no such route.
func TestNodeReport(t *testing.T) {
	s := New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Node: testNode()})
	code, body := get(t, s.Handler(), PathNode)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{
  "node": "node1",
  "diskPressure": {"type": "DiskPressure", "status": "True", "reason": "KubeletHasDiskPressure", "message": "kubelet has disk pressure",
    "lastTransitionTime": "2026-11-21T09:03:00Z"},
  "imageFs": {"mountpoint": "/var/lib/containerd", "capacityBytes": 107374182400, "availableBytes": 12884901888, "usedBytes": 42949672960,
    "measuredAt": "2026-11-21T09:04:00Z"},
  "reclaimed": {"since": "2026-11-21T09:00:00Z", "imagesRemoved": 3, "containersRemoved": 12, "sandboxesRemoved": 1, "podsEvicted": 2},
  "containerLogs": {"totalBytes": 15729152, "containers": [
    {"namespace": "shop", "pod": "web", "podUid": "uid-web", "container": "app", "containerId": "c1", "bytes": 15728640},
    {"namespace": "shop", "pod": "web", "podUid": "uid-web", "container": "worker", "containerId": "c2", "bytes": 512}]},
  "settings": {"containerLogMaxSize": "10Mi", "containerLogMaxFiles": 5,
    "containerGC": {"minimumContainerTTLDuration": "0s", "maximumDeadContainersPerContainer": 1, "maximumDeadContainers": -1},
    "imageGC": {"imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80, "imageMinimumGCAge": "2m0s", "imageMaximumGCAge": "0s"},
    "localStorageLimits": "enforce", "evictionHard": ["nodefs.available<10%", "imagefs.available<15%"]}
}`, body)

	// Only the logs kept (no static pods: no eviction manager, no image
	// GC): the parts that do not run are left out, the lists are [].
	s = New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Node: fakeNode{Reclaimed: Reclaimed{Since: t0}}})
	_, body = get(t, s.Handler(), PathNode)
	assert.JSONEq(t, `{"reclaimed": {"since": "2026-11-21T09:00:00Z", "imagesRemoved": 0, "containersRemoved": 0, "sandboxesRemoved": 0, "podsEvicted": 0},
  "containerLogs": {"totalBytes": 0, "containers": []}, "settings": {}}`, body)

	s = New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy})
	code, _ = get(t, s.Handler(), PathNode)
	assert.Equal(t, http.StatusNotFound, code, "no pod sync: nothing kept on the node")
}

// The client reads the report back as served, and an agent without the
// route is a StatusError of 404 (status then prints no node section).
func TestClientNode(t *testing.T) {
	srv := httptest.NewServer(New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Node: testNode()}).Handler())
	t.Cleanup(srv.Close)
	r, err := NewClient(srv.URL, nil).Node(context.Background())
	require.NoError(t, err)
	want := NodeReport(testNode())
	assert.Equal(t, want.ContainerLogs, r.ContainerLogs)
	assert.Equal(t, want.Settings, r.Settings)
	assert.Equal(t, want.Reclaimed, r.Reclaimed)
	assert.Equal(t, "True", r.DiskPressure.Status)
	assert.True(t, want.ImageFs.MeasuredAt.Equal(r.ImageFs.MeasuredAt))

	none := httptest.NewServer(New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy}).Handler())
	t.Cleanup(none.Close)
	_, err = NewClient(none.URL, nil).Node(context.Background())
	var status *StatusError
	require.ErrorAs(t, err, &status)
	assert.Equal(t, http.StatusNotFound, status.Code)
}

// The report in lines, as status and the status page show it.
func TestNodeLines(t *testing.T) {
	now := t0.Add(5 * time.Minute)
	assert.Equal(t, []NodeLine{
		{Label: "DiskPressure", Text: "True for 2m0s", Bad: true},
		{Label: "Image filesystem", Text: "/var/lib/containerd 88% used, 12.0GiB available of 100.0GiB, images 40.0GiB (measured 1m0s ago)"},
		{Label: "Container logs", Text: "15.0MiB in 2 containers (each at most 10Mi × 5 files)"},
		{Label: "Reclaimed", Text: "3 images, 12 containers, 1 sandbox removed, 2 pods evicted since the agent started 5m0s ago"},
		{Label: "Limits", Text: "local storage limits enforce · eviction-hard nodefs.available<10%,imagefs.available<15% · image GC at 85% down to 80%"},
	}, NodeReport(testNode()).Lines(now))

	quiet := NodeReport{DiskPressure: DiskPressureCondition(false, time.Time{}), Reclaimed: Reclaimed{Since: t0, ContainersRemoved: 1},
		Settings: NodeSettings{ContainerLogMaxSize: "-1", ContainerLogMaxFiles: 5, LocalStorageLimits: "ignore"}}
	assert.Equal(t, []NodeLine{
		{Label: "DiskPressure", Text: "False"},
		{Label: "Container logs", Text: "0B in 0 containers (not rotated)"},
		{Label: "Reclaimed", Text: "0 images, 1 container, 0 sandboxes removed, 0 pods evicted since the agent started 5m0s ago"},
		{Label: "Limits", Text: "local storage limits ignore"},
	}, quiet.Lines(now))
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 1536: "1.5KiB", 10 << 20: "10.0MiB", 3 << 40: "3.0TiB"} {
		assert.Equal(t, want, Size(n), "%d", n)
	}
}

// The status page shows the node section under the summary.
func TestStatusPageShowsTheNode(t *testing.T) {
	s := New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Node: testNode()})
	s.clock = testingclock.NewFakePassiveClock(t0.Add(5 * time.Minute))
	_, body := getPage(t, s.Handler(), "/")
	assert.Contains(t, body, `<table class="node" aria-label="what the agent keeps on the node">`)
	assert.Contains(t, body, `<tr><th scope="row">DiskPressure</th><td class="bad">True for 2m0s</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">Container logs</th><td>15.0MiB in 2 containers (each at most 10Mi × 5 files)</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">Reclaimed</th><td>3 images, 12 containers, 1 sandbox removed, 2 pods evicted since the agent started 5m0s ago</td></tr>`)

	_, body = getPage(t, pageServer(t).Handler(), "/")
	assert.NotContains(t, body, `class="node"`, "nothing kept on the node: no section")
}

// kubelet sets the condition's lastTransitionTime whatever its status
// (nodestatus.DiskPressureCondition): when it was made, then at each
// change.
func TestDiskPressureConditionTransition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, pressure := range []bool{true, false} {
		c := DiskPressureCondition(pressure, t0)
		if assert.NotNil(t, c.LastTransitionTime, "pressure %v", pressure) {
			assert.Equal(t, t0, *c.LastTransitionTime)
		}
	}
	assert.Nil(t, DiskPressureCondition(false, time.Time{}).LastTransitionTime, "not observed yet")
}
