//go:build e2e

// Package e2e runs cri-prober against a real containerd started by
// hack/containerd-up.sh (make test-e2e does all of it). It talks to the
// runtime only through CRI, as kubelet and crictl do. Every test shares
// that one containerd; those that call parallel(t) run side by side, each
// seeing only its own pods.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

const (
	testNamespace = "cri-prober-e2e"
	busyboxImage  = "localhost/busybox:test"
	targetImage   = "localhost/target:test"
)

var (
	endpoint   = os.Getenv("CRI_PROBER_E2E_ENDPOINT")
	podSubnet  = os.Getenv("CRI_PROBER_E2E_SUBNET")
	binaryPath = os.Getenv("CRI_PROBER_E2E_BINARY")
)

func TestMain(m *testing.M) {
	if endpoint == "" || podSubnet == "" {
		fmt.Fprintln(os.Stderr, "e2e tests need a private containerd: run `make test-e2e` (sets CRI_PROBER_E2E_ENDPOINT and CRI_PROBER_E2E_SUBNET)")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// parallel runs t beside the other parallel tests, once every serial test
// is done (go test -parallel), and scopes the test's clients (dial) to the
// pods made through them, by the test or by an agent the test runs in
// process on one: an agent manages every pod it lists, and so never
// probes, restarts or reports another test's pods, as if the node were
// the test's alone. A test stays serial (no parallel call) if it runs an
// agent as a process that takes specs from annotations (it lists the
// whole node, and would probe and restart other tests' pods), stops
// containerd, measures the test process (goroutines, heap), or asserts how
// soon something happens, which other tests' load can delay.
func parallel(t *testing.T) {
	scopes.Lock()
	scopes.byTest[t.Name()] = &testScope{sandboxes: map[string]bool{}}
	scopes.Unlock()
	t.Parallel()
}

// dial connects to the shared containerd (opts added); in a parallel test,
// as its own client (see parallel).
func dial(t testing.TB, opts ...cri.Option) *cri.Client {
	t.Helper()
	if s := scopeOf(t); s != nil {
		opts = append(opts, cri.WithUnaryInterceptor(s.intercept))
	}
	return dialNode(t, opts...)
}

// dialNode connects to the shared containerd, seeing the whole node.
func dialNode(t testing.TB, opts ...cri.Option) *cri.Client {
	t.Helper()
	c, err := cri.Dial(t.Context(), endpoint, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// testScope is the sandboxes made through one parallel test's clients.
type testScope struct {
	mu        sync.Mutex
	sandboxes map[string]bool
}

var scopes = struct {
	sync.Mutex
	byTest map[string]*testScope // by top-level test
}{byTest: map[string]*testScope{}}

// scopeOf is the scope of t's top-level test, shared by its subtests; nil
// for a serial test.
func scopeOf(t testing.TB) *testScope {
	test, _, _ := strings.Cut(t.Name(), "/")
	scopes.Lock()
	defer scopes.Unlock()
	return scopes.byTest[test]
}

func (s *testScope) has(sandboxID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[sandboxID]
}

// intercept records the sandboxes RunPodSandbox makes and leaves every
// other sandbox, and its containers, out of ListPodSandbox and
// ListContainers.
func (s *testScope) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case runtimeapi.RuntimeService_RunPodSandbox_FullMethodName:
		if err := invoke(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		s.mu.Lock()
		s.sandboxes[reply.(*runtimeapi.RunPodSandboxResponse).GetPodSandboxId()] = true
		s.mu.Unlock()
		return nil
	case runtimeapi.RuntimeService_ListPodSandbox_FullMethodName:
		var resp runtimeapi.ListPodSandboxResponse
		return listScoped(ctx, method, req, reply, cc, invoke, opts, &resp, func() {
			resp.Items = slices.DeleteFunc(resp.Items, func(sb *runtimeapi.PodSandbox) bool { return !s.has(sb.GetId()) })
		})
	case runtimeapi.RuntimeService_ListContainers_FullMethodName:
		var resp runtimeapi.ListContainersResponse
		return listScoped(ctx, method, req, reply, cc, invoke, opts, &resp, func() {
			resp.Containers = slices.DeleteFunc(resp.Containers, func(c *runtimeapi.Container) bool { return !s.has(c.GetPodSandboxId()) })
		})
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

// listScoped makes a list call into resp, removes what is out of scope
// (keep), and answers reply with the rest. The poller asks for a listing
// undecoded (a codec of pkg/cri that keeps the bytes): the call is made
// decoded and the rest handed to that codec as the reply's bytes.
func listScoped(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts []grpc.CallOption, resp proto.Message, keep func()) error {
	var undecoded encoding.CodecV2
	decoded := make([]grpc.CallOption, 0, len(opts))
	for _, o := range opts {
		if f, ok := o.(grpc.ForceCodecV2CallOption); ok {
			undecoded = f.CodecV2
			continue
		}
		decoded = append(decoded, o)
	}
	if err := invoke(ctx, method, req, resp, cc, decoded...); err != nil {
		return err
	}
	keep()
	if undecoded == nil {
		proto.Merge(reply.(proto.Message), resp)
		return nil
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		return err
	}
	return undecoded.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, reply)
}

// pod is a sandbox created for one test and removed when it ends.
type pod struct {
	t      testing.TB
	client *cri.Client
	id     string
	config *runtimeapi.PodSandboxConfig
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// runPod starts a sandbox named after prefix in the e2e namespace; it is
// stopped and removed (network included) when the test ends, pass or fail.
func runPod(t testing.TB, c *cri.Client, prefix string) *pod {
	t.Helper()
	return runPodNamed(t, c, uniqueName(prefix), nil)
}

// runPodNamed starts a sandbox with this exact name and annotations.
func runPodNamed(t testing.TB, c *cri.Client, name string, annotations map[string]string) *pod {
	t.Helper()
	return runPodWithUID(t, c, name, uniqueName("uid"), annotations)
}

// runPodWithUID starts a sandbox with this exact name, UID and annotations.
func runPodWithUID(t testing.TB, c *cri.Client, name, uid string, annotations map[string]string) *pod {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Namespace: testNamespace, Name: name, Uid: uid},
		Hostname:    name,
		Linux:       &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: kubeletNamespaces()}},
		Annotations: annotations,
	}
	id, err := c.RunPodSandbox(t.Context(), cfg, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		// t.Context is already cancelled in cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The agent may be killing or re-creating a container of this pod
		// right now (its test just made a probe fail), and containerd then
		// fails the sandbox stop ("failed to kill container") or removal
		// (a container still starting: "failed to set removing state"):
		// try again, as kubelet does.
		poll := time.NewTicker(100 * time.Millisecond)
		defer poll.Stop()
		for _, step := range []func(context.Context, string) error{c.StopPodSandbox, c.RemovePodSandbox} {
			err := step(ctx, id)
			for err != nil && ctx.Err() == nil {
				<-poll.C
				err = step(ctx, id)
			}
			if err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return &pod{t: t, client: c, id: id, config: cfg}
}

// start creates and starts a busybox container running argv.
func (p *pod) start(name string, argv ...string) string {
	p.t.Helper()
	return p.startContainer(container{name: name, image: busyboxImage, command: argv})
}

// container describes a container to start.
type container struct {
	name        string
	image       string
	command     []string
	annotations map[string]string
}

func (p *pod) startContainer(c container) string {
	p.t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.name},
		Image:       &runtimeapi.ImageSpec{Image: c.image},
		Command:     c.command,
		Annotations: c.annotations,
		Linux:       &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: kubeletNamespaces()}},
	}
	id, err := p.client.CreateContainer(p.t.Context(), p.id, cfg, p.config)
	require.NoError(p.t, err)
	require.NoError(p.t, p.client.StartContainer(p.t.Context(), id))
	return id
}

