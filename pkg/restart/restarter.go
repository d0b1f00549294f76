// Package restart acts on probe results and container exits as kubelet's
// pod sync does: a container that failed its liveness or startup probe is
// stopped with kubelet's grace period, and containers are re-created in
// their sandbox per the pod's restart policy, with kubelet's
// CrashLoopBackOff.
//
// It knows pods only through the cri snapshot, the results store and a
// SpecSource (the prober's specs); it imports neither prober nor exec.
package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Runtime is what the restarter does through CRI.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
}

var _ Runtime = (*cri.Client)(nil)

// SpecSource tells the restarter which pods and containers it manages and
// how: the prober's resolved specs.
type SpecSource interface {
	// RestartPolicy returns the pod's restart policy and grace period; ok
	// is false for a pod cri-prober does not manage.
	RestartPolicy(podKey string) (policy corev1.RestartPolicy, gracePeriod int64, ok bool)
	// Manages reports whether cri-prober manages the container: a manifest
	// lists it, it has probe annotations, or its sandbox has a restart
	// policy annotation. Other containers are never touched.
	Manages(podKey, container string) bool
	// ProbeGracePeriod returns a probe's terminationGracePeriodSeconds.
	ProbeGracePeriod(podKey, container string, t results.ProbeType) *int64
	// ProbeFailures returns the failures of a container instance's probe
	// that reached the threshold, oldest first (for the ledger).
	ProbeFailures(podKey, container, containerID string, t results.ProbeType) []results.Observation
	// PolicyChanges is signalled when pods became managed or their policy
	// changed; ChangedPolicies returns their keys. The restarter looks at
	// them again: it may have seen a pod before its spec was known.
	PolicyChanges() <-chan struct{}
	ChangedPolicies() []string
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
	ReasonKilling       = "Killing"
	ReasonCreated       = "Created"
	ReasonStarted       = "Started"
	ReasonBackOff       = "BackOff"
	ReasonFailed        = "FailedRestart"
	ReasonWouldKill     = "WouldKill"
	ReasonStoppingPod   = "StoppingPod"
	ReasonAbandoned     = "AbandonedRestart"
	WaitingCrashLoop    = "CrashLoopBackOff"
	backoffRetryJitter  = 0.5
	failedActionBackoff = 5 * time.Second
	// exitSettle is how long after an exit the restarter waits before
	// restarting, and then checks that the sandbox is still ready: someone
	// stopping the pod (crictl stopp) kills its containers first and its
	// sandbox a moment later, and must not find them restarted. kubelet
	// sees exits only at its 1 s relist, so this is still sooner.
	exitSettle = 250 * time.Millisecond
)

