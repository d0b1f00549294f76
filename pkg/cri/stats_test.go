package cri_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container's stats carry its writable layer's use; the image
// filesystems carry their mountpoints.
func TestContainerStats(t *testing.T) {
	rt, c := imageClient(t)
	sb := rt.AddSandbox("default", "web", "uid-1")
	app := rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	other := rt.AddContainer(rt.AddSandbox("default", "db", "uid-2"), "db", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.SetWritableLayer(app, 3<<20)

	st, err := c.ContainerStats(t.Context(), app)
	require.NoError(t, err)
	assert.Equal(t, uint64(3<<20), st.GetWritableLayer().GetUsedBytes().GetValue())
	_, err = c.ContainerStats(t.Context(), "gone")
	assert.Error(t, err)

	list, err := c.ListContainerStats(t.Context(), &runtimeapi.ContainerStatsFilter{PodSandboxId: sb})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, app, list[0].GetAttributes().GetId())
	all, err := c.ListContainerStats(t.Context(), nil)
	require.NoError(t, err)
	assert.Len(t, all, 2)
	assert.Contains(t, []string{all[0].GetAttributes().GetId(), all[1].GetAttributes().GetId()}, other)

}
