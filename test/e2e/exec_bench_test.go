//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	crexec "github.com/cri-prober/cri-prober/pkg/exec"
)

// BenchmarkExecProbe compares an exec probe through cri-prober's runner
// (concurrency limit, metrics, output handling) with a bare ExecSync of the
// same command through the same socket, on real containerd. The two
// alternate within each iteration, so containerd's drift hits both alike;
// make bench reports runner-ns/op against bare-ns/op (target: within 5 %).
func BenchmarkExecProbe(b *testing.B) {
	c := dial(b)
	p := runPod(b, c, "bench-exec")
	id := p.start("app", "sleep", "3600")
	runner, err := crexec.NewRunner(c, crexec.Config{})
	require.NoError(b, err)
	cmd := []string{"true"}
	bare := func() {
		resp, err := c.ExecSync(b.Context(), id, cmd, 10*time.Second)
		require.NoError(b, err)
		require.Zero(b, resp.GetExitCode())
	}
	viaRunner := func() {
		res, err := runner.Run(b.Context(), "pod", id, cmd, 10*time.Second)
		require.NoError(b, err)
		require.Zero(b, res.ExitCode)
	}
	timed := func(f func()) time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}

	var bareTotal, runnerTotal time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 { // alternate which goes first
			bareTotal += timed(bare)
			runnerTotal += timed(viaRunner)
		} else {
			runnerTotal += timed(viaRunner)
			bareTotal += timed(bare)
		}
		n++
	}
	b.ReportMetric(float64(bareTotal.Nanoseconds())/float64(n), "bare-ns/op")
	b.ReportMetric(float64(runnerTotal.Nanoseconds())/float64(n), "runner-ns/op")
}
