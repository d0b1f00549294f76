// Package fakeruntime is an in-process CRI RuntimeService and ImageService
// served over a unix socket, for unit tests and benchmarks of code that
// talks CRI. Tests script its sandboxes, containers and images directly or
// through CRI calls, inject errors, and read how many calls each method
// received.
//
// It is a test double, not a runtime: nothing runs, exec results come from a
// handler the test sets, and sandboxes get 127.0.0.1 unless told otherwise so
// that network probes in tests only ever reach loopback.
package fakeruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec wrapped by listingCodec
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecHandler answers ExecSync. The default answers exit code 0.
type ExecHandler func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)

// Runtime is the fake. Its zero value is not usable; call New.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	mu         sync.Mutex
	now        func() time.Time
	nextID     int
	sandboxes  map[string]*sandbox
	containers map[string]*container
	calls      map[string]int
	errs       map[string]error
	stops      map[string]int64  // container ID → the timeout of its last StopContainer
	images     map[string]*image // by ID
	local      map[string]string // image reference on the node → image ID
	registry   map[string]string // image reference the registry serves → image ID
	onStop     func(id string)
	exec       ExecHandler
	onPull     PullHandler
	hung       chan struct{}     // non-nil while Hang is in effect; closed to release
	writable   map[string]uint64 // container ID → its writable layer's bytes (SetWritableLayer)
	imageFs    string            // ImageFsInfo's mountpoint
	sandboxImg string            // Status's sandbox image (containerd's sandboxImage)

	// version counts changes to sandboxes and containers; with
	// cacheListings, unfiltered listings are built and encoded once per
	// version (see CacheListings).
	version       uint64
	cacheListings bool
	listings      map[string]*listing // by method

	encMu   sync.Mutex
	encoded map[any][]byte // cached response → its encoding, for listingCodec

	server *grpc.Server
	socket string
}

type sandbox struct {
	id        string
	config    *runtimeapi.PodSandboxConfig
	state     runtimeapi.PodSandboxState
	createdAt time.Time
	ip        string
	moreIPs   []string // the runtime's additional_ips (dual stack)
	netns     string
}

type container struct {
	id         string
	sandboxID  string
	config     *runtimeapi.ContainerConfig
	state      runtimeapi.ContainerState
	createdAt  time.Time
	startedAt  time.Time
	finishedAt time.Time
	exitCode   int32
	reason     string
	log        *os.File // the log file it writes (WriteLog), nil until the first write
}

// New returns an empty fake runtime whose clock is time.Now.
func New() *Runtime {
	return &Runtime{
		now:        time.Now,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		calls:      map[string]int{},
		errs:       map[string]error{},
		stops:      map[string]int64{},
		images:     map[string]*image{},
		local:      map[string]string{},
		registry:   map[string]string{},
	}
}

// NewForTest starts a fake runtime on a socket in a temporary directory and
// stops it when the test ends.
func NewForTest(tb testing.TB) *Runtime {
	tb.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "fakecri")
	if err != nil {
		tb.Fatalf("create socket dir: %v", err)
	}
	r := New()
	if err := r.Start(filepath.Join(dir, "cri.sock")); err != nil {
		os.RemoveAll(dir)
		tb.Fatalf("start fake runtime: %v", err)
	}
	tb.Cleanup(func() {
		r.Stop()
		os.RemoveAll(dir)
	})
	return r
}

// Start serves CRI on a unix socket at socketPath.
func (r *Runtime) Start(socketPath string) error {
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", socketPath, err)
	}
	r.server = grpc.NewServer(grpc.UnaryInterceptor(r.intercept),
		grpc.ForceServerCodecV2(listingCodec{r: r, CodecV2: encoding.GetCodecV2("proto")}))
	runtimeapi.RegisterRuntimeServiceServer(r.server, r)
	runtimeapi.RegisterImageServiceServer(r.server, imageService{r: r})
	r.socket = socketPath
	go r.server.Serve(lis) //nolint:errcheck // Serve returns when Stop is called.
	return nil
}

// Stop stops serving and waits for in-flight calls.
func (r *Runtime) Stop() {
	if r.server != nil {
		r.server.Stop()
	}
}

// Endpoint returns the CRI endpoint to dial.
func (r *Runtime) Endpoint() string { return "unix://" + r.socket }