// Restarter stops and restarts containers. Create it with New and run it
// with Run.
type Restarter struct {
	runtime  Runtime
	specs    SpecSource
	results  *results.Store
	recorder Recorder
	clock    clock.Clock
	mode     Mode
	backoff  *Backoff
	jitter   func() float64
	metrics  *metrics
	ledger   *Ledger // nil: none kept

	snapshot atomic.Pointer[cri.Snapshot]
	configs  sync.Map      // sandbox ID → *runtimeapi.PodSandboxConfig
	syncs    atomic.Uint64 // completed pod passes, for tests to wait on

	waitingMu sync.Mutex
	waiting   map[string]Waiting // by podKey/container

	// Owned by Run.
	workers map[string]*podWorker
	wg      sync.WaitGroup
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
func WithClock(c clock.Clock) Option { return func(r *Restarter) error { r.clock = c; return nil } }

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

// withJitter replaces the random source (tests).
func withJitter(f func() float64) Option {
	return func(r *Restarter) error { r.jitter = f; return nil }
}

// New returns a restarter acting through runtime on the pods specs manages,
// driven by the results in store.
func New(runtime Runtime, specs SpecSource, store *results.Store, opts ...Option) (*Restarter, error) {
	r := &Restarter{
		runtime: runtime,
		specs:   specs,
		results: store,
		mode:    Recreate,
		jitter:  rand.Float64,
		waiting: map[string]Waiting{},
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
	return r, nil
}

// Waiting returns why a managed container is waiting (CrashLoopBackOff).
func (r *Restarter) Waiting(podKey, container string) (Waiting, bool) {
	r.waitingMu.Lock()
	defer r.waitingMu.Unlock()
	w, ok := r.waiting[podKey+"/"+container]
	return w, ok
}

func (r *Restarter) setWaiting(key string, w *Waiting) {
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
	// Owned by the worker's goroutine.
	acted    map[string]bool // container IDs already stopped for a probe failure
	reported map[string]bool // container IDs whose back-off was reported
	// pending are ledger entries of kills whose restart waits for the
	// back-off, by the killed container's ID.
	pending map[string]Entry
}

// Run acts on changes and results until ctx is done; then it stops its pod
// workers (an action in progress is cancelled) and waits for them.
func (r *Restarter) Run(ctx context.Context, changes *cri.Subscription) {
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
			r.snapshot.Store(b.Snapshot)
			touched := map[string]bool{}
			for _, ev := range b.Events {
				touched[ev.Pod.Key()] = true
			}
			live := map[string]bool{}
			for _, p := range b.Snapshot.Pods() {
				live[p.Key()] = true
				if b.Resync {
					touched[p.Key()] = true
				}
			}
			for key, w := range r.workers {
				if !live[key] {
					w.cancel()
					delete(r.workers, key)
				}
			}
			for key := range touched {
				if live[key] {
					r.trigger(ctx, key)
				}
			}
		case <-updates.Ready():
			for _, u := range updates.Next() {
				if u.Type != results.Readiness && u.Result == results.Failure {
					r.trigger(ctx, u.PodUID)
				}
			}
		case <-r.specs.PolicyChanges():
			changed := r.specs.ChangedPolicies()
			snap := r.snapshot.Load()
			if snap == nil || len(changed) == 0 {
				continue
			}
			live := map[string]bool{}
			for _, p := range snap.Pods() {
				live[p.Key()] = true
			}
			for _, key := range changed {
				if live[key] {
					r.trigger(ctx, key)
				}
			}
		}
	}
}

func (r *Restarter) trigger(ctx context.Context, key string) {
	w, ok := r.workers[key]
	if !ok {
		wctx, cancel := context.WithCancel(ctx)
		w = &podWorker{key: key, trigger: make(chan struct{}, 1), cancel: cancel, acted: map[string]bool{}, reported: map[string]bool{}, pending: map[string]Entry{}}
		r.workers[key] = w
		r.wg.Go(func() { r.runWorker(wctx, w) })
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
		d := r.syncPod(ctx, w)
		r.syncs.Add(1)
		if d > 0 {
			retry = r.clock.After(d)
		}
	}
}

func (r *Restarter) stopAll() {
	for _, w := range r.workers {
		w.cancel()
	}
	r.wg.Wait()
}

// podView is one pod in the snapshot: its current sandbox and each
// container name's instances, newest first.
type podView struct {
	key       string
	sandbox   *cri.Pod
	sandboxes []string
	instances map[string][]*cri.Container
}

func (r *Restarter) view(key string) (*podView, bool) {
	snap := r.snapshot.Load()
	if snap == nil {
		return nil, false
	}
	v := &podView{key: key, instances: map[string][]*cri.Container{}}
	for _, sb := range snap.Pods() {
		if sb.Key() != key {
			continue
		}
		v.sandboxes = append(v.sandboxes, sb.ID)
		if sb.State == cri.SandboxReady && (v.sandbox == nil || sb.CreatedAt.After(v.sandbox.CreatedAt)) {
			v.sandbox = sb
		}
		for _, c := range snap.PodContainers(sb.ID) {
			v.instances[c.Name] = append(v.instances[c.Name], c)
		}
	}
	for _, list := range v.instances {
		sortNewestFirst(list)
	}
	return v, v.sandbox != nil
}

