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
// Each sync of a pod is kubelet's: a pure step (plan.go, makePlan) turns
// the pod's view, the probes' results, the back-off state and the time
// into a complete plan, and the executor (execute.go) only carries it out
// through CRI. A sync acts only on a view of the runtime listed after the
// previous sync acted, so nothing is ever done twice.
//
// The pods' status (Status, a pods.Status: what the prober, the API and
// the hooks read) is kept apart from the syncs, in status.go, as kubelet's
// status manager is. While a sync acts, a pod's status stays as the sync
// found it, and it changes only once the runtime has been listed again:
// kubelet's status manager, which shows a replacement only after its
// start and postStart are over, and the instance it replaces running and
// ready until then (SyncPod kills, starts and runs postStart in one sync,
// with the status of the sync before). Config.NotReadyOnExit shows, beyond
// kubelet, an instance that exited meanwhile as exited, so not ready from
// its exit (heldStatus).
//
// An interruption (the agent killed) between create and start leaves a
// created instance: a static pod's is started by the next agent; a
// replacement in a pod someone else made is marked
// cri-prober.io/restart-of, and the next agent starts it, or removes it if
// the instance it replaces still runs.
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
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Runtime is what the restarter does through CRI.
type Runtime interface {
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ContainerConfig(ctx context.Context, id string) (*runtimeapi.ContainerConfig, error)
	SandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error)
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	RemovePodSandbox(ctx context.Context, id string) error
}

var _ Runtime = (*cri.Client)(nil)

// HookRunner runs postStart and preStop handlers (lifecycle.Runner).
type HookRunner interface {
	Run(ctx context.Context, h *corev1.LifecycleHandler, t lifecycle.Target) (string, error)
}

// Relister lists the runtime again on demand (cri.Poller): a sync waits
// for a listing that started after the previous sync acted.
type Relister interface {
	Trigger()
	Relists() uint64
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
	ReasonSandboxChanged      = "SandboxChanged"
	ReasonFailed              = "FailedRestart"
	ReasonWouldKill           = "WouldKill"
	ReasonStoppingPod         = "StoppingPod"
	ReasonAbandoned           = "AbandonedRestart"
	WaitingCrashLoop          = "CrashLoopBackOff"
)

const (
	backoffRetryJitter  = 0.5
	failedActionBackoff = 5 * time.Second
)

// Restarter is the agent's pod sync. Create it with New and run it with
// Run.
type Restarter struct {
	runtime   Runtime
	hooks     HookRunner
	relister  Relister // nil: the runtime is relisted by its own period only
	results   *results.Store
	histories *results.Histories
	recorder  Recorder
	clock     clock.WithTicker
	mode      Mode
	backoff   *Backoff[containerKey]
	// syncFrequency caps how long a pod waiting out a back-off goes
	// without a sync (kubelet's syncFrequency).
	syncFrequency time.Duration
	jitter        func() float64
	metrics       *metrics
	ledger        *ledger.Ledger // nil: none kept
	maker         Maker          // nil: static pods are not made
	logs          ContainerLogs  // nil: no links made, no log files removed
	budget        *killbudget.Budget

	configs sync.Map // sandbox ID → *runtimeapi.PodSandboxConfig
	// handled is the newest listing Run has handed on; busy counts the
	// syncs asked for or running: quiet reads them (tests).
	handled atomic.Uint64
	busy    atomic.Int64

	// latest is the newest view of the runtime (the resolver's).
	latest atomic.Pointer[pods.Subscription]
	// statusManager is the pods' status, published to readers (status.go,
	// see the package comment).
	statusManager

	// Owned by Run.
	workers map[string]*podWorker
	exited  chan *podWorker // a retiring worker ended
	wg      sync.WaitGroup
}

// containerKey names a container of a pod across its instances.
type containerKey struct {
	pod       string // pods.Pod.Key
	container string
}

// Config is what pod sync does, with kubelet's settings of it. Zero
// values are the defaults.
type Config struct {
	// Mode is how far pod sync goes ("": Recreate).
	Mode Mode
	// NotReadyOnExit shows, beyond kubelet, the exit of an instance of a
	// pod that a sync acts on (one killed to be restarted) as it happens:
	// the container is not ready from its exit until its replacement is,
	// instead of running and ready until the replacement's postStart ended
	// (heldStatus; --not-ready-on-exit).
	NotReadyOnExit bool
	// MaxContainerRestartPeriod is the longest restart back-off, as
	// kubelet's crashLoopBackOff.maxContainerRestartPeriod (1 s to 300 s,
	// NewCrashLoopBackoff; 0: DefaultMaxBackoff).
	MaxContainerRestartPeriod time.Duration
	// SyncFrequency is the longest a pod waiting out a back-off goes
	// without a sync: kubelet's syncFrequency, its pod workers' resync
	// interval, which caps their requeue at a back-off's expiry (at least
	// 1 s; 0: DefaultSyncFrequency).
	SyncFrequency time.Duration
}

