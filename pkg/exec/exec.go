// Package exec runs probe commands in containers through CRI ExecSync: the
// deadline arithmetic lives in pkg/cri; here the output is bounded and a
// timeout becomes a result, not an error, as kubelet's exec prober does
// since ExecProbeTimeout went GA.
//
// The meaning of a result (exit 0 is success, a timeout is a failure) is
// decided by the prober, not here.
package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// MaxOutput is how much of a command's output is kept: kubelet's
// maxReadLength, stdout first, then stderr.
const MaxOutput = 10 * 1024

// ExecSyncer runs a command in a container and waits for it.
type ExecSyncer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

var _ ExecSyncer = (*cri.Client)(nil)

// Result is what a command did.
type Result struct {
	ExitCode int32
	// Output is stdout followed by stderr, at most MaxOutput bytes; for a
	// command that timed out, kubelet's message `command "…" timed out`.
	Output   string
	TimedOut bool
}

// Runner runs commands in containers.
type Runner struct {
	runtime ExecSyncer
}

// NewRunner returns a runner using runtime.
func NewRunner(runtime ExecSyncer) *Runner { return &Runner{runtime: runtime} }

// Run runs cmd in the container with the given timeout. A non-zero exit and
// a timeout are results; an error means the command could not be run at
// all (container gone or not running, runtime unreachable).
func (r *Runner) Run(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, error) {
	resp, err := r.runtime.ExecSync(ctx, containerID, cmd, timeout)
	switch {
	case errors.Is(err, cri.ErrCommandTimedOut):
		return Result{TimedOut: true, Output: fmt.Sprintf("command %q timed out", strings.Join(cmd, " "))}, nil
	case err != nil:
		return Result{}, err
	}
	return Result{ExitCode: resp.GetExitCode(), Output: capOutput(resp.GetStdout(), resp.GetStderr())}, nil
}

func capOutput(stdout, stderr []byte) string {
	var b strings.Builder
	for _, part := range [][]byte{stdout, stderr} {
		room := MaxOutput - b.Len()
		if room <= 0 {
			break
		}
		b.Write(part[:min(len(part), room)])
	}
	return b.String()
}
