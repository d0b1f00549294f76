package fakeruntime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// Direct calls the fake runtime in process, with cri.Client's methods and
// no gRPC: for tests of code that acts through CRI synchronously (the pod
// sync's executor), as kubelet's TestSyncPod drives SyncPod on its fake
// runtime service.
type Direct struct{ r *Runtime }

// Direct returns the runtime's in-process client.
func (r *Runtime) Direct() *Direct { return &Direct{r: r} }

func (d *Direct) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := d.r.injected("ListContainers"); err != nil {
		return nil, err
	}
	resp, err := d.r.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
	return resp.GetContainers(), err
}

func (d *Direct) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := d.r.injected("ContainerStatus"); err != nil {
		return nil, err
	}
	resp, err := d.r.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	return resp, err
}

func (d *Direct) ContainerConfig(ctx context.Context, id string) (*runtimeapi.ContainerConfig, error) {
	st, err := d.ContainerStatus(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return cri.ContainerConfigFromStatus(id, st)
}

func (d *Direct) SandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error) {
	st, err := d.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return cri.SandboxConfigFromStatus(id, st)
}

func (d *Direct) StopContainer(ctx context.Context, id string, grace int64) error {
	if err := d.r.injected("StopContainer"); err != nil {
		return err
	}
	_, err := d.r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
	return err
}

func (d *Direct) RemoveContainer(ctx context.Context, id string) error {
	if err := d.r.injected("RemoveContainer"); err != nil {
		return err
	}
	_, err := d.r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return err
}

func (d *Direct) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	if err := d.r.injected("CreateContainer"); err != nil {
		return "", err
	}
	resp, err := d.r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	return resp.GetContainerId(), err
}

func (d *Direct) StartContainer(ctx context.Context, id string) error {
	if err := d.r.injected("StartContainer"); err != nil {
		return err
	}
	_, err := d.r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return err
}

func (d *Direct) StopPodSandbox(ctx context.Context, id string) error {
	if err := d.r.injected("StopPodSandbox"); err != nil {
		return err
	}
	_, err := d.r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

func (d *Direct) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if err := d.r.injected("RunPodSandbox"); err != nil {
		return "", err
	}
	resp, err := d.r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	return resp.GetPodSandboxId(), err
}

func (d *Direct) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := d.r.injected("PodSandboxStatus"); err != nil {
		return nil, err
	}
	resp, err := d.r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	return resp, err
}

func (d *Direct) RemovePodSandbox(ctx context.Context, id string) error {
	if err := d.r.injected("RemovePodSandbox"); err != nil {
		return err
	}
	_, err := d.r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// injected counts a call and returns the error SetError set for its
// method (as the gRPC interceptor does for calls over the socket).
func (r *Runtime) injected(method string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[method]++
	return r.errs[method]
}
