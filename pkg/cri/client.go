package cri

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// DefaultEndpoint is containerd's CRI socket, as crictl defaults to it.
	DefaultEndpoint = "unix:///run/containerd/containerd.sock"
	// EndpointEnv names the variable crictl reads the endpoint from.
	EndpointEnv = "CONTAINER_RUNTIME_ENDPOINT"

	defaultConnectTimeout = 5 * time.Second
	defaultCallTimeout    = 30 * time.Second
	// DefaultRuntimeRequestTimeout is kubelet's --runtime-request-timeout,
	// which kubelet adds to an exec's own timeout for its client-side
	// deadline: the runtime's answer decides (containerd 1.6 answers a
	// command that left a child holding stdout only once the child is done,
	// containerd#7832, and kubelet waits for that answer).
	DefaultRuntimeRequestTimeout = 2 * time.Minute
	// maxMsgSize matches kubelet's CRI client: verbose status replies carry
	// the whole OCI spec.
	maxMsgSize = 16 << 20
	// DefaultMaxExecReply bounds an ExecSync reply, which carries whatever a
	// probe command printed (containerd 1.6 caps each stream at 16 MiB, and
	// kubelet keeps 10 KiB of it): gRPC refuses a longer reply from its
	// length prefix, before reading it, so a chatty command costs the agent
	// at most this much (kubelet allows 16 MiB).
	DefaultMaxExecReply = 256 << 10
	// maxHeaderListSize bounds a reply's headers and trailers, where an
	// error's message travels: a runtime's error can quote what a workload
	// printed (runc's stderr), and gRPC's default would take 16 MiB of it.
	// A longer one fails the call.
	maxHeaderListSize = 64 << 10
	// Reconnection after the runtime went away, as kubelet's CRI client
	// sets it: gRPC's default backoff grows to 120 s, so a containerd
	// restarted after a minute's outage would be noticed up to two minutes
	// late; kubelet retries from 100 ms up to every 3 s.
	reconnectBaseDelay = 100 * time.Millisecond
	reconnectMaxDelay  = 3 * time.Second
)

// Client is a CRI v1 RuntimeService and ImageService client with a deadline
// on every call that has no longer natural one and errors classified at
// this boundary (IsNotFound, ErrCommandTimedOut). Both services are served
// on the one connection, as containerd serves them on its socket (kubelet's
// imageServiceEndpoint defaults to the runtime's).
type Client struct {
	endpoint       string
	socket         string
	conn           *grpc.ClientConn
	runtime        runtimeapi.RuntimeServiceClient
	images         runtimeapi.ImageServiceClient
	callTimeout    time.Duration
	requestTimeout time.Duration // added to an exec's timeout
	maxExecReply   int
	version        *runtimeapi.VersionResponse
}

// Option configures Dial.
type Option func(*dialOptions) error

type dialOptions struct {
	connectTimeout time.Duration
	callTimeout    time.Duration
	requestTimeout time.Duration
	maxExecReply   int
	interceptors   []grpc.UnaryClientInterceptor
}

// WithConnectTimeout bounds connecting and the initial Version check.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *dialOptions) error {
		if d <= 0 {
			return fmt.Errorf("connect timeout must be positive, got %s", d)
		}
		o.connectTimeout = d
		return nil
	}
}

// WithCallTimeout bounds every CRI call that has no longer natural deadline
// (ExecSync and StopContainer add their own timeouts to it).
func WithCallTimeout(d time.Duration) Option {
	return func(o *dialOptions) error {
		if d <= 0 {
			return fmt.Errorf("call timeout must be positive, got %s", d)
		}
		o.callTimeout = d
		return nil
	}
}