// exec runs a command in a container and requires it to succeed.
func (p *pod) exec(id string, argv ...string) {
	p.t.Helper()
	resp, err := p.client.ExecSync(p.t.Context(), id, argv, 10*time.Second)
	require.NoError(p.t, err)
	require.Zero(p.t, resp.GetExitCode(), "%v: %s%s", argv, resp.GetStdout(), resp.GetStderr())
}

// kubeletNamespaces are the namespaces kubelet gives a pod's containers:
// the pod's network and IPC, and a PID namespace each, so that a
// container's command is its PID 1 (which ignores SIGTERM unless it
// handles it). CRI's zero value would share the sandbox's PID namespace.
func kubeletNamespaces() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// inSubnet reports whether ip lies in the CNI bridge's subnet.
func inSubnet(t *testing.T, ip string) bool {
	t.Helper()
	_, subnet, err := net.ParseCIDR(podSubnet)
	require.NoError(t, err)
	parsed := net.ParseIP(ip)
	return parsed != nil && subnet.Contains(parsed)
}

// eventually polls cond every 50 ms until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, timeout, 50*time.Millisecond, what)
}

// diesWithTheTest makes cmd killed when the test binary dies (SIGKILL to
// its parent: a timeout, Ctrl-C, a killed CI job), whose cleanups then
// never run: a long-running child (an agent, Prometheus) must not outlive
// it. Returns cmd.
func diesWithTheTest(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}