// intercept counts calls and returns injected errors.
func (r *Runtime) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	r.mu.Lock()
	r.calls[method]++
	err := r.errs[method]
	hung := r.hung
	r.mu.Unlock()
	if hung != nil {
		select { // a hung runtime answers nothing until released
		case <-hung:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Hang makes the runtime stop answering every call (as a containerd under
// SIGSTOP or stuck on a lock would) until release is called; calls then
// proceed.
func (r *Runtime) Hang() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.hung = ch
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.hung == ch {
			r.hung = nil
			close(ch)
		}
	}
}

// CacheListings makes unfiltered ListPodSandbox and ListContainers answers
// built and encoded once for as long as nothing changes, as benchmarks of
// a client want: a real runtime builds its answers in its own process, and
// the fake's cost of doing it (several times the client's at node scale)
// would hide the client's own. The client still receives and decodes the
// whole answer every call. Every scripted or CRI change invalidates the
// cache; mutating a map passed in an option afterwards does not.
func (r *Runtime) CacheListings() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cacheListings = true
}

// listing is an unfiltered listing's answer as of a version.
type listing struct {
	version uint64
	resp    proto.Message
}

// changedLocked records that sandboxes or containers changed.
func (r *Runtime) changedLocked() { r.version++ }

// cachedListingLocked returns the cached answer to an unfiltered method
// call, building it (and its encoding) with build when missing or stale.
func (r *Runtime) cachedListingLocked(method string, build func() proto.Message) (proto.Message, error) {
	if l, ok := r.listings[method]; ok && l.version == r.version {
		return l.resp, nil
	}
	resp := build()
	b, err := proto.Marshal(resp)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	r.encMu.Lock()
	if old, ok := r.listings[method]; ok {
		delete(r.encoded, old.resp)
	}
	if r.encoded == nil {
		r.encoded = map[any][]byte{}
	}
	r.encoded[resp] = b
	r.encMu.Unlock()
	if r.listings == nil {
		r.listings = map[string]*listing{}
	}
	r.listings[method] = &listing{version: r.version, resp: resp}
	return resp, nil
}

// listingCodec sends a cached listing's encoding as it is; everything else
// goes through the ordinary proto codec.
type listingCodec struct {
	encoding.CodecV2
	r *Runtime
}

func (c listingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.r.encMu.Lock()
	b, ok := c.r.encoded[v]
	c.r.encMu.Unlock()
	if ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// Calls returns how many times method (e.g. "ListContainers") was called.
func (r *Runtime) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// CallCounts returns a copy of the per-method call counts.
func (r *Runtime) CallCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// ResetCalls zeroes the call counts.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.calls)
}

// OnStop calls f (under the fake's lock: keep it short) for every
// StopContainer of an existing container.
func (r *Runtime) OnStop(f func(id string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onStop = f
}

// StopTimeout returns the grace period (seconds) the last StopContainer of
// a container asked for.
func (r *Runtime) StopTimeout(id string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.stops[id]
	return t, ok
}

// ContainerInfo describes a container for assertions.
type ContainerInfo struct {
	ID          string
	SandboxID   string
	Name        string
	Attempt     uint32
	State       runtimeapi.ContainerState
	ExitCode    int32
	Annotations map[string]string
}

// Containers lists a sandbox's containers, oldest attempt first.
func (r *Runtime) Containers(sandboxID string) []ContainerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ContainerInfo
	for _, c := range r.containers {
		if c.sandboxID == sandboxID {
			out = append(out, ContainerInfo{ID: c.id, SandboxID: c.sandboxID, Name: c.config.GetMetadata().GetName(),
				Attempt: c.config.GetMetadata().GetAttempt(), State: c.state, ExitCode: c.exitCode, Annotations: c.config.GetAnnotations()})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Attempt < out[j].Attempt
	})
	return out
}

// SandboxState returns a sandbox's state.
func (r *Runtime) SandboxState(id string) (runtimeapi.PodSandboxState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[id]
	if !ok {
		return 0, false
	}
	return s.state, true
}

// SetError makes every call of method fail with err until cleared with nil.
func (r *Runtime) SetError(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.errs, method)
		return
	}
	r.errs[method] = err
}

// SetExecHandler sets how ExecSync answers.
func (r *Runtime) SetExecHandler(h ExecHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exec = h
}

