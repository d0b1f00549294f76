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
// same command through the same socket, on real containerd. make bench runs
// it; the target is the runner within 5 % of the bare call.
func BenchmarkExecProbe(b *testing.B) {
	c := dial(b)
	p := runPod(b, c, "bench-exec")
	id := p.start("app", "sleep", "3600")
	runner, err := crexec.NewRunner(c)
	require.NoError(b, err)
	cmd := []string{"true"}

	b.Run("bare-ExecSync", func(b *testing.B) {
		for b.Loop() {
			resp, err := c.ExecSync(b.Context(), id, cmd, 10*time.Second)
			require.NoError(b, err)
			require.Zero(b, resp.GetExitCode())
		}
	})
	b.Run("runner", func(b *testing.B) {
		for b.Loop() {
			res, err := runner.Run(b.Context(), id, cmd, 10*time.Second)
			require.NoError(b, err)
			require.Zero(b, res.ExitCode)
		}
	})
}