func sortNewestFirst(list []*cri.Container) {
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Attempt != list[j].Attempt {
			return list[i].Attempt > list[j].Attempt
		}
		return list[i].CreatedAt.After(list[j].CreatedAt)
	})
}

// syncPod decides for every managed container of the pod, as kubelet's
// computePodActions does, and returns when to look again (0: at the next
// change).
func (r *Restarter) syncPod(ctx context.Context, w *podWorker) time.Duration {
	policy, grace, ok := r.specs.RestartPolicy(w.key)
	if !ok {
		return 0
	}
	v, ok := r.view(w.key)
	if !ok {
		return 0 // no ready sandbox: nothing is restarted into a stopped pod
	}
	var retry time.Duration
	names := make([]string, 0, len(v.instances))
	for name := range v.instances {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !r.specs.Manages(w.key, name) {
			continue
		}
		d := r.syncContainer(ctx, w, v, policy, grace, name)
		if d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}
	return retry
}

func (r *Restarter) syncContainer(ctx context.Context, w *podWorker, v *podView, policy corev1.RestartPolicy, grace int64, name string) time.Duration {
	latest := v.instances[name][0]
	switch latest.State {
	case cri.StateRunning:
		for _, t := range []results.ProbeType{results.Liveness, results.Startup} {
			if res, ok := r.results.Get(results.Key{ContainerID: latest.ID, Type: t}); ok && res == results.Failure {
				return r.killForProbe(ctx, w, v, policy, grace, latest, t)
			}
		}
	case cri.StateExited:
		return r.restartExited(ctx, w, v, policy, latest)
	case cri.StateCreated:
		if latest.Annotations[cri.AnnotationRestartOf] != "" && r.mode == Recreate {
			// Ours, created before an interruption (an agent restart)
			// between create and start.
			return r.finishInterrupted(ctx, v, latest)
		}
	}
	return 0
}

// fresh lists the container's instances from the runtime, newest first:
// decisions are re-checked against it, never taken on a stale snapshot.
func (r *Restarter) fresh(ctx context.Context, v *podView, name string) ([]*cri.Container, error) {
	var out []*cri.Container
	for _, sb := range v.sandboxes {
		list, err := r.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if c.GetMetadata().GetName() == name {
				out = append(out, &cri.Container{
					ID: c.GetId(), SandboxID: c.GetPodSandboxId(), Name: name, Attempt: c.GetMetadata().GetAttempt(),
					State: containerState(c.GetState()), CreatedAt: time.Unix(0, c.GetCreatedAt()), Annotations: c.GetAnnotations(),
				})
			}
		}
	}
	sortNewestFirst(out)
	return out, nil
}

func containerState(s runtimeapi.ContainerState) cri.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return cri.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return cri.StateExited
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return cri.StateCreated
	default:
		return cri.StateUnknown
	}
}

