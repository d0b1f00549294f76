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
	// execDeadlineMargin is added to an exec's own timeout for the client-side
	// deadline: containerd 1.6 can hold ExecSync open long past the timeout it
	// was given when the command leaves a child holding stdout
	// (containerd#7832, #9568), and a probe must not hang with it.
	execDeadlineMargin = time.Second
	// maxMsgSize matches kubelet's CRI client: verbose status replies carry
	// the whole OCI spec.
	maxMsgSize = 16 << 20
	// Reconnection after the runtime went away, as kubelet's CRI client
	// sets it: gRPC's default backoff grows to 120 s, so a containerd
	// restarted after a minute's outage would be noticed up to two minutes
	// late; kubelet retries from 100 ms up to every 3 s.
	reconnectBaseDelay = 100 * time.Millisecond
	reconnectMaxDelay  = 3 * time.Second
)

// Client is a CRI v1 RuntimeService client with a deadline on every call and
// errors classified at this boundary (IsNotFound, ErrCommandTimedOut).
type Client struct {
	endpoint    string
	socket      string
	conn        *grpc.ClientConn
	runtime     runtimeapi.RuntimeServiceClient
	callTimeout time.Duration
	version     *runtimeapi.VersionResponse
}

// Option configures Dial.
type Option func(*dialOptions) error

type dialOptions struct {
	connectTimeout time.Duration
	callTimeout    time.Duration
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
		callTimeout: o.callTimeout,
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

// ExecSync runs cmd in the container and waits for it. The runtime enforces
// timeout (rounded up to whole seconds, as the CRI field is seconds); the
// client gives up shortly after it in case the runtime does not. A command
// that runs out of time returns an error wrapping ErrCommandTimedOut; a
// runtime that stopped answering altogether returns another error (a probe
// error, discarded as kubelet discards them, where kubelet would count a
// probe failure against the container). A non-zero exit is not an error
// (see the response's ExitCode).
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	seconds := int64(math.Ceil(timeout.Seconds()))
	deadline := c.callTimeout
	if seconds > 0 {
		deadline = time.Duration(seconds)*time.Second + execDeadlineMargin
	}
	execCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	resp, err := c.runtime.ExecSync(execCtx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: seconds})
	switch {
	case err == nil:
		return resp, nil
	case ctx.Err() == nil && (errors.Is(execCtx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded):
		// Out of time: the command's (the runtime's own timeout), or our
		// margin's when the runtime did not answer (containerd#7832: a
		// child holding stdout). A hung runtime looks the same, and that
		// is not the container's failure: ask the runtime whether it
		// answers at all.
		if verr := c.ping(ctx); verr != nil {
			return nil, fmt.Errorf("exec in container %s: the runtime did not answer within %s and does not answer a Version request either: %w", containerID, deadline, verr)
		}
		return nil, fmt.Errorf("command %q timed out: %w", strings.Join(cmd, " "), ErrCommandTimedOut)
	case status.Code(err) == codes.DeadlineExceeded:
		return nil, fmt.Errorf("command %q timed out: %w", strings.Join(cmd, " "), ErrCommandTimedOut)
	default:
		return nil, fmt.Errorf("exec in container %s: %w", containerID, err)
	}
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

// pingTimeout bounds the Version request that tells a hung runtime from a
// slow command.
const pingTimeout = time.Second

func (c *Client) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	_, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// StopContainer stops a container, giving it gracePeriod seconds after the
// stop signal before it is killed. A container that is already gone counts
// as stopped.
func (c *Client) StopContainer(ctx context.Context, id string, gracePeriod int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout+time.Duration(gracePeriod)*time.Second)
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
