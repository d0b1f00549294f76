package exec

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// A runtime whose ExecSync never answers (a wedged shim, a command that
// ignores its timeout) costs each probe its call until the probe's timeout
// plus the runtime request timeout (kubelet's 2 minutes; 1 s here), and
// nothing afterwards: the call is cancelled, the probe gets an error (the
// runtime's fault, not the container's), and no goroutine or fd is left
// behind.
func TestHangingExecEndsAtItsDeadline(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "pod", "uid")
	id := rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.SetExecHandler(func(ctx context.Context, _ string, _ []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		<-ctx.Done() // only the caller's deadline ends it
		return nil, ctx.Err()
	})
	client, err := cri.Dial(context.Background(), rt.Endpoint(), cri.WithRuntimeRequestTimeout(time.Second))
	require.NoError(t, err)
	defer client.Close()
	r, err := NewRunner(client, Config{})
	require.NoError(t, err)

	// Warm the connection so the baseline includes its goroutines and fd.
	_, err = client.Version(context.Background())
	require.NoError(t, err)
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			res, err := r.Run(context.Background(), "pod", id, []string{"sh", "-c", "sleep 3600"}, time.Second)
			assert.ErrorContains(t, err, "the runtime did not answer within 2s")
			assert.False(t, res.TimedOut, "a runtime that never answers is not the command's timeout")
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		return runtime.NumGoroutine() <= goroutines+2 && openFDs(t) <= fds
	}, 10*time.Second, 10*time.Millisecond, "leak: %d goroutines (was %d), %d fds (was %d)", runtime.NumGoroutine(), goroutines, openFDs(t), fds)
}