// killForProbe stops a running container that failed its liveness or
// startup probe and, per policy and back-off, starts its replacement in the
// same pass, as kubelet does.
func (r *Restarter) killForProbe(ctx context.Context, w *podWorker, v *podView, policy corev1.RestartPolicy, podGrace int64, latest *cri.Container, t results.ProbeType) time.Duration {
	if w.acted[latest.ID] {
		return 0 // one failure, one action
	}
	name := latest.Name
	fresh, err := r.fresh(ctx, v, name)
	if err != nil {
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "Cannot re-check container %s before stopping it: %v", name, err)
		return failedActionBackoff
	}
	if len(fresh) == 0 || fresh[0].ID != latest.ID || fresh[0].State != cri.StateRunning {
		return 0 // it changed meanwhile; the next change brings us back
	}
	w.acted[latest.ID] = true
	restart := restartAfterKill(policy) && r.mode == Recreate
	msg := fmt.Sprintf("Container %s failed %s probe", name, killReason(t))
	if restart {
		msg += ", will be restarted"
	}
	if r.mode == Observe {
		would := "stopped"
		if restartAfterKill(policy) {
			would = "stopped and restarted"
		}
		r.eventf(v.sandbox, name, events.Normal, ReasonWouldKill, "Container %s failed %s probe and would be %s (--restart=none: nothing done)", name, killReason(t), would)
		return 0
	}

	// The start is decided before the kill, with the failed instance still
	// running: the back-off is measured from the previous exit. So the
	// first kills restart at once, as observed on kubelet.
	backoffKey := v.key + "/" + name
	now := r.clock.Now()
	startNow := restart
	if prev := newestExited(fresh); restart && prev != nil {
		finished, err := r.finishedAt(ctx, prev)
		if err == nil && r.backoff.Wait(backoffKey, finished, now) > 0 {
			startNow = false
		} else if err == nil {
			r.backoff.Next(backoffKey, finished, now)
		}
	}

	grace := gracePeriod(podGrace, r.specs.ProbeGracePeriod(v.key, name, t))
	r.eventf(v.sandbox, name, events.Normal, ReasonKilling, "%s", msg)
	r.metrics.kills.WithLabelValues(t.String()).Inc()
	// The replacement is created while the old container stops (attempts
	// have their own names); only its start waits for the stop.
	var created chan createResult
	if startNow {
		created = make(chan createResult, 1)
		go func() {
			cfg, sandboxCfg, err := r.containerConfigs(ctx, v.sandbox.ID, latest.ID)
			if err != nil {
				created <- createResult{err: fmt.Errorf("cannot restart container %s: %w", name, err)}
				return
			}
			id, err := r.create(ctx, v, latest, fresh, cfg, sandboxCfg, killReason(t))
			created <- createResult{id: id, err: err}
		}()
	}
	if err := r.runtime.StopContainer(ctx, latest.ID, grace); err != nil {
		if created != nil {
			if c := <-created; c.err == nil {
				r.runtime.RemoveContainer(ctx, c.id) //nolint:errcheck // best effort: the kill is retried
			}
		}
		delete(w.acted, latest.ID)
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "Stopping container %s failed: %v", name, err)
		return failedActionBackoff
	}
	entry := r.entry(ctx, v, latest, killReason(t), nil) // its exit after the kill
	entry.GracePeriodSeconds = grace
	entry.Failures = failures(r.specs.ProbeFailures(v.key, name, latest.ID, t))
	switch {
	case !restart:
		entry.Action = ActionStopped
		r.record(ctx, entry)
		if policy == corev1.RestartPolicyNever {
			r.stopSandboxIfIdle(ctx, v)
		}
		return 0
	case !startNow:
		// In back-off: the killed instance is now the newest exited one,
		// and a later pass restarts it when the back-off allows.
		w.pending[latest.ID] = entry
		return r.restartExited(ctx, w, v, policy, latest)
	default:
		c := <-created
		if c.err != nil {
			r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "%v", c.err)
			return 0
		}
		if r.start(ctx, v, latest, fresh, c.id, killReason(t)) {
			entry.Action, entry.ReplacementID, entry.Attempt, entry.Time = ActionRestarted, c.id, fresh[0].Attempt+1, r.clock.Now()
			r.record(ctx, entry)
		}
		return 0
	}
}

// entry starts a ledger entry about old, with its exit as the runtime
// records it (st, when the caller has it; else asked for).
func (r *Restarter) entry(ctx context.Context, v *podView, old *cri.Container, cause string, st *runtimeapi.ContainerStatus) Entry {
	e := Entry{Time: r.clock.Now(), Namespace: v.sandbox.Namespace, Pod: v.sandbox.Name, PodUID: v.sandbox.UID,
		Container: old.Name, ContainerID: old.ID, Cause: cause}
	if r.ledger == nil {
		return e
	}
	if st == nil {
		resp, err := r.runtime.ContainerStatus(ctx, old.ID, false)
		if err != nil {
			return e
		}
		st = resp.GetStatus()
	}
	e.ExitCode, e.ExitReason = st.GetExitCode(), st.GetReason()
	return e
}

