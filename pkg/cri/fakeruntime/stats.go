package fakeruntime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SetWritableLayer sets what a container's writable layer uses, in bytes,
// as its stats report it (WritableLayer.UsedBytes).
func (r *Runtime) SetWritableLayer(id string, bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writable == nil {
		r.writable = map[string]uint64{}
	}
	r.writable[id] = bytes
}

func (r *Runtime) statsLocked(c *container) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.id, Metadata: c.config.GetMetadata(), Labels: c.config.GetLabels(), Annotations: c.config.GetAnnotations()},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp: r.now().UnixNano(),
			UsedBytes: &runtimeapi.UInt64Value{Value: r.writable[c.id]},
		},
	}
}

func (r *Runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	return &runtimeapi.ContainerStatsResponse{Stats: r.statsLocked(c)}, nil
}

// ListContainerStats lists the stats of the running containers matching
// the filter, as containerd lists those of the containers it has.
func (r *Runtime) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := req.GetFilter()
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, c := range r.containers {
		if f.GetId() != "" && c.id != f.GetId() || f.GetPodSandboxId() != "" && c.sandboxID != f.GetPodSandboxId() {
			continue
		}
		resp.Stats = append(resp.Stats, r.statsLocked(c))
	}
	return resp, nil
}
