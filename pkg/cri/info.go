package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// verboseInfo is what containerd's verbose status holds under
// info["info"]: the original CRI config and the OCI runtime spec.
type verboseInfo[T any] struct {
	Config      *T `json:"config"`
	RuntimeSpec struct {
		Linux struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

func decodeInfo[T any](info map[string]string) (*verboseInfo[T], error) {
	raw, ok := info["info"]
	if !ok {
		return nil, errors.New("no info")
	}
	var v verboseInfo[T]
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// netNSPath finds the network namespace in containerd's verbose sandbox
// info: the OCI runtime spec's linux.namespaces. Other runtimes: "".
func netNSPath(info map[string]string) string {
	v, err := decodeInfo[struct{}](info)
	if err != nil {
		return ""
	}
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

// ContainerConfig returns the CRI config a container was created with, from
// the runtime's verbose status (containerd keeps it), as crictl or kubelet
// gave it: enough to create the container's next attempt.
func (c *Client) ContainerConfig(ctx context.Context, id string) (*runtimeapi.ContainerConfig, error) {
	st, err := c.ContainerStatus(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return ContainerConfigFromStatus(id, st)
}

// ContainerConfigFromStatus reads a container's original config from its
// verbose status (containerd's info).
func ContainerConfigFromStatus(id string, st *runtimeapi.ContainerStatusResponse) (*runtimeapi.ContainerConfig, error) {
	v, err := decodeInfo[runtimeapi.ContainerConfig](st.GetInfo())
	if err != nil || v.Config == nil || v.Config.Metadata == nil {
		return nil, fmt.Errorf("container %s: the runtime does not report the container's original config (verbose ContainerStatus info)", id)
	}
	return v.Config, nil
}

// SandboxConfig returns the CRI config a sandbox was created with, from the
// runtime's verbose status.
func (c *Client) SandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error) {
	st, err := c.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return SandboxConfigFromStatus(id, st)
}

// SandboxConfigFromStatus reads a sandbox's original config from its
// verbose status (containerd's info).
func SandboxConfigFromStatus(id string, st *runtimeapi.PodSandboxStatusResponse) (*runtimeapi.PodSandboxConfig, error) {
	v, err := decodeInfo[runtimeapi.PodSandboxConfig](st.GetInfo())
	if err != nil || v.Config == nil {
		return nil, fmt.Errorf("pod sandbox %s: the runtime does not report the sandbox's original config (verbose PodSandboxStatus info)", id)
	}
	return v.Config, nil
}
