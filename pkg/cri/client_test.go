package cri_test

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestDialErrorsSayWhatToCheck(t *testing.T) {
	dir := shortTempDir(t)

	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	regular := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(regular, nil, 0o600))

	noCRI := filepath.Join(dir, "nocri.sock")
	l, err = net.Listen("unix", noCRI)
	require.NoError(t, err)
	srv := grpc.NewServer() // serves no CRI service at all
	go srv.Serve(l)
	t.Cleanup(srv.Stop)

	tests := []struct {
		name     string
		endpoint string
		want     []string
	}{
		{"missing socket", "unix://" + filepath.Join(dir, "none.sock"), []string{"does not exist", "is the container runtime running", "CONTAINER_RUNTIME_ENDPOINT"}},
		{"nobody listening", "unix://" + stale, []string{"connection refused", "nothing listens"}},
		{"not a socket", "unix://" + regular, []string{"is not a socket"}},
		{"no CRI v1", "unix://" + noCRI, []string{"does not serve the CRI v1 API", "disabled_plugins"}},
		{"unsupported scheme", "tcp://127.0.0.1:1234", []string{"not supported", "unix:///path/to/socket"}},
		{"empty path", "unix://", []string{"no socket path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cri.Dial(context.Background(), tt.endpoint, cri.WithConnectTimeout(2*time.Second))
			require.Error(t, err)
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one line")
			if tt.name != "unsupported scheme" && tt.name != "empty path" {
				assert.Contains(t, msg, tt.endpoint, "names the endpoint")
			}
			for _, w := range tt.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

func TestDialAcceptsBarePath(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	path, err := cri.SocketPath(rt.Endpoint())
	require.NoError(t, err)
	c, err := cri.Dial(context.Background(), path)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "fake", c.RuntimeName())
	assert.Equal(t, path, c.Socket())
}

func TestDialRejectsBadOptions(t *testing.T) {
	_, err := cri.Dial(context.Background(), "unix:///x", cri.WithCallTimeout(0))
	assert.ErrorContains(t, err, "call timeout must be positive")
	_, err = cri.Dial(context.Background(), "unix:///x", cri.WithConnectTimeout(-time.Second))
	assert.ErrorContains(t, err, "connect timeout must be positive")
}

func TestClientCalls(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	c := dialFake(t, rt)
	ctx := context.Background()

	sb, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "ns", Name: "p", Uid: "u"},
	}, "")
	require.NoError(t, err)
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}}
	id, err := c.CreateContainer(ctx, sb, cfg, nil)
	require.NoError(t, err)
	require.NoError(t, c.StartContainer(ctx, id))

	st, err := c.ContainerStatus(ctx, id, true)
	require.NoError(t, err)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.GetStatus().GetState())
	assert.Contains(t, st.GetInfo()["info"], `"sandboxID"`, "verbose status carries the original config")

	// A grace period past what a time.Duration holds must not overflow
	// into a deadline that has already passed.
	require.NoError(t, c.StopContainer(ctx, id, math.MaxInt64/int64(time.Second)+1)) // 292 years
	require.NoError(t, c.RemoveContainer(ctx, id))
	assert.NoError(t, c.StopContainer(ctx, id, 2), "stopping a removed container is not an error")
	assert.NoError(t, c.RemoveContainer(ctx, id), "removing twice is not an error")

	_, err = c.ContainerStatus(ctx, id, false)
	assert.True(t, cri.IsNotFound(err), "NotFound survives wrapping: %v", err)

	require.NoError(t, c.StopPodSandbox(ctx, sb))
	require.NoError(t, c.RemovePodSandbox(ctx, sb))
	assert.NoError(t, c.RemovePodSandbox(ctx, sb))
}