// Option configures New: its optional dependencies, and knobs for tests.
type Option func(*Restarter) error

// WithClock replaces the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(r *Restarter) error { r.clock = c; return nil }
}

// WithRecorder receives the events (default: logged).
func WithRecorder(rec Recorder) Option {
	return func(r *Restarter) error { r.recorder = rec; return nil }
}

// WithBackoff replaces kubelet's 10 s / 300 s back-off by any initial and
// maximum delays (tests); entries still expire as kubelet's, 600 s after
// their last update.
func WithBackoff(initial, max time.Duration) Option {
	return func(r *Restarter) error {
		if initial <= 0 || max < initial {
			return fmt.Errorf("back-off: want 0 < initial <= max, got %s and %s", initial, max)
		}
		r.backoff = NewBackoff[containerKey](initial, max)
		r.backoff.expiry = crashLoopExpiry
		return nil
	}
}

// WithLedger records every restart and why in l.
func WithLedger(l *ledger.Ledger) Option {
	return func(r *Restarter) error { r.ledger = l; return nil }
}

// WithHistories reads the failures behind a restart from hs (the prober's).
func WithHistories(hs *results.Histories) Option {
	return func(r *Restarter) error { r.histories = hs; return nil }
}

// WithRelister asks rl for a listing of the runtime when a sync waits for
// one (the poller).
func WithRelister(rl Relister) Option {
	return func(r *Restarter) error { r.relister = rl; return nil }
}

// withJitter replaces the random source (tests).
func withJitter(f func() float64) Option {
	return func(r *Restarter) error { r.jitter = f; return nil }
}

// New returns a restarter acting through runtime, running lifecycle hooks
// with hooks, driven by the results in store, as cfg says.
func New(runtime Runtime, hooks HookRunner, store *results.Store, cfg Config, opts ...Option) (*Restarter, error) {
	r := &Restarter{
		runtime:       runtime,
		hooks:         hooks,
		results:       store,
		mode:          Recreate,
		jitter:        rand.Float64,
		syncFrequency: DefaultSyncFrequency,
		workers:       map[string]*podWorker{},
		exited:        make(chan *podWorker),
	}
	if err := r.configure(cfg); err != nil {
		return nil, err
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
		r.backoff, _ = NewCrashLoopBackoff[containerKey](DefaultMaxBackoff)
	}
	if r.metrics == nil {
		r.metrics = newMetrics(nil)
	}
	if r.histories == nil {
		r.histories = results.NewHistories()
	}
	if r.budget == nil {
		r.budget, _ = killbudget.New(killbudget.Config{}, "", killbudget.WithClock(r.clock))
	}
	r.statusManager.init(r.listedView)
	return r, nil
}

// configure applies cfg over the defaults.
func (r *Restarter) configure(cfg Config) error {
	if cfg.Mode != "" {
		r.mode = cfg.Mode
	}
	r.notReadyOnExit = cfg.NotReadyOnExit
	if cfg.MaxContainerRestartPeriod != 0 {
		var err error
		if r.backoff, err = NewCrashLoopBackoff[containerKey](cfg.MaxContainerRestartPeriod); err != nil {
			return err
		}
	}
	if cfg.SyncFrequency != 0 {
		if cfg.SyncFrequency < time.Second {
			return fmt.Errorf("sync frequency %s: want at least 1s", cfg.SyncFrequency)
		}
		r.syncFrequency = cfg.SyncFrequency
	}
	return nil
}

// Status returns the pods' status: the latest view of the runtime, but for
// a pod a sync acts on, the pod as that sync found it until the runtime
// shows the outcome; with what the pods' syncs add (each container's
// waiting reason, a reset, that the pod initialized).
func (r *Restarter) Status() *pods.Status { return r.status.Load() }

// Subscribe returns a subscription to the pods' status.
func (r *Restarter) Subscribe() *pods.Subscription { return r.publisher.Subscribe() }

// podWorker serialises the syncs of one pod, as kubelet's pod workers do;
// a slow stop of one pod's container never delays another pod.
type podWorker struct {
	key     string
	trigger chan struct{}
	cancel  context.CancelFunc
	state   *podState // owned by the worker's goroutine
	// needView: the next plan needs a view listed at or after this time
	// (an exit's settle time), set by the previous plan.
	needView time.Time
	// awaitingListing: the worker waits for a newer listing of the
	// runtime; Run wakes it at the next one.
	awaitingListing atomic.Bool
	// gone is closed when the pod left the view: the worker ends after its
	// sync in progress (retiring: owned by Run).
	gone     chan struct{}
	retiring bool
}

