package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/eviction"
	"github.com/cri-prober/cri-prober/pkg/gc"
	"github.com/cri-prober/cri-prober/pkg/imagegc"
	"github.com/cri-prober/cri-prober/pkg/logs"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The node report is read from the parts: the log manager's bytes by
// container, the image filesystem as last measured, the counters, the
// DiskPressure condition, and each part's settings in force (kubelet's
// defaults applied).
func TestNodeReport(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app", "0.log")
	require.NoError(t, os.MkdirAll(filepath.Dir(logPath), 0o755))
	require.NoError(t, os.WriteFile(logPath, []byte("hello\n"), 0o644))
	target := logs.Target{Namespace: "shop", Pod: "web", PodUID: "uid-web",
		Container: &cri.Container{ID: "c1", Name: "app", State: cri.StateRunning, LogPath: logPath}}
	logManager, err := logs.NewManager(nil, func() []logs.Target { return []logs.Target{target} }, logs.Config{PodLogsDir: dir})
	require.NoError(t, err)
	logManager.Step(ctx)

	rt := fakeruntime.NewForTest(t)
	rt.SetImageFs("/images")
	client, err := cri.Dial(ctx, rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	imageGC, err := imagegc.New(client, imagegc.DefaultConfig(), imagegc.WithStatfs(func(string) (int64, int64, error) { return 1000, 400, nil }))
	require.NoError(t, err)
	_, err = imageGC.ImageFs(ctx)
	require.NoError(t, err)

	hard, err := eviction.ParseThresholds(map[string]string{"nodefs.available": "10%"})
	require.NoError(t, err)
	started := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	a := &Agent{cfg: Config{NodeName: "node1"}, started: started, ContainerLogs: logManager, GC: gc.New(client, gc.Config{}), ImageGC: imageGC,
		Eviction: eviction.New(client, nil, podconfig.Layout{RootDir: dir}, eviction.Config{LocalStorageLimits: spec.LocalStorageEnforce, EvictionHard: hard})}
	require.NotNil(t, a.nodeReporter())

	r := a.NodeReport()
	require.NotNil(t, r.ImageFs)
	assert.Equal(t, api.ImageFs{Mountpoint: "/images", CapacityBytes: 1000, AvailableBytes: 400, MeasuredAt: r.ImageFs.MeasuredAt}, *r.ImageFs)
	r.ImageFs = nil
	assert.Equal(t, api.NodeReport{
		Node:         "node1",
		DiskPressure: &api.Condition{Type: "DiskPressure", Status: "False", Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		Reclaimed:    api.Reclaimed{Since: started},
		ContainerLogs: api.ContainerLogs{TotalBytes: 6, Containers: []api.ContainerLog{
			{Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c1", Bytes: 6}}},
		Settings: api.NodeSettings{ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: 5,
			ContainerGC:        &api.ContainerGCSettings{MinimumContainerTTLDuration: "0s", MaximumDeadContainersPerContainer: 1, MaximumDeadContainers: -1},
			ImageGC:            &api.ImageGCSettings{ImageGCHighThresholdPercent: 85, ImageGCLowThresholdPercent: 80, ImageMinimumGCAge: "2m0s", ImageMaximumGCAge: "0s"},
			LocalStorageLimits: "enforce", EvictionHard: []string{"nodefs.available<10%"}},
	}, r)

	assert.Nil(t, (&Agent{}).nodeReporter(), "no pod sync: nothing kept on the node, no route")
}
