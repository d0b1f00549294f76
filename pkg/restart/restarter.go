// Package restart is the agent's pod sync: for every pod it manages it
// decides what to do as kubelet's computePodActions does (a pure step over
// the pod's view and the probes' results, see actions.go) and carries it
// out through CRI — kill containers that failed a liveness or startup
// probe (preStop first, kubelet's grace periods), start again containers
// and sidecars per their restart policies with kubelet's CrashLoopBackOff
// (postStart after), and stop the whole pod when nothing of it is left to
// run.
//
// Lifecycle of one container, as the restarter drives it:
//
//	running ──probe failure──► kill (preStop, StopContainer) ──► exited
//	   ▲                                                           │
//	   │                          restart policy says no ◄─────────┤
//	   │                                                           ▼
//	postStart ◄── start ◄── create (attempt+1) ◄── back-off wait (CrashLoopBackOff)
//	   │
//	   └──failed──► kill ──► exited (back-off)
//
// An interruption (the agent killed) between create and start leaves a
// created replacement marked cri-prober.io/restart-of: the next agent
// starts it, or removes it if the instance it replaces still runs.
package restart

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Runtime is what the restarter does through CRI.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ContainerConfig(ctx context.Context, id string) (*runtimeapi.ContainerConfig, error)
	SandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error)
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
}

var _ Runtime = (*cri.Client)(nil)

// HookRunner runs postStart and preStop handlers (lifecycle.Runner).
type HookRunner interface {
	Run(ctx context.Context, h *corev1.LifecycleHandler, t lifecycle.Target) (string, error)
}

// Starting is told which instance the restarter is bringing up, so that
// until its start (postStart included) is over its predecessor stays the
// container's current one (pods.Resolver).
type Starting interface {
	SetStarting(i pods.Instance, starting bool)
}

// Recorder receives the restarter's events.
type Recorder interface {
	Record(events.Event)
}

// Mode says how far the restarter goes.
type Mode string

const (
	// Recreate stops failed containers and re-creates them per policy.
	Recreate Mode = "recreate"
	// StopOnly stops failed containers and never re-creates anything.
	StopOnly Mode = "stop"
	// Observe touches nothing and tells what it would do: safe beside a
	// kubelet.
	Observe Mode = "none"
)

// ParseMode parses a --restart value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Recreate, StopOnly, Observe:
		return m, nil
	default:
		return "", fmt.Errorf("restart mode %q: want recreate, stop or none", s)
	}
}

// Event reasons: kubelet's where kubelet has them.
const (
	ReasonKilling             = "Killing"
	ReasonCreated             = "Created"
	ReasonStarted             = "Started"
	ReasonBackOff             = "BackOff"
	ReasonFailedPreStopHook   = "FailedPreStopHook"
	ReasonFailedPostStartHook = "FailedPostStartHook"
	ReasonHTTPFallback        = "LifecycleHTTPFallback"
	ReasonFailed              = "FailedRestart"
	ReasonWouldKill           = "WouldKill"
	ReasonStoppingPod         = "StoppingPod"
	ReasonAbandoned           = "AbandonedRestart"
	WaitingCrashLoop          = "CrashLoopBackOff"
)

const (
	backoffRetryJitter  = 0.5
	failedActionBackoff = 5 * time.Second
	// exitSettle is how long after an exit the restarter waits before
	// restarting, and then checks that the sandbox is still ready: someone
	// stopping the pod (crictl stopp) kills its containers first and its
	// sandbox a moment later, and must not find them restarted. kubelet
	// sees exits only at its 1 s relist, so this is still sooner.
	exitSettle = 250 * time.Millisecond
)

// Restarter is the agent's pod sync. Create it with New and run it with
// Run.
type Restarter struct {
	runtime   Runtime
	hooks     HookRunner
	starting  Starting
	results   *results.Store
	histories *results.Histories
	recorder  Recorder
	clock     clock.WithTicker
	mode      Mode
	backoff   *Backoff
	jitter    func() float64
	metrics   *metrics
	ledger    *Ledger // nil: none kept

	view     atomic.Pointer[pods.View]
	configs  sync.Map // sandbox ID → *runtimeapi.PodSandboxConfig
	syncDone func()

	waitingMu sync.Mutex
	waiting   map[containerKey]Waiting

	// Owned by Run.
	workers map[string]*podWorker
	wg      sync.WaitGroup
}

// containerKey names a container of a pod across its instances.
type containerKey struct {
	pod       string // pods.Pod.Key
	container string
}

// Waiting says why a container is not running and until when.
type Waiting struct {
	Reason string
	Until  time.Time
}

// Option configures New.
type Option func(*Restarter) error

// WithMode sets the mode (default Recreate).
func WithMode(m Mode) Option { return func(r *Restarter) error { r.mode = m; return nil } }

// WithClock replaces the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(r *Restarter) error { r.clock = c; return nil }
}

// WithRecorder receives the events (default: logged).
func WithRecorder(rec Recorder) Option {
	return func(r *Restarter) error { r.recorder = rec; return nil }
}

// WithBackoff replaces kubelet's 10 s / 300 s back-off.
func WithBackoff(initial, max time.Duration) Option {
	return func(r *Restarter) error {
		if initial <= 0 || max < initial {
			return fmt.Errorf("back-off: want 0 < initial <= max, got %s and %s", initial, max)
		}
		r.backoff = NewBackoff(initial, max)
		return nil
	}
}

// WithLedger records every restart and why in l.
func WithLedger(l *Ledger) Option { return func(r *Restarter) error { r.ledger = l; return nil } }

// WithHistories reads the failures behind a restart from hs (the prober's).
func WithHistories(hs *results.Histories) Option {
	return func(r *Restarter) error { r.histories = hs; return nil }
}

