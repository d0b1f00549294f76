package cri_test

import (
	"context"
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

func imageClient(t *testing.T, opts ...cri.Option) (*fakeruntime.Runtime, *cri.Client) {
	t.Helper()
	rt := fakeruntime.NewForTest(t)
	c, err := cri.Dial(context.Background(), rt.Endpoint(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return rt, c
}

// ImageStatus answers as containerd: the image by its normalized name or
// its ID, nil (and no error) when absent, the image config's user as uid
// or username.
func TestImageStatus(t *testing.T) {
	rt, c := imageClient(t)
	busybox := rt.AddImage("docker.io/library/busybox:1.36", fakeruntime.WithImageSize(4_264_960))
	numeric := rt.AddImage("registry.example/app:1", fakeruntime.WithImageUser("1000"))
	named := rt.AddImage("registry.example/app:2", fakeruntime.WithImageUser("nobody"))
	withGroup := rt.AddImage("registry.example/app:3", fakeruntime.WithImageUser("1001:1001"))
	namedGroup := rt.AddImage("registry.example/app:4", fakeruntime.WithImageUser("app:staff"))
	rt.AddImage("registry.example/remote:1", fakeruntime.Pullable(), fakeruntime.NotPresent())

	tests := []struct {
		name     string
		image    string
		wantID   string
		wantUID  *int64
		wantUser string
	}{
		{"short name", "busybox:1.36", busybox, nil, ""},
		{"full name", "docker.io/library/busybox:1.36", busybox, nil, ""},
		{"by ID", busybox, busybox, nil, ""},
		{"numeric user", "registry.example/app:1", numeric, ptr(int64(1000)), ""},
		{"user name", "registry.example/app:2", named, nil, "nobody"},
		{"uid:gid", "registry.example/app:3", withGroup, ptr(int64(1001)), ""},
		{"name:group", "registry.example/app:4", namedGroup, nil, "app"},
		{"absent", "busybox:latest", "", nil, ""},
		{"only in a registry", "registry.example/remote:1", "", nil, ""},
		{"not a reference", "Not/A:Ref!", "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.ImageStatus(context.Background(), tt.image, false)
			require.NoError(t, err)
			img := resp.GetImage()
			if tt.wantID == "" {
				assert.Nil(t, img, "absent: no image, no error")
				return
			}
			require.NotNil(t, img)
			assert.Equal(t, tt.wantID, img.GetId())
			assert.NotZero(t, img.GetSize())
			if tt.wantUID == nil {
				assert.Nil(t, img.GetUid())
			} else {
				require.NotNil(t, img.GetUid())
				assert.Equal(t, *tt.wantUID, img.GetUid().GetValue())
			}
			assert.Equal(t, tt.wantUser, img.GetUsername())
		})
	}
	resp, err := c.ImageStatus(context.Background(), "busybox:1.36", true)
	require.NoError(t, err)
	assert.Equal(t, uint64(4_264_960), resp.GetImage().GetSize())
	assert.Equal(t, []string{"docker.io/library/busybox:1.36"}, resp.GetImage().GetRepoTags())
	assert.Contains(t, resp.GetInfo()["info"], `"imageSpec"`)
	assert.Equal(t, 11, rt.Calls("ImageStatus"))
}

// An image without size (or ID) is refused as kubelet's CRI client
// refuses it, with its text.
func TestImageStatusWithoutSize(t *testing.T) {
	rt, c := imageClient(t)
	rt.AddImage("busybox", fakeruntime.WithImageSize(0))
	_, err := c.ImageStatus(context.Background(), "busybox:latest", false)
	require.Error(t, err)
	assert.Equal(t, `Id or size of image "busybox:latest" is not set`, cri.Cause(err).Error())
	assert.Contains(t, err.Error(), "image status busybox:latest")
}

func TestImageStatusError(t *testing.T) {
	rt, c := imageClient(t)
	rt.SetError("ImageStatus", status.Error(codes.Unavailable, "containerd is gone"))
	_, err := c.ImageStatus(context.Background(), "busybox:latest", false)
	require.Error(t, err)
	assert.True(t, cri.IsUnavailable(err))
	assert.Equal(t, "rpc error: code = Unavailable desc = containerd is gone", cri.Cause(err).Error(),
		"the status error itself, as kubelet's client returns it")
}

// A pull of an image the registry serves returns its ID and leaves it on
// the node; one the node cannot reach fails with containerd's own text,
// its code Unknown dropped as kubelet's client drops it.
func TestPullImage(t *testing.T) {
	rt, c := imageClient(t)
	id := rt.AddImage("registry.example/app:1.0", fakeruntime.Pullable(), fakeruntime.NotPresent())
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}

	assert.False(t, rt.HasImage("registry.example/app:1.0"))
	ref, err := c.PullImage(context.Background(), "registry.example/app:1.0", sandbox)
	require.NoError(t, err)
	assert.Equal(t, id, ref)
	assert.True(t, rt.HasImage("registry.example/app:1.0"), "pulled: on the node")
	assert.True(t, rt.HasImage(id))

	_, err = c.PullImage(context.Background(), "registry.invalid/app:1.0", sandbox)
	require.Error(t, err)
	assert.Equal(t, `failed to pull and unpack image "registry.invalid/app:1.0": failed to resolve reference "registry.invalid/app:1.0": `+
		`failed to do request: Head "https://registry.invalid/v2/app/manifests/1.0": dial tcp: lookup registry.invalid on 127.0.0.53:53: no such host`,
		cri.Cause(err).Error())
	assert.Equal(t, "pull image registry.invalid/app:1.0: "+cri.Cause(err).Error(), err.Error())

	_, err = c.PullImage(context.Background(), "nosuch", sandbox)
	require.Error(t, err)
	assert.Contains(t, cri.Cause(err).Error(), `failed to pull and unpack image "docker.io/library/nosuch:latest"`)
	assert.Contains(t, cri.Cause(err).Error(), `Head "https://registry-1.docker.io/v2/library/nosuch/manifests/latest"`)
	assert.Equal(t, 3, rt.Calls("PullImage"))

	rt.SetError("PullImage", status.Error(codes.Unavailable, "connection refused"))
	_, err = c.PullImage(context.Background(), "registry.example/app:1.0", sandbox)
	assert.True(t, cri.IsUnavailable(err), "codes other than Unknown are kept")
}

// A pull has no deadline but its context's (kubelet's CRI client), while
// ImageStatus has the call timeout; cancelling the context ends a pull.
func TestPullImageHasNoDeadline(t *testing.T) {
	rt, c := imageClient(t)
	rt.AddImage("registry.example/big:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	deadlines := make(chan bool, 1)
	entered := make(chan struct{})
	rt.OnPull(func(ctx context.Context, image string) error {
		_, ok := ctx.Deadline()
		deadlines <- ok
		close(entered)
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.PullImage(ctx, "registry.example/big:1", nil)
		done <- err
	}()
	<-entered
	assert.False(t, <-deadlines, "no deadline on a pull")
	cancel()
	err := <-done
	require.Error(t, err)
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.False(t, rt.HasImage("registry.example/big:1"))
}

// ImageStatus has the call timeout as every other call; PullImage none.
func TestImageCallDeadlines(t *testing.T) {
	var mu sync.Mutex
	hasDeadline := map[string]bool{}
	rt, c := imageClient(t, cri.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		_, ok := ctx.Deadline()
		mu.Lock()
		hasDeadline[path.Base(method)] = ok
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	rt.AddImage("busybox", fakeruntime.Pullable())
	_, err := c.ImageStatus(context.Background(), "busybox:latest", false)
	require.NoError(t, err)
	_, err = c.PullImage(context.Background(), "busybox:latest", nil)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, hasDeadline["ImageStatus"])
	assert.False(t, hasDeadline["PullImage"])
}

func ptr[T any](v T) *T { return &v }

// ListImages, RemoveImage and ImageFsInfo are the image garbage
// collector's calls: the images with their pinning, a removal (twice: the
// second finds nothing and is no error), the image filesystem's usage and
// mountpoint; SandboxImage reads containerd's sandboxImage.
func TestImageGarbageCollectionCalls(t *testing.T) {
	rt, c := imageClient(t)
	ctx := t.Context()
	pause := rt.AddImage("localhost/pause:test", fakeruntime.WithImageSize(1000), fakeruntime.Pinned())
	app := rt.AddImage("localhost/app:1", fakeruntime.WithImageSize(3000))
	rt.SetImageFs("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs")
	rt.SetSandboxImage("localhost/pause:test")

	images, err := c.ListImages(ctx)
	require.NoError(t, err)
	require.Len(t, images, 2)
	byID := map[string]*runtimeapi.Image{}
	for _, img := range images {
		byID[img.GetId()] = img
	}
	assert.True(t, byID[pause].GetPinned())
	assert.Equal(t, []string{"localhost/app:1"}, byID[app].GetRepoTags())

	fs, err := c.ImageFsInfo(ctx)
	require.NoError(t, err)
	require.Len(t, fs.GetImageFilesystems(), 1)
	assert.Equal(t, uint64(4000), fs.GetImageFilesystems()[0].GetUsedBytes().GetValue())
	assert.Equal(t, "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", fs.GetImageFilesystems()[0].GetFsId().GetMountpoint())

	require.NoError(t, c.RemoveImage(ctx, app))
	require.NoError(t, c.RemoveImage(ctx, app))
	assert.False(t, rt.HasImage("localhost/app:1"))

	sandbox, err := c.SandboxImage(ctx)
	require.NoError(t, err)
	assert.Equal(t, "localhost/pause:test", sandbox)
}
