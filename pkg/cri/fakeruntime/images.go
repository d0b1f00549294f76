package fakeruntime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// defaultImageSize is an added image's size unless WithImageSize says
// otherwise: kubelet's CRI client refuses an image of size 0.
const defaultImageSize = 5 << 20

// image is an image the fake knows, on the node or in a registry the node
// reaches; Runtime.local and Runtime.registry name images by reference.
type image struct {
	id   string
	size uint64
	user string // the image config's User
	// pinned: the runtime keeps it from garbage collection (CRI
	// Image.pinned, containerd 1.7's sandbox image).
	pinned bool
	// Where AddImage puts it.
	present, pullable bool
}

// ImageOption adjusts an added image.
type ImageOption func(*image)

// WithImageID gives the image a chosen ID (default: a sha256 digest).
func WithImageID(id string) ImageOption { return func(i *image) { i.id = id } }

// WithImageSize sets the image's size in bytes.
func WithImageSize(bytes uint64) ImageOption { return func(i *image) { i.size = bytes } }

// WithImageUser sets the image config's User as a Dockerfile's USER writes
// it: "1000", "nobody", "1000:1000", "app:staff". ImageStatus reports it as
// containerd does: a numeric user (before any ":group") as the uid, any
// other as the username.
func WithImageUser(user string) ImageOption { return func(i *image) { i.user = user } }

// Pinned marks the image pinned (CRI Image.pinned), as containerd 1.7
// and later pin their sandbox image.
func Pinned() ImageOption { return func(i *image) { i.pinned = true } }

// Pullable puts the image in a registry the node reaches: PullImage of
// any of its references succeeds (and makes it present).
func Pullable() ImageOption { return func(i *image) { i.pullable = true } }

// NotPresent leaves the image off the node: with Pullable, it is there
// only once pulled.
func NotPresent() ImageOption { return func(i *image) { i.present = false } }

// AddImage adds an image known by ref, present on the node as after `ctr
// images import` (see Pullable and NotPresent), and returns its ID. ref is
// normalized as containerd names images ("busybox" is
// "docker.io/library/busybox:latest"); on the node and in the registry,
// a reference names one image: adding another under it re-tags it.
func (r *Runtime) AddImage(ref string, opts ...ImageOption) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	img := &image{id: fmt.Sprintf("sha256:%064x", r.nextID), size: defaultImageSize, present: true}
	for _, opt := range opts {
		opt(img)
	}
	r.images[img.id] = img
	name := normalizeRef(ref)
	if img.present {
		r.local[name] = img.id
	}
	if img.pullable {
		r.registry[name] = img.id
	}
	return img.id
}

// HasImage reports whether an image known by ref (or with that ID) is on
// the node.
func (r *Runtime) HasImage(ref string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.localResolveLocked(ref) != nil
}

// RemoveImage takes an image known by ref (or with that ID) off the node
// with all its references, as `crictl rmi` does; a registry keeps it.
func (r *Runtime) RemoveImage(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.localResolveLocked(ref)
	if img == nil {
		return
	}
	maps.DeleteFunc(r.local, func(_, id string) bool { return id == img.id })
}

// PullHandler is called at the start of every PullImage, outside the
// fake's lock, with the call's context and the image as asked: it may
// block (a slow registry) and a non-nil error fails the pull with it.
type PullHandler func(ctx context.Context, image string) error

// OnPull sets the pull handler (nil: none).
func (r *Runtime) OnPull(h PullHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onPull = h
}

// normalizeRef is containerd's image name for ref (docker.ParseDockerRef:
// the docker.io domain, library/ for official images, the tag latest);
// a reference that does not parse stays as it is.
func normalizeRef(ref string) string {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ref
	}
	return named.String()
}

// localResolveLocked finds an image on the node as containerd's
// LocalResolve does: by ID, else by its normalized reference.
func (r *Runtime) localResolveLocked(refOrID string) *image {
	if img, ok := r.images[refOrID]; ok {
		for _, id := range r.local {
			if id == img.id {
				return img
			}
		}
		return nil
	}
	if id, ok := r.local[normalizeRef(refOrID)]; ok {
		return r.images[id]
	}
	return nil
}