// SetClock replaces the clock used for created/started/finished times.
func (r *Runtime) SetClock(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

func (r *Runtime) newID(prefix string) string {
	r.nextID++
	return fmt.Sprintf("%s%063d", prefix, r.nextID)
}

// SandboxOption adjusts a scripted sandbox.
type SandboxOption func(*sandbox)

// WithIP sets the sandbox's IP ("" for none, as a host-network sandbox).
func WithIP(ip string) SandboxOption { return func(s *sandbox) { s.ip = ip } }

// WithIPs gives the sandbox a primary IP and additional ones, as a
// dual-stack network reports them.
func WithIPs(ip string, more ...string) SandboxOption {
	return func(s *sandbox) { s.ip, s.moreIPs = ip, more }
}

// WithNetNS gives the sandbox a network namespace path, reported as
// containerd does in its verbose status (the OCI spec's namespaces).
func WithNetNS(path string) SandboxOption { return func(s *sandbox) { s.netns = path } }

// WithSandboxAnnotations sets the sandbox config's annotations.
func WithSandboxAnnotations(a map[string]string) SandboxOption {
	return func(s *sandbox) { s.config.Annotations = a }
}

// WithLogDirectory sets the sandbox config's log directory (kubelet's
// /var/log/pods/<namespace>_<name>_<uid>).
func WithLogDirectory(dir string) SandboxOption {
	return func(s *sandbox) { s.config.LogDirectory = dir }
}

// AddSandbox adds a ready sandbox and returns its ID.
func (r *Runtime) AddSandbox(namespace, name, uid string, opts ...SandboxOption) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &sandbox{
		id: r.newID("a"),
		config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Namespace: namespace, Name: name, Uid: uid},
		},
		state:     runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt: r.now(),
		ip:        "127.0.0.1",
	}
	for _, opt := range opts {
		opt(s)
	}
	r.sandboxes[s.id] = s
	r.changedLocked()
	return s.id
}

// ContainerOption adjusts a scripted container.
type ContainerOption func(*container)

// WithAttempt sets the container's attempt number.
// WithID gives the container a chosen ID (a second fake standing for the
// same runtime after an agent restart).
func WithID(id string) ContainerOption { return func(c *container) { c.id = id } }

// WithAttempt sets the container's attempt.
func WithAttempt(n uint32) ContainerOption {
	return func(c *container) { c.config.Metadata.Attempt = n }
}

// WithAnnotations sets the container config's annotations.
func WithAnnotations(a map[string]string) ContainerOption {
	return func(c *container) { c.config.Annotations = a }
}

// WithLogPath sets the container config's log path, relative to its
// sandbox's log directory (kubelet's <container>/<attempt>.log).
func WithLogPath(path string) ContainerOption {
	return func(c *container) { c.config.LogPath = path }
}

// WithMounts sets the container config's mounts (ContainerStatus reports
// them, as containerd does: a termination message file is found by its
// mount).
func WithMounts(mounts ...*runtimeapi.Mount) ContainerOption {
	return func(c *container) { c.config.Mounts = mounts }
}

// WithImage sets the image the container was made from (its config's,
// which ListContainers reports as its image and image ref, as the pods
// the agent makes name it by ID; default localhost/fake:test).
func WithImage(ref string) ContainerOption {
	return func(c *container) { c.config.Image = &runtimeapi.ImageSpec{Image: ref} }
}

// AddContainer adds a container in the given state to a sandbox and returns
// its ID. A running container is started now; an exited one exits now with
// code 0.
func (r *Runtime) AddContainer(sandboxID, name string, state runtimeapi.ContainerState, opts ...ContainerOption) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	c := &container{
		id:        r.newID("c"),
		sandboxID: sandboxID,
		config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: "localhost/fake:test"},
		},
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: now,
	}
	for _, opt := range opts {
		opt(c)
	}
	r.containers[c.id] = c
	r.changedLocked()
	r.transitionLocked(c, state, 0)
	return c.id
}

// SetContainerState moves a container to state; exitCode applies when it
// exits. Times are set as a runtime would.
func (r *Runtime) SetContainerState(id string, state runtimeapi.ContainerState, exitCode int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("no container %s", id)
	}
	r.transitionLocked(c, state, exitCode)
	return nil
}