// WithRuntimeRequestTimeout replaces kubelet's 2 minutes added to an exec's
// own timeout for the client-side deadline (tests shorten it).
func WithRuntimeRequestTimeout(d time.Duration) Option {
	return func(o *dialOptions) error {
		if d <= 0 {
			return fmt.Errorf("runtime request timeout must be positive, got %s", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithMaxExecReply replaces DefaultMaxExecReply (kubelet's limit is
// 16 MiB, the CRI connection's message size).
func WithMaxExecReply(bytes int) Option {
	return func(o *dialOptions) error {
		if bytes < 1<<10 || bytes > maxMsgSize {
			return fmt.Errorf("exec reply limit must be between 1KiB and 16MiB, got %d bytes", bytes)
		}
		o.maxExecReply = bytes
		return nil
	}
}

// WithUnaryInterceptor observes every CRI call (metrics, call counting).
func WithUnaryInterceptor(i grpc.UnaryClientInterceptor) Option {
	return func(o *dialOptions) error {
		o.interceptors = append(o.interceptors, i)
		return nil
	}
}

// SocketPath returns the filesystem path of a unix endpoint. It accepts
// "unix:///path" and, as crictl does, a bare absolute path.
func SocketPath(endpoint string) (string, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path := strings.TrimPrefix(endpoint, "unix://")
		if path == "" {
			return "", fmt.Errorf("runtime endpoint %q has no socket path; use unix:///path/to/socket", endpoint)
		}
		return path, nil
	case strings.HasPrefix(endpoint, "/"):
		return endpoint, nil
	default:
		return "", fmt.Errorf("runtime endpoint %q is not supported; use unix:///path/to/socket", endpoint)
	}
}

// Dial connects to the CRI runtime at endpoint and checks that it serves the
// CRI v1 API. Each way of failing (no socket, nobody listening, no access, no
// CRI v1) gives one line that names the endpoint and what to check.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	o := dialOptions{}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.connectTimeout == 0 {
		o.connectTimeout = defaultConnectTimeout
	}
	if o.callTimeout == 0 {
		o.callTimeout = defaultCallTimeout
	}
	if o.requestTimeout == 0 {
		o.requestTimeout = DefaultRuntimeRequestTimeout
	}
	if o.maxExecReply == 0 {
		o.maxExecReply = DefaultMaxExecReply
	}

	socket, err := SocketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if err := checkSocket(endpoint, socket, o.connectTimeout); err != nil {
		return nil, err
	}

	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		grpc.WithMaxHeaderListSize(maxHeaderListSize),
		grpc.WithChainUnaryInterceptor(o.interceptors...),
		grpc.WithConnectParams(reconnectParams(o.connectTimeout)),
	)
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", endpoint, err)
	}
	c := &Client{
		endpoint:    endpoint,
		socket:      socket,
		conn:        conn,
		runtime:     runtimeapi.NewRuntimeServiceClient(conn),
		images:      runtimeapi.NewImageServiceClient(conn),
		callTimeout: o.callTimeout, requestTimeout: o.requestTimeout,
		maxExecReply: o.maxExecReply,
	}

	vctx, cancel := context.WithTimeout(ctx, o.connectTimeout)
	defer cancel()
	c.version, err = c.runtime.Version(vctx, &runtimeapi.VersionRequest{})
	if err != nil {
		conn.Close()
		return nil, versionError(endpoint, o.connectTimeout, err)
	}
	return c, nil
}

func reconnectParams(connectTimeout time.Duration) grpc.ConnectParams {
	p := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: connectTimeout}
	p.Backoff.BaseDelay = reconnectBaseDelay
	p.Backoff.MaxDelay = reconnectMaxDelay
	return p
}

