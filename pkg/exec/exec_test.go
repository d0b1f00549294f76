package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// fakeExec answers ExecSync with a canned response or error.
type fakeExec struct {
	resp *runtimeapi.ExecSyncResponse
	err  error
	got  []string
	tmo  time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.got, f.tmo = cmd, timeout
	return f.resp, f.err
}

func TestRun(t *testing.T) {
	big := strings.Repeat("o", MaxOutput+100)
	tests := []struct {
		name    string
		fake    fakeExec
		want    Result
		wantErr bool
	}{
		{name: "exit 0", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("ok\n")}}, want: Result{Output: "ok\n"}},
		{name: "non-zero exit keeps output", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("out "), Stderr: []byte("err"), ExitCode: 2}}, want: Result{ExitCode: 2, Output: "out err"}},
		{name: "stdout then stderr, capped", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte(big), Stderr: []byte("lost")}}, want: Result{Output: big[:MaxOutput]}},
		{name: "stderr fills what stdout left", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte(big[:MaxOutput-2]), Stderr: []byte("abcd")}}, want: Result{Output: big[:MaxOutput-2] + "ab"}},
		{name: "timeout is a result, with kubelet's text", fake: fakeExec{err: fmt.Errorf("%w: %q timed out after 3s", cri.ErrCommandTimedOut, "sh -c sleep 10")},
			want: Result{TimedOut: true, Output: `command timed out: "sh -c sleep 10" timed out after 3s`}},
		{name: "other errors are errors", fake: fakeExec{err: errors.New("container not running")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRunner(&tt.fake, Config{})
			require.NoError(t, err)
			got, err := r.Run(context.Background(), "pod", "c1", []string{"sh", "-c", "sleep 10"}, 3*time.Second)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, 3*time.Second, tt.fake.tmo)
		})
	}
}

// blockingExec holds every command until released, counting how many run.
type blockingExec struct {
	mu      sync.Mutex
	running int
	most    int
	release chan struct{}
}

func (b *blockingExec) ExecSync(ctx context.Context, _ string, _ []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	b.mu.Lock()
	b.running++
	b.most = max(b.most, b.running)
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.running--; b.mu.Unlock() }()
	select {
	case <-b.release:
		return &runtimeapi.ExecSyncResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// By default every command runs at once, as kubelet runs them: no probe
// waits behind another's.
func TestNoLimitByDefault(t *testing.T) {
	fake := &blockingExec{release: make(chan struct{})}
	r, err := NewRunner(fake, Config{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := r.Run(context.Background(), fmt.Sprintf("pod-%d", i%2), "c", []string{"x"}, time.Second)
			assert.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.metrics.inFlight) == 20 }, 5*time.Second, time.Millisecond, "all twenty at once")
	close(fake.release)
	wg.Wait()
}

// The per-pod limit holds a pod's own commands back, never another pod's:
// a pod whose probes all hang cannot delay the next pod's liveness.
func TestPerPodLimit(t *testing.T) {
	fake := &blockingExec{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	r, err := NewRunner(fake, Config{PerPodConcurrency: 2}, WithRegisterer(reg))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			res, err := r.Run(context.Background(), "slow", "c", []string{"x"}, time.Second)
			assert.NoError(t, err)
			_ = res
		})
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.metrics.waiting) == 3 }, 5*time.Second, time.Millisecond,
		"three of the slow pod wait while two run")
	other := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), "other", "c", []string{"x"}, time.Second)
		other <- err
	}()
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.metrics.inFlight) == 3 }, 5*time.Second, time.Millisecond,
		"another pod's command runs at once")
	close(fake.release)
	wg.Wait()
	require.NoError(t, <-other)
	assert.Equal(t, 3, fake.most)
	assert.Zero(t, testutil.ToFloat64(r.metrics.waiting))
	r.mu.Lock()
	assert.Empty(t, r.slots, "a pod's slots go when nothing uses them")
	r.mu.Unlock()
}

func TestWaitingForASlotEndsWithTheContext(t *testing.T) {
	fake := &blockingExec{release: make(chan struct{})}
	defer close(fake.release)
	r, err := NewRunner(fake, Config{PerPodConcurrency: 1})
	require.NoError(t, err)
	go r.Run(context.Background(), "pod", "c", []string{"hog"}, time.Second)
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.metrics.inFlight) == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.Run(ctx, "pod", "c", []string{"x"}, time.Second)
	assert.ErrorContains(t, err, "waiting for an exec slot of the pod: context canceled")
}

func TestBadConcurrency(t *testing.T) {
	_, err := NewRunner(&fakeExec{}, Config{PerPodConcurrency: -1})
	assert.ErrorContains(t, err, "exec concurrency per pod must be positive")
}