// WithStarting tells s which instances are being started (the resolver).
func WithStarting(s Starting) Option { return func(r *Restarter) error { r.starting = s; return nil } }

// withJitter replaces the random source (tests).
func withJitter(f func() float64) Option {
	return func(r *Restarter) error { r.jitter = f; return nil }
}

// withSyncDone is told after each pass over a pod (tests wait on it to
// assert that a pass did nothing).
func withSyncDone(f func()) Option {
	return func(r *Restarter) error { r.syncDone = f; return nil }
}

// New returns a restarter acting through runtime, running lifecycle hooks
// with hooks, driven by the results in store.
func New(runtime Runtime, hooks HookRunner, store *results.Store, opts ...Option) (*Restarter, error) {
	r := &Restarter{
		runtime: runtime,
		hooks:   hooks,
		results: store,
		mode:    Recreate,
		jitter:  rand.Float64,
		waiting: map[containerKey]Waiting{},
		workers: map[string]*podWorker{},
	}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, err
		}
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.backoff == nil {
		r.backoff = NewBackoff(DefaultInitialBackoff, DefaultMaxBackoff)
	}
	if r.metrics == nil {
		r.metrics = newMetrics(nil)
	}
	if r.histories == nil {
		r.histories = results.NewHistories()
	}
	if r.starting == nil {
		r.starting = noStarting{}
	}
	r.view.Store(pods.Resolve(nil, pods.Inputs{}))
	return r, nil
}

type noStarting struct{}

func (noStarting) SetStarting(pods.Instance, bool) {}

// Waiting returns why a managed container is waiting (CrashLoopBackOff).
func (r *Restarter) Waiting(podKey, container string) (Waiting, bool) {
	r.waitingMu.Lock()
	defer r.waitingMu.Unlock()
	w, ok := r.waiting[containerKey{podKey, container}]
	return w, ok
}

func (r *Restarter) setWaiting(key containerKey, w *Waiting) {
	r.waitingMu.Lock()
	defer r.waitingMu.Unlock()
	if w == nil {
		delete(r.waiting, key)
	} else {
		r.waiting[key] = *w
	}
}

// podWorker serialises the decisions for one pod, as kubelet's pod workers
// do; a slow stop of one pod's container never delays another pod.
type podWorker struct {
	key     string
	trigger chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	// Owned by the worker's goroutine, each keyed by container ID and
	// pruned to the instances the view still has.
	acted    map[string]bool  // instances the restarter killed
	reported map[string]bool  // instances whose back-off was reported
	pending  map[string]Entry // ledger entries of kills whose restart waits
}

// Run acts on new views and on probe results until ctx is done; then it
// stops its pod workers (an action in progress is cancelled) and waits for
// them.
func (r *Restarter) Run(ctx context.Context, changes *pods.Subscription) {
	if r.recorder == nil {
		r.recorder = events.Log(klog.FromContext(ctx))
	}
	updates := r.results.Subscribe()
	defer updates.Close()
	defer r.stopAll()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Ready():
			b := changes.Next()
			r.view.Store(b.View)
			for _, key := range b.Changed {
				if _, ok := b.View.Pod(key); !ok {
					r.forget(key)
					continue
				}
				r.trigger(ctx, key)
			}
		case <-updates.Ready():
			for _, u := range updates.Next() {
				if u.Type != results.Readiness && u.Result == results.Failure {
					r.trigger(ctx, u.PodUID)
				}
			}
		}
	}
}

// forget stops a gone pod's worker and drops everything kept about it.
func (r *Restarter) forget(key string) {
	if w, ok := r.workers[key]; ok {
		w.cancel()
		delete(r.workers, key)
	}
	r.backoff.ForgetPod(key)
	r.metrics.forget(key)
	r.waitingMu.Lock()
	for k := range r.waiting {
		if k.pod == key {
			delete(r.waiting, k)
		}
	}
	r.waitingMu.Unlock()
	v := r.view.Load()
	r.configs.Range(func(id, _ any) bool {
		if !sandboxInView(v, id.(string)) {
			r.configs.Delete(id)
		}
		return true
	})
}

func sandboxInView(v *pods.View, id string) bool {
	for _, p := range v.Pods() {
		for _, sb := range p.Sandboxes {
			if sb.ID == id {
				return true
			}
		}
	}
	return false
}

func (r *Restarter) trigger(ctx context.Context, key string) {
	w, ok := r.workers[key]
	if !ok {
		wctx, cancel := context.WithCancel(ctx)
		w = &podWorker{key: key, trigger: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
			acted: map[string]bool{}, reported: map[string]bool{}, pending: map[string]Entry{}}
		r.workers[key] = w
		r.wg.Go(func() {
			defer close(w.done)
			r.runWorker(wctx, w)
		})
	}
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

func (r *Restarter) runWorker(ctx context.Context, w *podWorker) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.trigger:
		case <-retry:
		}
		retry = nil
		if d := r.syncPod(ctx, w); d > 0 {
			retry = r.clock.After(d)
		}
		if r.syncDone != nil {
			r.syncDone()
		}
	}
}

func (r *Restarter) stopAll() {
	for _, w := range r.workers {
		w.cancel()
	}
	r.wg.Wait()
}

func (r *Restarter) eventf(p *pods.Pod, container, eventType, reason, format string, args ...any) {
	r.recorder.Record(events.Event{
		Time:      r.clock.Now(),
		Type:      eventType,
		Reason:    reason,
		Namespace: p.Namespace,
		Pod:       p.Name,
		Container: container,
		Message:   fmt.Sprintf(format, args...),
	})
}
