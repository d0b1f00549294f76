// Package exec runs probe commands in containers through CRI ExecSync: the
// deadline arithmetic lives in pkg/cri; here the output is bounded and a
// timeout becomes a result, not an error, as kubelet's exec prober does
// since ExecProbeTimeout went GA; an optional per-pod limit bounds how many
// commands of one pod run at once.
//
// The meaning of a result (exit 0 is success, a timeout is a failure) is
// decided by the prober, not here.
package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	// command that timed out, kubelet's message (`command timed out: "…"
	// timed out after 1s`).
	Output   string
	TimedOut bool
	// Queued is how long the command waited for a slot under the per-pod
	// limit (0 without one).
	Queued time.Duration
}

// Runner runs commands in containers. By default it runs every command at
// once, as kubelet does: no probe ever waits behind another container's.
// With a per-pod limit, at most that many commands of one pod run at once
// and the pod's others wait their turn (the wait does not count against
// their timeout); other pods are never held up by it.
type Runner struct {
	runtime ExecSyncer
	perPod  int // 0: no limit
	metrics *metrics

	mu    sync.Mutex
	slots map[string]*podSlots
}

// podSlots is one pod's semaphore, dropped when nothing holds or awaits it.
type podSlots struct {
	ch    chan struct{}
	users int
}

// Config is how commands are run. Zero values are the defaults.
type Config struct {
	// PerPodConcurrency bounds the commands of one pod run at once (0: no
	// limit, kubelet's way; --max-concurrent-exec-per-pod).
	PerPodConcurrency int
}

// Option configures NewRunner.
type Option func(*Runner) error

// WithRegisterer exports the runner's metrics to reg (nil: not exported).
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Runner) error {
		if reg == nil {
			return nil
		}
		return r.metrics.register(reg)
	}
}

// NewRunner returns a runner using rt, as cfg says.
func NewRunner(rt ExecSyncer, cfg Config, opts ...Option) (*Runner, error) {
	if cfg.PerPodConcurrency < 0 {
		return nil, fmt.Errorf("exec concurrency per pod must be positive, or 0 for no limit, got %d", cfg.PerPodConcurrency)
	}
	r := &Runner{runtime: rt, perPod: cfg.PerPodConcurrency, metrics: newMetrics(), slots: map[string]*podSlots{}}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Run runs cmd in a container of pod with the given timeout. A non-zero exit
// and a timeout are results; an error means the command could not be run at
// all (container gone or not running, runtime unreachable or hung, or ctx
// ended while it waited for its turn).
func (r *Runner) Run(ctx context.Context, pod, containerID string, cmd []string, timeout time.Duration) (Result, error) {
	var queued time.Duration
	if r.perPod > 0 {
		release, waited, err := r.acquire(ctx, pod)
		if err != nil {
			return Result{}, err
		}
		defer release()
		queued = waited
	}
	r.metrics.inFlight.Inc()
	defer r.metrics.inFlight.Dec()
	resp, err := r.runtime.ExecSync(ctx, containerID, cmd, timeout)
	switch {
	case errors.Is(err, cri.ErrCommandTimedOut):
		return Result{TimedOut: true, Output: err.Error(), Queued: queued}, nil
	case err != nil:
		return Result{}, err
	}
	return Result{ExitCode: resp.GetExitCode(), Output: capOutput(resp.GetStdout(), resp.GetStderr()), Queued: queued}, nil
}

// acquire takes one of pod's slots, waiting for it if need be.
func (r *Runner) acquire(ctx context.Context, pod string) (release func(), waited time.Duration, err error) {
	r.mu.Lock()
	s, ok := r.slots[pod]
	if !ok {
		s = &podSlots{ch: make(chan struct{}, r.perPod)}
		r.slots[pod] = s
	}
	s.users++
	r.mu.Unlock()
	done := func() {
		r.mu.Lock()
		if s.users--; s.users == 0 {
			delete(r.slots, pod)
		}
		r.mu.Unlock()
	}
	start := time.Now()
	select {
	case s.ch <- struct{}{}:
	default:
		r.metrics.waiting.Inc()
		select {
		case s.ch <- struct{}{}:
			r.metrics.waiting.Dec()
		case <-ctx.Done():
			r.metrics.waiting.Dec()
			done()
			return nil, 0, fmt.Errorf("waiting for an exec slot of the pod: %w", ctx.Err())
		}
	}
	waited = time.Since(start)
	r.metrics.queueWait.Observe(waited.Seconds())
	return func() { <-s.ch; done() }, waited, nil
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