func TestExecSync(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	// A short runtime request timeout stands in for kubelet's 2 minutes.
	const requestTimeout = 500 * time.Millisecond
	c, err := cri.Dial(context.Background(), rt.Endpoint(), cri.WithRuntimeRequestTimeout(requestTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	id := rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)

	var mu sync.Mutex // the handler runs on the server's goroutines
	var gotTimeout, gotDeadline time.Duration
	rt.SetExecHandler(func(ctx context.Context, _ string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		if cmd[0] == "check" {
			mu.Lock()
			gotTimeout = timeout
			if d, ok := ctx.Deadline(); ok {
				gotDeadline = time.Until(d)
			}
			mu.Unlock()
		}
		switch cmd[0] {
		case "slow": // answers after the probe's timeout, before the request timeout
			select {
			case <-time.After(timeout + 100*time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &runtimeapi.ExecSyncResponse{ExitCode: 0}, nil
		case "sleep": // the runtime's own timeout, as containerd reports it
			return nil, status.Errorf(codes.DeadlineExceeded, "timeout %v exceeded", timeout)
		case "late": // the same, once a background child let go of the output
			select {
			case <-time.After(timeout + requestTimeout*7/10):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, status.Errorf(codes.DeadlineExceeded, "timeout %v exceeded", timeout)
		case "loud":
			return &runtimeapi.ExecSyncResponse{Stdout: make([]byte, cri.DefaultMaxExecReply)}, nil
		case "hang": // never answers
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), ExitCode: 3}, nil
	})

	resp, err := c.ExecSync(ctx, id, []string{"check"}, 1500*time.Millisecond)
	require.NoError(t, err, "a non-zero exit is not an error")
	assert.Equal(t, int32(3), resp.GetExitCode())
	mu.Lock()
	timeout, deadline := gotTimeout, gotDeadline
	mu.Unlock()
	assert.Equal(t, time.Second, timeout, "the CRI timeout is whole seconds, truncated as kubelet's int64(timeout.Seconds())")
	assert.Greater(t, deadline, 1500*time.Millisecond, "the call's deadline is the request timeout plus the probe's timeout")

	// A runtime answering after the probe's timeout (a command whose
	// background child kept stdout open) is not a timeout: kubelet waits.
	resp, err = c.ExecSync(ctx, id, []string{"slow"}, 100*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int32(0), resp.GetExitCode())

	_, err = c.ExecSync(ctx, id, []string{"sleep", "5"}, time.Second)
	assert.ErrorIs(t, err, cri.ErrCommandTimedOut)
	assert.EqualError(t, err, `command timed out: "sleep 5" timed out after 1s`, "kubelet 1.36's wording")

	// The runtime's timeout answered late (at 450 ms of a 600 ms deadline)
	// is still the command's timeout, as kubelet counts it.
	_, err = c.ExecSync(ctx, id, []string{"late"}, 100*time.Millisecond)
	assert.ErrorIs(t, err, cri.ErrCommandTimedOut)

	// The runtime never answers: our own deadline ends the call, and that
	// is the runtime's fault, not a timeout of the command.
	_, err = c.ExecSync(ctx, id, []string{"hang"}, 100*time.Millisecond)
	assert.NotErrorIs(t, err, cri.ErrCommandTimedOut)
	assert.ErrorContains(t, err, "the runtime did not answer within 600ms")

	// A reply over the limit is refused unread: the probe cannot be judged.
	_, err = c.ExecSync(ctx, id, []string{"loud"}, time.Second)
	assert.ErrorIs(t, err, cri.ErrExecReplyTooLarge)
	assert.NotErrorIs(t, err, cri.ErrCommandTimedOut)

	require.NoError(t, rt.SetContainerState(id, exited, 0))
	_, err = c.ExecSync(ctx, id, []string{"check"}, time.Second)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, cri.ErrCommandTimedOut, "a stopped container is an error, not a timeout")
}

func TestMetricsTimeCallsAndRelists(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := cri.NewMetrics(reg)
	require.NoError(t, err)
	rt := fakeruntime.NewForTest(t)
	c, err := cri.Dial(context.Background(), rt.Endpoint(), cri.WithMetrics(m))
	require.NoError(t, err)
	defer c.Close()
	p, err := cri.NewPoller(c, cri.PollerConfig{Metrics: m})
	require.NoError(t, err)
	_, err = p.Relist(context.Background())
	require.NoError(t, err)
	_, err = c.ContainerStatus(context.Background(), "missing", false)
	require.Error(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			key := f.GetName()
			for _, l := range metric.GetLabel() {
				key += " " + l.GetValue()
			}
			counts[key] = metric.GetHistogram().GetSampleCount()
		}
	}
	assert.Equal(t, map[string]uint64{
		// Labels come sorted by name: code, then method.
		"cri_prober_cri_request_duration_seconds NotFound ContainerStatus": 1,
		"cri_prober_cri_request_duration_seconds OK ListContainers":        1,
		"cri_prober_cri_request_duration_seconds OK ListPodSandbox":        1,
		"cri_prober_cri_request_duration_seconds OK Version":               1,
		"cri_prober_relist_duration_seconds":                               1,
	}, counts)
}