// DeleteContainer removes a container without a CRI call.
func (r *Runtime) DeleteContainer(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok {
		closeLogLocked(c)
	}
	delete(r.containers, id)
	r.changedLocked()
}

// DeleteSandbox removes a sandbox and its containers without a CRI call.
func (r *Runtime) DeleteSandbox(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeSandboxLocked(id)
}

func (r *Runtime) transitionLocked(c *container, state runtimeapi.ContainerState, exitCode int32) {
	r.changedLocked()
	now := r.now()
	if state == runtimeapi.ContainerState_CONTAINER_RUNNING && c.state != state {
		c.startedAt = now
	}
	if state == runtimeapi.ContainerState_CONTAINER_EXITED && c.state != state {
		if c.startedAt.IsZero() {
			c.startedAt = now
		}
		c.finishedAt = now
		c.exitCode = exitCode
		c.reason = "Completed"
		if exitCode != 0 {
			c.reason = "Error"
		}
		closeLogLocked(c)
	}
	c.state = state
}

func (r *Runtime) removeSandboxLocked(id string) {
	r.changedLocked()
	delete(r.sandboxes, id)
	for cid, c := range r.containers {
		if c.sandboxID == id {
			closeLogLocked(c)
			delete(r.containers, cid)
		}
	}
}

// SetSandboxImage sets the sandbox image the runtime's verbose Status
// reports, as containerd's CRI config's sandboxImage ("": none).
func (r *Runtime) SetSandboxImage(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxImg = ref
}

// --- CRI RuntimeService ---

// Status reports the runtime ready; verbose adds containerd's CRI config
// with its sandboxImage (SetSandboxImage).
func (r *Runtime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}}
	if req.GetVerbose() {
		config, err := json.Marshal(map[string]any{"sandboxImage": r.sandboxImg})
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.Info = map[string]string{"config": string(config)}
	}
	return resp, nil
}

func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "0.0.0", RuntimeApiVersion: "v1"}, nil
}

func (r *Runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	md := req.GetConfig().GetMetadata()
	id := r.AddSandbox(md.GetNamespace(), md.GetName(), md.GetUid())
	r.mu.Lock()
	r.sandboxes[id].config = req.GetConfig()
	r.changedLocked()
	r.mu.Unlock()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (r *Runtime) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[req.GetPodSandboxId()]
	if !ok {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	for _, c := range r.containers {
		if c.sandboxID == s.id && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.transitionLocked(c, runtimeapi.ContainerState_CONTAINER_EXITED, 137)
		}
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	r.changedLocked()
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *Runtime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[req.GetPodSandboxId()]; !ok {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	r.removeSandboxLocked(req.GetPodSandboxId())
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[req.GetPodSandboxId()]
	if !ok {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:          s.id,
		Metadata:    s.config.GetMetadata(),
		State:       s.state,
		CreatedAt:   s.createdAt.UnixNano(),
		Labels:      s.config.GetLabels(),
		Annotations: s.config.GetAnnotations(),
		Network:     &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip, AdditionalIps: podIPs(s.moreIPs)},
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.GetVerbose() {
		fields := map[string]any{"config": s.config}
		if s.netns != "" {
			fields["runtimeSpec"] = map[string]any{"linux": map[string]any{"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "network", "path": s.netns},
			}}}
		}
		info, err := verboseInfo(fields)
		if err != nil {
			return nil, err
		}
		resp.Info = info
	}
	return resp, nil
}

func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cacheListings && req.GetFilter() == nil {
		resp, err := r.cachedListingLocked("ListPodSandbox", func() proto.Message { return r.listPodSandboxLocked(nil) })
		if err != nil {
			return nil, err
		}
		return resp.(*runtimeapi.ListPodSandboxResponse), nil
	}
	return r.listPodSandboxLocked(req.GetFilter()), nil
}

func (r *Runtime) listPodSandboxLocked(f *runtimeapi.PodSandboxFilter) *runtimeapi.ListPodSandboxResponse {
	items := make([]*runtimeapi.PodSandbox, 0, len(r.sandboxes))
	for _, s := range r.sandboxes {
		if f.GetId() != "" && f.GetId() != s.id ||
			f.GetState() != nil && f.GetState().GetState() != s.state ||
			!labelsMatch(f.GetLabelSelector(), s.config.GetLabels()) {
			continue
		}
		items = append(items, &runtimeapi.PodSandbox{
			Id:          s.id,
			Metadata:    s.config.GetMetadata(),
			State:       s.state,
			CreatedAt:   s.createdAt.UnixNano(),
			Labels:      s.config.GetLabels(),
			Annotations: s.config.GetAnnotations(),
		})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}
}