// Run acts on new views and on probe results until ctx is done; then it
// stops its pod workers (an action in progress is cancelled) and waits for
// them.
func (r *Restarter) Run(ctx context.Context, changes *pods.Subscription) {
	if r.recorder == nil {
		r.recorder = events.Log(klog.FromContext(ctx))
	}
	r.latest.Store(changes)
	updates := r.results.Subscribe()
	defer updates.Close()
	defer r.stopAll()
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-r.exited:
			if r.workers[w.key] == w {
				delete(r.workers, w.key)
				if _, back := r.latestView().Pod(w.key); back {
					r.trigger(ctx, w.key) // the pod came back meanwhile
				}
			}
		case <-changes.Ready():
			b := changes.Next()
			r.publishStatus(b.View, b.Changed)
			for _, key := range b.Changed {
				if _, ok := b.View.Pod(key); !ok {
					r.forget(key)
					continue
				}
				r.trigger(ctx, key)
			}
			r.handled.Store(b.View.Seq)
		case <-changes.Listed():
			// A listing that changed nothing still ends the holds made
			// before it, and wakes the syncs that wait for it.
			if v := changes.Latest(); v != nil {
				r.publishStatus(v, nil)
			}
			for key, w := range r.workers {
				if w.awaitingListing.Load() {
					r.trigger(ctx, key)
				}
			}
			if v := changes.Latest(); v != nil {
				r.handled.Store(v.Seq)
			}
		case <-r.budget.Resumed():
			// Resumed: the kills that waited go ahead if still due.
			for _, key := range r.budget.DeferredPods() {
				r.trigger(ctx, key)
			}
		case <-updates.Ready():
			for _, u := range updates.Next() {
				// kubelet syncs a pod on every startup result (a sidecar
				// that started lets the next container start) and on
				// liveness failures; a pod whose kill waits, on any
				// liveness result (a kill no longer due stops waiting).
				// The one wake-up a result causes: the views do not
				// change with results (the plan reads them itself).
				if u.Type == results.Startup || u.Type == results.Liveness && (u.Result == results.Failure || r.budget.HasDeferred(u.PodKey)) {
					r.trigger(ctx, u.PodKey)
				}
			}
		}
	}
}

// latestView returns the newest view of the runtime, published or not.
func (r *Restarter) latestView() *pods.View {
	if v := r.listedView(); v != nil {
		return v
	}
	return pods.Resolve(nil, pods.Inputs{})
}

// listedView returns the newest view of the runtime, published or not;
// nil before the first.
func (r *Restarter) listedView() *pods.View {
	if s := r.latest.Load(); s != nil {
		return s.Latest()
	}
	return nil
}

// forget stops a gone pod's worker and drops what is kept about it, but
// for its back-off: kubelet keys that by pod UID and drops an entry only
// once expired (HandlePodCleanups' GC), so a pod made again with the same
// UID (a static pod's manifest put back) backs off where it left off.
func (r *Restarter) forget(key string) {
	if w, ok := r.workers[key]; ok && !w.retiring {
		// Not cancelled: the sync in progress may be the one removing the
		// pod (its files go after its sandbox); the worker ends after it.
		w.retiring = true
		close(w.gone)
	}
	r.backoff.GC(r.clock.Now())
	r.metrics.forget(key)
	r.budget.SetDeferred(key, nil)
	r.statusManager.forget(key)
	v := r.latestView()
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
	if ok && w.retiring {
		return // a new worker follows once it ended (Run, exited)
	}
	if !ok {
		wctx, cancel := context.WithCancel(ctx)
		w = &podWorker{key: key, trigger: make(chan struct{}, 1), cancel: cancel, state: newPodState(), gone: make(chan struct{})}
		r.workers[key] = w
		r.wg.Go(func() {
			defer cancel()
			r.runWorker(wctx, w)
			select {
			case r.exited <- w:
			case <-ctx.Done():
			}
		})
	}
	select {
	case w.trigger <- struct{}{}:
		r.busy.Add(1)
	default:
	}
}

func (r *Restarter) runWorker(ctx context.Context, w *podWorker) {
	// A timer stopped once its sync came another way: a time.After left
	// behind would linger until it fired (and on a fake clock, count as a
	// waiter that nothing waits on).
	var timer clock.Timer
	var retry <-chan time.Time
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, retry = nil, nil
		}
	}
	defer stopTimer()
	for {
		triggered := false
		select {
		case <-ctx.Done():
			return
		case <-w.gone:
			return
		case <-w.trigger:
			triggered = true
		case <-retry:
			r.busy.Add(1)
			triggered = true
		}
		stopTimer()
		if d := r.syncPod(ctx, w); d > 0 {
			timer = r.clock.NewTimer(d)
			retry = timer.C()
		}
		if triggered {
			r.busy.Add(-1)
		}
	}
}

// quiet reports whether the restarter has handled the runtime's listing
// seq and every sync it asked for is over (tests assert then that
// nothing was done).
func (r *Restarter) quiet(seq uint64) bool {
	return r.handled.Load() >= seq && r.busy.Load() == 0
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