// checkSocket dials the socket once before gRPC does, because gRPC hides the
// errno behind a generic "connection error" and retries silently.
func checkSocket(endpoint, socket string, timeout time.Duration) error {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err == nil {
		return conn.Close()
	}
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("runtime endpoint %s: socket %s does not exist; is the container runtime running? Point --runtime-endpoint or %s at its CRI socket", endpoint, socket, EndpointEnv)
	case errors.Is(err, syscall.ECONNREFUSED) && !isSocket(socket):
		return fmt.Errorf("runtime endpoint %s: %s is not a socket; point --runtime-endpoint at the runtime's CRI socket", endpoint, socket)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("runtime endpoint %s: connection refused; the socket exists but nothing listens on it (a runtime that stopped?); start the runtime or point --runtime-endpoint elsewhere", endpoint)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("runtime endpoint %s: permission denied on %s; run as root or as a user allowed to use the socket", endpoint, socket)
	default:
		return fmt.Errorf("runtime endpoint %s: %w", endpoint, err)
	}
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

func versionError(endpoint string, timeout time.Duration, err error) error {
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Errorf("runtime endpoint %s does not serve the CRI v1 API (runtime.v1.RuntimeService); for containerd use 1.6 or newer and check that the CRI plugin is not in disabled_plugins: %s", endpoint, status.Convert(err).Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("runtime endpoint %s did not answer a CRI Version request within %s; is the runtime overloaded or hung?", endpoint, timeout)
	default:
		return fmt.Errorf("runtime endpoint %s: CRI Version request failed: %w", endpoint, err)
	}
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Endpoint returns the endpoint this client was dialled with.
func (c *Client) Endpoint() string { return c.endpoint }

// RequestTimeout is the bound of one CRI request (--runtime-request-timeout).
func (c *Client) RequestTimeout() time.Duration { return c.requestTimeout }

// Socket returns the filesystem path of the runtime socket.
func (c *Client) Socket() string { return c.socket }

// RuntimeName returns the runtime's name ("containerd", "cri-o", …) as it
// reported it to the Version check.
func (c *Client) RuntimeName() string { return c.version.GetRuntimeName() }

// RuntimeVersion returns the runtime's own version string.
func (c *Client) RuntimeVersion() string { return c.version.GetRuntimeVersion() }

// Version asks the runtime for its version again; useful as a liveness check
// of the runtime itself.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	return resp.GetItems(), nil
}

// PodSandboxStatus returns a sandbox's status; verbose adds the runtime's
// info map (containerd: the original config, netns path, pid).
func (c *Client) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("pod sandbox status %s: %w", id, err)
	}
	return resp, nil
}

// ListContainers lists containers matching filter (nil: all).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return resp.GetContainers(), nil
}

// ContainerStatus returns a container's status; verbose adds the runtime's
// info map (containerd: the original CRI config, sandbox ID, pid).
func (c *Client) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("container status %s: %w", id, err)
	}
	return resp, nil
}

// ExecSync runs cmd in the container and waits for it, as kubelet's CRI
// client does: the runtime gets the timeout in whole seconds (truncated) and
// the call's deadline is the runtime request timeout plus the timeout, so a
// runtime that is slow to answer does not turn into a timeout here. Only
// the runtime's own DeadlineExceeded answer means the command timed out
// (ErrCommandTimedOut, kubelet's wording), however late it comes (see
// noAnswer). If the runtime does not answer
// by our deadline the call is cancelled (gRPC closes the stream; nothing is
// left running here) and the error says the runtime did not answer: a probe
// error, never a failure of the container. A reply longer than the exec
// reply limit is refused unread (ErrExecReplyTooLarge). A non-zero exit is
// not an error (see the response's ExitCode).
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	deadline := c.requestTimeout + timeout
	start := time.Now()
	execCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	resp, err := c.runtime.ExecSync(execCtx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds())},
		grpc.MaxCallRecvMsgSize(c.maxExecReply))
	switch {
	case err == nil:
		return resp, nil
	case status.Code(err) == codes.ResourceExhausted:
		return nil, fmt.Errorf("exec in container %s: %w (%d bytes; the command's output is kept to 10KiB anyway: make it quieter or raise --max-exec-reply-bytes): %s",
			containerID, ErrExecReplyTooLarge, c.maxExecReply, status.Convert(err).Message())
	case ctx.Err() == nil && noAnswer(err, errors.Is(execCtx.Err(), context.DeadlineExceeded), time.Since(start), deadline, c.requestTimeout):
		return nil, fmt.Errorf("exec in container %s: the runtime did not answer within %s (runtime request timeout %s plus the probe's timeout): %w", containerID, deadline, c.requestTimeout, err)
	case status.Code(err) == codes.DeadlineExceeded:
		return nil, fmt.Errorf("%w: %q timed out after %s", ErrCommandTimedOut, strings.Join(cmd, " "), timeout)
	default:
		return nil, fmt.Errorf("exec in container %s: %w", containerID, err)
	}
}