func (r *Restarter) record(ctx context.Context, e Entry) {
	if r.ledger == nil {
		return
	}
	if err := r.ledger.Add(e); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot record a restart", "pod", klog.KRef(e.Namespace, e.Pod), "container", e.Container)
	}
}

func failures(list []results.Observation) []Failure {
	out := make([]Failure, 0, len(list))
	for _, o := range list {
		out = append(out, Failure{Time: o.Time, Output: o.Output, Consecutive: o.Consecutive, Threshold: o.Threshold})
	}
	return out
}

type createResult struct {
	id  string
	err error
}

// restartExited restarts a container that is not running any more, per
// the restart policy and the back-off measured from its exit.
func (r *Restarter) restartExited(ctx context.Context, w *podWorker, v *podView, policy corev1.RestartPolicy, latest *cri.Container) time.Duration {
	if r.mode != Recreate {
		return 0
	}
	name := latest.Name
	fresh, err := r.fresh(ctx, v, name)
	if err != nil {
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "Cannot re-check container %s before restarting it: %v", name, err)
		return failedActionBackoff
	}
	if len(fresh) == 0 || fresh[0].ID != latest.ID || fresh[0].State != cri.StateExited {
		return 0
	}
	st, err := r.runtime.ContainerStatus(ctx, latest.ID, false)
	if err != nil {
		return failedActionBackoff
	}
	exitCode := st.GetStatus().GetExitCode()
	if !restartOnExit(policy, exitCode) {
		return 0
	}
	key := v.key + "/" + name
	finished := time.Unix(0, st.GetStatus().GetFinishedAt())
	now := r.clock.Now()
	if !w.acted[latest.ID] { // an exit we did not cause
		if settle := exitSettle - now.Sub(finished); settle > 0 {
			return settle
		}
		sb, err := r.runtime.PodSandboxStatus(ctx, v.sandbox.ID, false)
		if err != nil {
			return failedActionBackoff // the runtime is away: ask again later
		}
		if sb.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			return 0 // the pod is being stopped
		}
	}
	if wait := r.backoff.Wait(key, finished, now); wait > 0 {
		if !w.reported[latest.ID] {
			w.reported[latest.ID] = true
			r.eventf(v.sandbox, name, events.Warning, ReasonBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)", name, v.sandbox.Name, v.sandbox.Namespace, v.sandbox.UID)
		}
		r.setWaiting(key, &Waiting{Reason: WaitingCrashLoop, Until: finished.Add(r.backoff.Delay(key))})
		// kubelet's pod worker comes back after the remaining wait times a
		// jitter in [1, 1.5].
		return time.Duration(float64(wait) * (1 + backoffRetryJitter*r.jitter()))
	}
	r.backoff.Next(key, finished, now)
	cfg, sandboxCfg, err := r.containerConfigs(ctx, v.sandbox.ID, latest.ID)
	if err != nil {
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "Cannot restart container %s: %v", name, err)
		return 0
	}
	entry, killed := w.pending[latest.ID]
	if !killed {
		entry = r.entry(ctx, v, latest, "exit", st.GetStatus())
	}
	id, err := r.create(ctx, v, latest, fresh, cfg, sandboxCfg, entry.Cause)
	if err != nil {
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "%v", err)
		return 0
	}
	if r.start(ctx, v, latest, fresh, id, entry.Cause) {
		delete(w.pending, latest.ID)
		entry.Action, entry.ReplacementID, entry.Attempt = ActionRestarted, id, fresh[0].Attempt+1
		entry.Time, entry.BackOffSeconds = r.clock.Now(), now.Sub(finished).Seconds()
		r.record(ctx, entry)
	}
	return 0
}

func newestExited(list []*cri.Container) *cri.Container {
	for _, c := range list {
		if c.State == cri.StateExited {
			return c
		}
	}
	return nil
}

func (r *Restarter) finishedAt(ctx context.Context, c *cri.Container) (time.Time, error) {
	st, err := r.runtime.ContainerStatus(ctx, c.ID, false)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, st.GetStatus().GetFinishedAt()), nil
}

