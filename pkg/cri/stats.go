package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats returns what the runtime measures of a container: its
// writable layer's use (WritableLayer.UsedBytes, kubelet's Rootfs of the
// container in its summary) among others.
func (c *Client) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		return nil, fmt.Errorf("container stats %s: %w", id, err)
	}
	return resp.GetStats(), nil
}

// ListContainerStats returns the stats of the containers matching filter
// (nil: all), as kubelet's CRI stats provider lists them once per
// housekeeping.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	return resp.GetStats(), nil
}
