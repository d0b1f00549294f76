package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// status prints what the agent keeps on the node under the pods, as
// kubectl describe node prints its conditions; -o wide adds each
// container's log bytes (of -n's namespace).
func TestPrintNode(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := api.NodeReport{
		DiskPressure: api.DiskPressureCondition(false, time.Time{}),
		ImageFs: &api.ImageFs{Mountpoint: "/var/lib/containerd", CapacityBytes: 100 << 30, AvailableBytes: 60 << 30, UsedBytes: 30 << 30,
			MeasuredAt: now.Add(-time.Minute)},
		Reclaimed: api.Reclaimed{Since: now.Add(-time.Hour), ImagesRemoved: 2, ContainersRemoved: 7, SandboxesRemoved: 2},
		ContainerLogs: api.ContainerLogs{TotalBytes: 3 << 20, Containers: []api.ContainerLog{
			{Namespace: "shop", Pod: "web", Container: "app", ContainerID: "0123456789abcdef", Bytes: 2 << 20},
			{Namespace: "db", Pod: "pg", Container: "postgres", ContainerID: "fedcba", Bytes: 1 << 20},
		}},
		Settings: api.NodeSettings{ContainerLogMaxSize: "10Mi", ContainerLogMaxFiles: 5, LocalStorageLimits: "ignore"},
	}
	var b strings.Builder
	printNode(&b, r, namespaceFilter{}, now, false)
	assert.Equal(t, `Node:
  DiskPressure:      False
  Image filesystem:  /var/lib/containerd 40% used, 60.0GiB available of 100.0GiB, images 30.0GiB (measured 1m0s ago)
  Container logs:    3.0MiB in 2 containers (each at most 10Mi × 5 files)
  Reclaimed:         2 images, 7 containers, 2 sandboxes removed, 0 pods evicted since the agent started 1h0m ago
  Limits:            local storage limits ignore
`, b.String())

	b.Reset()
	printNode(&b, r, namespaceFilter{}, now, true)
	assert.True(t, strings.HasSuffix(b.String(), `  Log bytes by container:
    shop/web  app       0123456789abc  2.0MiB
    db/pg     postgres  fedcba         1.0MiB
`), b.String())
}

// Against a running agent: status shows the node section, and -o json
// carries the node report beside the pods.
func TestStatusShowsTheNode(t *testing.T) {
	server, logs := gatedAgent(t)
	out, _, code := cli(t, "status", "--server", server)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "\nNode:\n  Container logs:  ", logs())
	assert.Contains(t, out, "\n  Reclaimed:       0 images, 0 containers, 0 sandboxes removed, 0 pods evicted since the agent started ")

	out, _, code = cli(t, "status", "-o", "json", "--server", server)
	require.Equal(t, 0, code)
	var got struct {
		Pods []api.Pod      `json:"pods"`
		Node api.NodeReport `json:"node"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Len(t, got.Pods, 1)
	assert.Equal(t, "10Mi", got.Node.Settings.ContainerLogMaxSize, "kubelet's default")
	assert.Equal(t, 5, got.Node.Settings.ContainerLogMaxFiles)
	require.NotNil(t, got.Node.Settings.ContainerGC)
	assert.Equal(t, api.ContainerGCSettings{MinimumContainerTTLDuration: "0s", MaximumDeadContainersPerContainer: 1, MaximumDeadContainers: -1}, *got.Node.Settings.ContainerGC)
	assert.Nil(t, got.Node.DiskPressure, "no static pods: no eviction manager")
	assert.Nil(t, got.Node.Settings.ImageGC, "no static pods: no image GC")

	out, _, code = cli(t, "status", "-o", "yaml", "--server", server)
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "node:\n"), out)
	assert.Contains(t, out, "containerLogMaxSize: 10Mi")
}
