//go:build e2e

// Package e2e runs cri-prober against a real containerd started by
// hack/containerd-up.sh (make test-e2e does all of it). It talks to the
// runtime only through CRI, as kubelet and crictl do.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

func dial(t testing.TB) *cri.Client {
	t.Helper()
	c, err := cri.Dial(t.Context(), endpoint)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
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
		// fails the sandbox stop ("failed to kill container"): try again,
		// as kubelet does.
		poll := time.NewTicker(100 * time.Millisecond)
		defer poll.Stop()
		err := c.StopPodSandbox(ctx, id)
		for err != nil && ctx.Err() == nil {
			<-poll.C
			err = c.StopPodSandbox(ctx, id)
		}
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := c.RemovePodSandbox(ctx, id); err != nil {
			t.Errorf("cleanup: %v", err)
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
