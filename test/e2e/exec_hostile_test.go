//go:build e2e

package e2e

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/exec"
)

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// Contract (issues 7 and 13): exec probe commands that print megabytes or
// never exit, on the real containerd. Output is kept to kubelet's 10 KiB.
// What a command prints enters the agent as one ExecSync reply: gRPC
// refuses a reply over --max-exec-reply-bytes (256 KiB) from its length
// prefix, unread, so a chatty command is a probe error (the result
// unchanged), never a memory blow-up; with kubelet's 16 MiB limit the same
// command is judged by its exit code, as kubelet judges it. Each ends
// within its timeout and leaves no goroutine or heap behind.
func TestExecProbeHostileCommands(t *testing.T) {
	c := dial(t)
	kubeletLimit := dial(t, cri.WithMaxExecReply(16<<20))
	p := runPod(t, c, "hostile-exec")
	id := p.start("app", "sleep", "3600")
	runner, err := exec.NewRunner(c, exec.Config{})
	require.NoError(t, err)
	kubeletRunner, err := exec.NewRunner(kubeletLimit, exec.Config{})
	require.NoError(t, err)

	tests := []struct {
		name    string
		runner  *exec.Runner
		cmd     string
		timeout time.Duration
		want    exec.Result
		wantErr error
	}{
		{name: "200 KB on stdout, exit 1", runner: runner, cmd: "head -c 200000 /dev/zero | tr '\\0' x; exit 1", timeout: 10 * time.Second,
			want: exec.Result{ExitCode: 1}},
		{name: "2 MB on stdout", runner: runner, cmd: "head -c 2000000 /dev/zero | tr '\\0' x; exit 1", timeout: 10 * time.Second,
			wantErr: cri.ErrExecReplyTooLarge},
		{name: "2 MB on stdout, kubelet's limit", runner: kubeletRunner, cmd: "head -c 2000000 /dev/zero | tr '\\0' x; exit 1", timeout: 10 * time.Second,
			want: exec.Result{ExitCode: 1}},
		{name: "2 MB on each stream, kubelet's limit", runner: kubeletRunner, cmd: "head -c 2000000 /dev/zero | tr '\\0' x; head -c 2000000 /dev/zero | tr '\\0' y >&2", timeout: 10 * time.Second,
			want: exec.Result{}},
		{name: "40 MB on stdout", runner: runner, cmd: "head -c 40000000 /dev/zero | tr '\\0' x; exit 1", timeout: 20 * time.Second,
			wantErr: cri.ErrExecReplyTooLarge},
		{name: "never exits", runner: runner, cmd: "sleep 1000", timeout: time.Second,
			want: exec.Result{TimedOut: true}},
		{name: "endless output, never exits", runner: runner, cmd: "yes", timeout: 2 * time.Second,
			want: exec.Result{TimedOut: true}},
	}
	heap0, goroutines0 := heapMiB(), runtime.NumGoroutine()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := tt.runner.Run(t.Context(), "pod", id, []string{"sh", "-c", tt.cmd}, tt.timeout)
			took := time.Since(start)
			t.Logf("%v: exit %d, %d bytes kept, timed out %v, err %v", took.Round(time.Millisecond), res.ExitCode, len(res.Output), res.TimedOut, err)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Less(t, len(err.Error()), 1024, "the error is short")
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
