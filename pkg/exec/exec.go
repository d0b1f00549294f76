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
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Runner runs commands in containers, at most a set number at once: each
// exec makes the runtime start a process through runc (tens of ms of CPU in
// containerd and the shim), and hundreds at once would starve the node.
// Commands beyond the limit wait their turn; the wait does not count against
// their timeout, so a probe's outcome is the same as without the limit.
type Runner struct {
	runtime ExecSyncer
	slots   chan struct{} // nil: no limit
	metrics *metrics
}

// Option configures NewRunner.
type Option func(*Runner) error

// WithConcurrency runs at most n commands at once (n > 0).
func WithConcurrency(n int) Option {
	return func(r *Runner) error {
		if n <= 0 {
			return fmt.Errorf("exec concurrency must be positive, got %d", n)
		}
		r.slots = make(chan struct{}, n)
		return nil
	}
}

// WithRegisterer exports the runner's metrics to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Runner) error { return r.metrics.register(reg) }
}

// DefaultConcurrency is a limit fitting the machine: two per core.
func DefaultConcurrency() int { return max(2, 2*runtime.NumCPU()) }

// NewRunner returns a runner using rt, without a limit unless one is given.
func NewRunner(rt ExecSyncer, opts ...Option) (*Runner, error) {
	r := &Runner{runtime: rt, metrics: newMetrics()}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Run runs cmd in the container with the given timeout. A non-zero exit and
// a timeout are results; an error means the command could not be run at
// all (container gone or not running, runtime unreachable, or ctx ended
// while it waited for its turn).
func (r *Runner) Run(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, error) {
	if r.slots != nil {
		queued := time.Now()
		r.metrics.waiting.Inc()
		select {
		case r.slots <- struct{}{}:
			r.metrics.waiting.Dec()
		case <-ctx.Done():
			r.metrics.waiting.Dec()
			return Result{}, fmt.Errorf("waiting for an exec slot: %w", ctx.Err())
		}
		r.metrics.queueWait.Observe(time.Since(queued).Seconds())
		defer func() { <-r.slots }()
	}
	r.metrics.inFlight.Inc()
	defer r.metrics.inFlight.Dec()
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