func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[req.GetPodSandboxId()]; !ok {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	c := &container{
		id:        r.newID("c"),
		sandboxID: req.GetPodSandboxId(),
		config:    req.GetConfig(),
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: r.now(),
	}
	r.containers[c.id] = c
	r.changedLocked()
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

func (r *Runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is in %s state", c.id, c.state)
	}
	r.transitionLocked(c, runtimeapi.ContainerState_CONTAINER_RUNNING, 0)
	return &runtimeapi.StartContainerResponse{}, nil
}

func (r *Runtime) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	r.stops[c.id] = req.GetTimeout()
	if r.onStop != nil {
		r.onStop(c.id)
		r.changedLocked()
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.transitionLocked(c, runtimeapi.ContainerState_CONTAINER_EXITED, 137)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *Runtime) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	closeLogLocked(c)
	delete(r.containers, req.GetContainerId())
	r.changedLocked()
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cacheListings && req.GetFilter() == nil {
		resp, err := r.cachedListingLocked("ListContainers", func() proto.Message { return r.listContainersLocked(nil) })
		if err != nil {
			return nil, err
		}
		return resp.(*runtimeapi.ListContainersResponse), nil
	}
	return r.listContainersLocked(req.GetFilter()), nil
}

func (r *Runtime) listContainersLocked(f *runtimeapi.ContainerFilter) *runtimeapi.ListContainersResponse {
	out := make([]*runtimeapi.Container, 0, len(r.containers))
	for _, c := range r.containers {
		if f.GetId() != "" && f.GetId() != c.id ||
			f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.sandboxID ||
			f.GetState() != nil && f.GetState().GetState() != c.state ||
			!labelsMatch(f.GetLabelSelector(), c.config.GetLabels()) {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandboxID,
			Metadata:     c.config.GetMetadata(),
			Image:        c.config.GetImage(),
			ImageRef:     c.config.GetImage().GetImage(),
			State:        c.state,
			CreatedAt:    c.createdAt.UnixNano(),
			Labels:       c.config.GetLabels(),
			Annotations:  c.config.GetAnnotations(),
		})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}
}

func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	st := &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.config.GetMetadata(),
		State:       c.state,
		CreatedAt:   c.createdAt.UnixNano(),
		StartedAt:   nanos(c.startedAt),
		FinishedAt:  nanos(c.finishedAt),
		ExitCode:    c.exitCode,
		Image:       c.config.GetImage(),
		ImageRef:    c.config.GetImage().GetImage(),
		Reason:      c.reason,
		Labels:      c.config.GetLabels(),
		Annotations: c.config.GetAnnotations(),
		Mounts:      c.config.GetMounts(),
	}
	// As containerd reports it: joined to the sandbox's log directory.
	st.LogPath = r.logPathLocked(c)
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.GetVerbose() {
		info, err := verboseInfo(map[string]any{"sandboxID": c.sandboxID, "config": c.config})
		if err != nil {
			return nil, err
		}
		resp.Info = info
	}
	return resp, nil
}

func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	r.mu.Lock()
	c, ok := r.containers[req.GetContainerId()]
	running := ok && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING
	handler := r.exec
	r.mu.Unlock()
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	if !running {
		return nil, status.Errorf(codes.Unknown, "container %s is not running", req.GetContainerId())
	}
	if handler == nil {
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	return handler(ctx, req.GetContainerId(), req.GetCmd(), time.Duration(req.GetTimeout())*time.Second)
}

// verboseInfo renders a verbose status the way containerd does: one JSON
// document under the key "info" (the original config, the sandbox ID).
func verboseInfo(v map[string]any) (map[string]string, error) {
	info, err := json.Marshal(v)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return map[string]string{"info": string(info)}, nil
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func podIPs(ips []string) []*runtimeapi.PodIP {
	var out []*runtimeapi.PodIP
	for _, ip := range ips {
		out = append(out, &runtimeapi.PodIP{Ip: ip})
	}
	return out
}
