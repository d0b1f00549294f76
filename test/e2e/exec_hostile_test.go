//go:build e2e

package e2e

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/exec"
)

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// Contract (issue 7): exec probe commands that print megabytes or never
// exit, on the real containerd. Output is kept to kubelet's 10 KiB;
// containerd caps each stream at 16 MiB and the CRI client, as kubelet's,
// accepts 16 MiB replies, so a command printing more is an error (kubelet's
// "probe errored", the result unchanged), never a memory blow-up. Each ends
// within its timeout and leaves no goroutine or heap behind.
func TestExecProbeHostileCommands(t *testing.T) {
	c := dial(t)
	p := runPod(t, c, "hostile-exec")
	id := p.start("app", "sleep", "3600")
	runner, err := exec.NewRunner(c, exec.WithConcurrency(2))
	require.NoError(t, err)

	tests := []struct {
		name    string
		cmd     string
		timeout time.Duration
		want    exec.Result
		wantErr string
	}{
		{name: "2 MB on stdout, exit 1", cmd: "head -c 2000000 /dev/zero | tr '\\0' x; exit 1", timeout: 10 * time.Second,
			want: exec.Result{ExitCode: 1}},
		{name: "2 MB on each stream, exit 0", cmd: "head -c 2000000 /dev/zero | tr '\\0' x; head -c 2000000 /dev/zero | tr '\\0' y >&2", timeout: 10 * time.Second,
			want: exec.Result{}},
		{name: "40 MB on stdout", cmd: "head -c 40000000 /dev/zero | tr '\\0' x; exit 1", timeout: 20 * time.Second,
			wantErr: "ResourceExhausted"}, // containerd cannot send it: its reply limit is 16 MiB too
		{name: "never exits", cmd: "sleep 1000", timeout: time.Second,
			want: exec.Result{TimedOut: true}},
		{name: "endless output, never exits", cmd: "yes", timeout: 2 * time.Second,
			want: exec.Result{TimedOut: true}},
	}
	heap0, goroutines0 := heapMiB(), runtime.NumGoroutine()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := runner.Run(t.Context(), id, []string{"sh", "-c", tt.cmd}, tt.timeout)
			took := time.Since(start)
			t.Logf("%v: exit %d, %d bytes kept, timed out %v, err %v", took.Round(time.Millisecond), res.ExitCode, len(res.Output), res.TimedOut, err)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want.ExitCode, res.ExitCode)
				assert.Equal(t, tt.want.TimedOut, res.TimedOut)
				if !res.TimedOut {
					assert.Len(t, res.Output, exec.MaxOutput, "kubelet's 10 KiB")
				}
			}
			assert.Less(t, took, tt.timeout+5*time.Second, "ends with its timeout")
			assert.Less(t, heapMiB(), heap0+8, "the output is not kept")
		})
	}
	eventually(t, 10*time.Second, "goroutines back", func() bool { return runtime.NumGoroutine() <= goroutines0+2 })
}