// create creates the next attempt of old from its original CRI configs.
func (r *Restarter) create(ctx context.Context, v *podView, old *cri.Container, fresh []*cri.Container, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig, cause string) (string, error) {
	attempt := fresh[0].Attempt + 1
	cfg.Metadata.Attempt = attempt
	cfg.LogPath = nextLogPath(cfg.GetLogPath(), attempt)
	annotations := make(map[string]string, len(cfg.Annotations)+1)
	for k, val := range cfg.Annotations {
		annotations[k] = val
	}
	annotations[cri.AnnotationRestartOf] = old.ID
	annotations[cri.AnnotationRestartCause] = cause
	cfg.Annotations = annotations
	id, err := r.runtime.CreateContainer(ctx, v.sandbox.ID, cfg, sandboxCfg)
	if err != nil {
		return "", fmt.Errorf("error creating container %s: %w", old.Name, err)
	}
	r.eventf(v.sandbox, old.Name, events.Normal, ReasonCreated, "Created container %s", old.Name)
	return id, nil
}

// start starts a created replacement of old, then removes exited instances
// older than old (kubelet keeps one dead container per container name).
// reason (liveness, startup or exit) labels the restart metric.
func (r *Restarter) start(ctx context.Context, v *podView, old *cri.Container, fresh []*cri.Container, id, reason string) (started bool) {
	name := old.Name
	if err := r.runtime.StartContainer(ctx, id); err != nil {
		r.eventf(v.sandbox, name, events.Warning, ReasonFailed, "Error starting container %s: %v", name, err)
		return false
	}
	r.eventf(v.sandbox, name, events.Normal, ReasonStarted, "Started container %s", name)
	r.metrics.restarts.WithLabelValues(reason).Inc()
	r.setWaiting(v.key+"/"+name, nil)
	for _, c := range fresh {
		if c.ID != old.ID && c.State == cri.StateExited {
			if err := r.runtime.RemoveContainer(ctx, c.ID); err != nil {
				klog.FromContext(ctx).V(2).Info("Cannot remove an old instance", "containerID", c.ID, "err", err)
			}
		}
	}
	return true
}

// finishInterrupted deals with a replacement created by a restart that was
// interrupted (the agent killed) before its start. The replacement is
// started only when no instance of the container runs. If one does, its
// stop never completed (the agent died before the kill, or containerd gave
// up waiting for the grace period when the agent's call went away): the
// replacement is removed, and the running instance is probed afresh and
// restarted only if it fails again, never started beside it.
func (r *Restarter) finishInterrupted(ctx context.Context, v *podView, c *cri.Container) time.Duration {
	fresh, err := r.fresh(ctx, v, c.Name)
	if err != nil {
		return failedActionBackoff
	}
	if len(fresh) == 0 || fresh[0].ID != c.ID || fresh[0].State != cri.StateCreated {
		return 0
	}
	for _, other := range fresh[1:] {
		if other.State != cri.StateRunning {
			continue
		}
		if err := r.runtime.RemoveContainer(ctx, c.ID); err != nil {
			r.eventf(v.sandbox, c.Name, events.Warning, ReasonFailed, "Cannot remove container %s left by an interrupted restart: %v", c.Name, err)
			return failedActionBackoff
		}
		r.eventf(v.sandbox, c.Name, events.Normal, ReasonAbandoned,
			"Removed container %s (attempt %d) left by an interrupted restart: the instance it was to replace is still running and will be probed again", c.Name, c.Attempt)
		return 0
	}
	if err := r.runtime.StartContainer(ctx, c.ID); err != nil {
		r.eventf(v.sandbox, c.Name, events.Warning, ReasonFailed, "Error starting container %s: %v", c.Name, err)
		return failedActionBackoff
	}
	r.eventf(v.sandbox, c.Name, events.Normal, ReasonStarted, "Started container %s", c.Name)
	// The agent that decided this restart is gone, and the failures it saw
	// with it; the cause and the old instance's exit are on record.
	if old, ok := findInstance(fresh, c.Annotations[cri.AnnotationRestartOf]); ok {
		entry := r.entry(ctx, v, old, c.Annotations[cri.AnnotationRestartCause], nil)
		entry.Action, entry.ReplacementID, entry.Attempt = ActionRestarted, c.ID, c.Attempt
		r.record(ctx, entry)
	}
	return 0
}