// noAnswer reports whether an ExecSync that failed with err after elapsed
// ran out of our own deadline (the runtime request timeout plus the
// command's) with no answer, rather than being answered by the runtime.
// The runtime's own DeadlineExceeded is its answer whenever it comes: a
// command whose background child holds its output open is answered only
// once the child exits (containerd 1.6), and kubelet counts that as the
// probe's timeout. A DeadlineExceeded at our deadline, or within a tenth
// of the request timeout (at most 1 s) of it, is the server's copy of
// our deadline (gRPC propagates it and the server's may fire first).
func noAnswer(err error, ownDeadlinePassed bool, elapsed, deadline, requestTimeout time.Duration) bool {
	if ownDeadlinePassed {
		return true
	}
	return status.Code(err) == codes.DeadlineExceeded && elapsed >= deadline-min(time.Second, requestTimeout/10)
}

// RunInContainer runs cmd in the container with no time limit but ctx's,
// as kubelet runs lifecycle hook commands (ExecSync with timeout 0). A
// non-zero exit is not an error (see the response's ExitCode).
func (c *Client) RunInContainer(ctx context.Context, containerID string, cmd []string) (*runtimeapi.ExecSyncResponse, error) {
	resp, err := c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", containerID, err)
	}
	return resp, nil
}

// StopContainer stops a container, giving it gracePeriod seconds after the
// stop signal before it is killed. A container that is already gone counts
// as stopped.
func (c *Client) StopContainer(ctx context.Context, id string, gracePeriod int64) error {
	// Saturate rather than overflow: an overflowed deadline is already past.
	wait := time.Duration(math.MaxInt64)
	if gracePeriod < int64((wait-c.callTimeout)/time.Second) {
		wait = c.callTimeout + time.Duration(gracePeriod)*time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: gracePeriod})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// RemoveContainer removes a container; one already gone counts as removed.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	_, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// CreateContainer creates a container in a sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sandboxID,
		Config:        config,
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		return "", fmt.Errorf("create container %s in sandbox %s: %w", config.GetMetadata().GetName(), sandboxID, err)
	}
	return resp.GetContainerId(), nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	if _, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	return nil
}

// RunPodSandbox creates and starts a sandbox (network included) and returns
// its ID. runtimeHandler "" selects the runtime's default.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	resp, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", fmt.Errorf("run pod sandbox %s/%s: %w", config.GetMetadata().GetNamespace(), config.GetMetadata().GetName(), err)
	}
	return resp.GetPodSandboxId(), nil
}

// StopPodSandbox stops every container of a sandbox and the sandbox itself
// and tears down its network; one already gone counts as stopped.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	return nil
}

// RemovePodSandbox removes a sandbox and its containers; one already gone
// counts as removed.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	_, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove pod sandbox %s: %w", id, err)
	}
	return nil
}

// ReopenContainerLog asks the runtime to reopen a running container's log
// file at its log path (a new file, once the old one was renamed away):
// kubelet's log rotation calls it after renaming the current file.
func (c *Client) ReopenContainerLog(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	if _, err := c.runtime.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("reopen container log %s: %w", id, err)
	}
	return nil
}