// localRefsLocked are the references an image has on the node, sorted.
func (r *Runtime) localRefsLocked(id string) []string {
	var refs []string
	for ref, of := range r.local {
		if of == id {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	return refs
}

// imageService is the fake's CRI ImageService, served beside its
// RuntimeService on the same socket as containerd serves both.
type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
	r *Runtime
}

func (s imageService) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.localResolveLocked(req.GetImage().GetImage())
	if img == nil {
		// containerd: "return empty without error when image not found".
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	out := r.criImageLocked(img)
	uid, username := userFromImage(img.user)
	if uid != nil {
		out.Uid = &runtimeapi.Int64Value{Value: *uid}
	}
	out.Username = username
	resp := &runtimeapi.ImageStatusResponse{Image: out}
	if req.GetVerbose() {
		info, err := verboseInfo(map[string]any{"imageSpec": map[string]any{"config": map[string]any{"User": img.user}}})
		if err != nil {
			return nil, err
		}
		resp.Info = info
	}
	return resp, nil
}

// userFromImage is containerd's getUserFromImage: the user before any
// ":group"; numeric, it is the uid, else the username.
func userFromImage(user string) (*int64, string) {
	if user == "" {
		return nil, ""
	}
	user, _, _ = strings.Cut(user, ":")
	uid, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		return nil, user
	}
	return &uid, ""
}

func (s imageService) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	r := s.r
	asked := req.GetImage().GetImage()
	r.mu.Lock()
	handler := r.onPull
	r.mu.Unlock()
	if handler != nil {
		if err := handler(ctx, asked); err != nil {
			return nil, err
		}
	}
	named, err := reference.ParseDockerRef(asked)
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to parse image reference %q: %v", asked, err)
	}
	ref := named.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.registry[ref]; ok {
		r.local[ref] = id
		return &runtimeapi.PullImageResponse{ImageRef: id}, nil
	}
	return nil, status.Error(codes.Unknown, unreachableRegistry(named))
}

// unreachableRegistry is containerd's error for a pull from a registry
// whose name does not resolve: the resolver's HEAD of the manifest fails.
func unreachableRegistry(named reference.Named) string {
	host := reference.Domain(named)
	if host == "docker.io" {
		host = "registry-1.docker.io" // containerd's default host for docker.io
	}
	object := "latest"
	if d, ok := named.(reference.Digested); ok {
		object = d.Digest().String()
	} else if t, ok := named.(reference.Tagged); ok {
		object = t.Tag()
	}
	ref := named.String()
	url := "https://" + host + "/v2/" + reference.Path(named) + "/manifests/" + object
	return fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: failed to do request: Head %q: dial tcp: lookup %s on 127.0.0.53:53: no such host",
		ref, ref, url, host)
}

// criImageLocked is the image as CRI shows it: its ID, size, references
// and pinning.
func (r *Runtime) criImageLocked(img *image) *runtimeapi.Image {
	out := &runtimeapi.Image{Id: img.id, Size: img.size, Pinned: img.pinned}
	for _, ref := range r.localRefsLocked(img.id) {
		if strings.Contains(ref, "@") {
			out.RepoDigests = append(out.RepoDigests, ref)
		} else {
			out.RepoTags = append(out.RepoTags, ref)
		}
	}
	return out
}

// ListImages lists the images on the node, by ID.
func (s imageService) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	for _, id := range slices.Sorted(maps.Keys(r.images)) {
		if img := r.localResolveLocked(id); img != nil {
			resp.Images = append(resp.Images, r.criImageLocked(img))
		}
	}
	return resp, nil
}

// RemoveImage takes the image off the node as containerd does: with all
// its references; an image not there is no error.
func (s imageService) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s.r.RemoveImage(req.GetImage().GetImage())
	return &runtimeapi.RemoveImageResponse{}, nil
}

// SetImageFs sets where the fake says its images live (ImageFsInfo's
// mountpoint; default: none given).
func (r *Runtime) SetImageFs(mountpoint string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.imageFs = mountpoint
}

// ImageFsInfo reports one image filesystem: SetImageFs's mountpoint, and
// the sizes of the images on the node as its used bytes.
func (s imageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var used, inodes uint64
	for id, img := range r.images {
		if r.localResolveLocked(id) != nil {
			used += img.size
			inodes++
		}
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp:  r.now().UnixNano(),
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}
	if r.imageFs != "" {
		fs.FsId = &runtimeapi.FilesystemIdentifier{Mountpoint: r.imageFs}
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
