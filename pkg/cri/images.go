package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageStatus returns what the runtime has of image (a reference, as
// kubelet passes it with its default tag applied, or an image ID): a nil
// Image when it has none, which is how kubelet's GetImageRef tells that an
// image is not present (containerd answers so, without an error, also for
// a reference it cannot parse). verbose adds the runtime's info map
// (containerd: the image's config and chain ID).
//
// As kubelet's CRI client (cri-client remote_image.go, imageStatusV1), an
// image without ID or size is an error: kubelet would take its empty ID
// for "not present" and pull it again and again.
func (c *Client) ImageStatus(ctx context.Context, image string, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("image status %s: %w", image, err)
	}
	if img := resp.GetImage(); img != nil && (img.GetId() == "" || img.GetSize() == 0) {
		return nil, fmt.Errorf("image status %s: %w", image, fmt.Errorf("Id or size of image %q is not set", image)) //nolint:staticcheck // kubelet's text
	}
	return resp, nil
}

// PullImage asks the runtime to pull image, without credentials (the agent
// has none: only images a node may pull anonymously, or that a registry
// mirror of the runtime's configuration serves, can be pulled), and returns
// the image's reference as the runtime resolved it: its ID, which the
// container's config then names (kubelet's imageRef). sandboxConfig is the
// pod's (containerd picks the snapshotter of the pod's runtime handler).
//
// A pull takes as long as the image's size and the registry make it: as
// kubelet's CRI client (remote_image.go, PullImage), the call has no
// deadline but ctx's. The runtime bounds a pull that makes no progress
// (containerd's image_pull_progress_timeout).
//
// Like kubelet's client, the runtime's codes.Unknown is dropped from the
// error: what is left is the runtime's own text ("failed to pull and
// unpack image …"), which kubelet reports in its events and as the
// container's waiting message (Cause gives it back from the error this
// returns).
func (c *Client) PullImage(ctx context.Context, image string, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.images.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image:         &runtimeapi.ImageSpec{Image: image},
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unknown {
			err = errors.New(st.Message())
		}
		return "", fmt.Errorf("pull image %s: %w", image, err)
	}
	if resp.GetImageRef() == "" {
		return "", fmt.Errorf("pull image %s: %w", image, fmt.Errorf("imageRef of image %q is not set", image))
	}
	return resp.GetImageRef(), nil
}

// ListImages lists every image the runtime has (in containerd's k8s.io
// namespace, which its CRI serves), as kubelet's image manager lists them
// for its garbage collection.
func (c *Client) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return resp.GetImages(), nil
}

// RemoveImage removes an image (by ID, as kubelet's image garbage
// collector names it, or by reference) with all its references; one
// already gone counts as removed (containerd answers so itself).
func (c *Client) RemoveImage(ctx context.Context, image string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	_, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", image, err)
	}
	return nil
}

// ImageFsInfo returns the runtime's image filesystems: the bytes and
// inodes its images use and where they live (FsId's mountpoint), which
// kubelet's CRI stats provider takes the first of.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("image filesystem info: %w", err)
	}
	return resp, nil
}

// SandboxImage returns the image the runtime makes every sandbox from
// (containerd's sandbox_image, the pause image), from its verbose
// status: "" when the runtime does not say. containerd 1.7 and later
// report it pinned in ListImages; 1.6 does not, and kubelet's image
// garbage collector, which keeps pinned images only, would remove it.
func (c *Client) SandboxImage(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("runtime status: %w", err)
	}
	return sandboxImage(resp.GetInfo()), nil
}

// sandboxImage reads containerd's CRI config (info["config"]) for its
// sandboxImage; another runtime's info gives "".
func sandboxImage(info map[string]string) string {
	var config struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if err := json.Unmarshal([]byte(info["config"]), &config); err != nil {
		return ""
	}
	return config.SandboxImage
}