func findInstance(list []*cri.Container, id string) (*cri.Container, bool) {
	for _, c := range list {
		if c.ID == id {
			return c, true
		}
	}
	return nil, false
}

// stopSandboxIfIdle stops the pod's sandbox when none of its containers is
// left running: with restartPolicy Never, kubelet kills the whole pod.
func (r *Restarter) stopSandboxIfIdle(ctx context.Context, v *podView) {
	list, err := r.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: v.sandbox.ID})
	if err != nil {
		return
	}
	for _, c := range list {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED {
			return
		}
	}
	r.eventf(v.sandbox, "", events.Normal, ReasonStoppingPod, "Stopping pod sandbox: no container left running (restartPolicy Never)")
	if err := r.runtime.StopPodSandbox(ctx, v.sandbox.ID); err != nil {
		r.eventf(v.sandbox, "", events.Warning, ReasonFailed, "Stopping pod sandbox failed: %v", err)
	}
}

// containerConfigs returns the original CRI configs of a container and its
// sandbox from the runtime's verbose status (containerd keeps them under
// info["info"].config), as crictl or kubelet created them.
func (r *Restarter) containerConfigs(ctx context.Context, sandboxID, containerID string) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	st, err := r.runtime.ContainerStatus(ctx, containerID, true)
	if err != nil {
		return nil, nil, err
	}
	var cinfo struct {
		Config *runtimeapi.ContainerConfig `json:"config"`
	}
	if err := decodeInfo(st.GetInfo(), &cinfo); err != nil || cinfo.Config == nil || cinfo.Config.Metadata == nil {
		return nil, nil, errors.New("the runtime does not report the container's original config (verbose ContainerStatus info)")
	}
	if cached, ok := r.configs.Load(sandboxID); ok {
		return cinfo.Config, cached.(*runtimeapi.PodSandboxConfig), nil
	}
	sst, err := r.runtime.PodSandboxStatus(ctx, sandboxID, true)
	if err != nil {
		return nil, nil, err
	}
	var sinfo struct {
		Config *runtimeapi.PodSandboxConfig `json:"config"`
	}
	if err := decodeInfo(sst.GetInfo(), &sinfo); err != nil || sinfo.Config == nil {
		return nil, nil, errors.New("the runtime does not report the sandbox's original config (verbose PodSandboxStatus info)")
	}
	r.configs.Store(sandboxID, sinfo.Config)
	return cinfo.Config, sinfo.Config, nil
}

func decodeInfo(info map[string]string, v any) error {
	raw, ok := info["info"]
	if !ok {
		return errors.New("no info")
	}
	return json.Unmarshal([]byte(raw), v)
}

var logAttempt = regexp.MustCompile(`^(.*?)(\d+)\.log$`)

// nextLogPath gives a new attempt its own log file, as kubelet names them
// (<name>/<attempt>.log); another path gets the attempt appended.
func nextLogPath(path string, attempt uint32) string {
	if path == "" {
		return ""
	}
	if m := logAttempt.FindStringSubmatch(path); m != nil {
		return m[1] + strconv.FormatUint(uint64(attempt), 10) + ".log"
	}
	return path + "." + strconv.FormatUint(uint64(attempt), 10)
}

func (r *Restarter) eventf(sandbox *cri.Pod, container, eventType, reason, format string, args ...any) {
	r.recorder.Record(events.Event{
		Time:      r.clock.Now(),
		Type:      eventType,
		Reason:    reason,
		Namespace: sandbox.Namespace,
		Pod:       sandbox.Name,
		Container: container,
		Message:   fmt.Sprintf(format, args...),
	})
}
