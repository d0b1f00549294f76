// Package prober runs liveness, readiness and startup probes with kubelet's
// semantics. The Manager keeps one worker per pod, container and probe
// type for the pods of the latest pods.View; each worker follows kubelet's
// decision sequence and writes stable results to a results.Store.
package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// kubelet re-syncs each pod every minute, jittered by up to half of it;
// each sync also re-triggers readiness probes of started, unready containers.
const (
	resyncInterval = time.Minute
	resyncJitter   = 0.5
)

// Manager runs the probe workers: it owns them and nothing else. Create it
// with NewManager and run it with Run; everything it starts stops when Run
// returns.
type Manager struct {
	clock  clock.WithTicker
	start  time.Time
	jitter func() float64
	runner probeRunner
	// stalls measures the agent's own lateness, so that a network probe
	// it starved is not the target's failure (Run runs it).
	stalls    *stallMonitor
	results   *results.Store
	histories *results.Histories
	recorder  Recorder
	metrics   *metrics
	// podFilter, if set, limits probing to the pods it accepts.
	podFilter       func(namespace, name string) bool
	noStartupJitter bool
	extraLateness   prometheus.Observer
	lateness        prometheus.Observer // every worker's: the histogram, and extraLateness
	maxInFlight     int
	sched           *scheduler
	// allowed are the refused destinations network probes may reach
	// anyway; keepSuccessOutput keeps what passing probes print.
	allowed           []netip.Prefix
	keepSuccessOutput bool
	failureEvents     FailureEvents
	// killWaits reports whether the kill of a container whose liveness or
	// startup failed waits (the restart budget, a pause): its probe goes
	// on rather than holding (nil: never).
	killWaits func(containerID string) bool

	// status is the latest pods' status (their view, with what the pod
	// sync adds), read by the workers and the readiness metric.
	status atomic.Pointer[pods.Status]

	// stateDir keeps the probes' state across agent restarts ("": none);
	// restoredState is what the previous agent left, read by NewManager
	// and never written after; stateWarning says why a file was set aside
	// (a *statefile.Warning, logged by Run).
	stateDir      string
	restoredState map[results.Key]results.Saved
	stateWarning  error

	// Owned by Run.
	savedState map[results.Key]results.Saved // as last written
	workers    map[workerKey]*workerHandle
	finished   map[workerKey]string // container ID a worker stopped by itself at
	resyncAt   map[string]time.Time
	exited     chan *workerHandle
}

type workerHandle struct {
	w        *worker
	task     *task
	stopping bool
	exitID   string // the worker's container ID when it exited
}

// Option configures NewManager.
type Option func(*Manager) error

// WithKillWaits keeps probing a container whose liveness or startup
// failure is not acted on yet (waits reports so: killbudget.Budget.Waits,
// the restart budget or pause), where kubelet holds the probe until the container is
// replaced: its probes go on reporting, and a kill that goes ahead later
// acts on a result still current.
func WithKillWaits(waits func(containerID string) bool) Option {
	return func(m *Manager) error { m.killWaits = waits; return nil }
}

// WithClock replaces the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(m *Manager) error { m.clock = c; return nil }
}

// WithRecorder receives the probe events (default: logged).
func WithRecorder(r Recorder) Option {
	return func(m *Manager) error { m.recorder = r; return nil }
}

// WithHistories keeps each probe's recent runs in hs (default: a registry
// of the manager's own).
func WithHistories(hs *results.Histories) Option {
	return func(m *Manager) error { m.histories = hs; return nil }
}

// WithStateDir keeps each probe's stable result and current run in dir and
// restores them for containers whose ID has not changed when the agent
// starts again, so that an agent restart never turns a ready container not
// ready. The state is read in NewManager and written at most once a
// second, and when Run ends.
func WithStateDir(dir string) Option {
	return func(m *Manager) error { m.stateDir = dir; return nil }
}

// WithPodFilter limits probing to the pods keep accepts (the others are
// still reported).
func WithPodFilter(keep func(namespace, name string) bool) Option {
	return func(m *Manager) error { m.podFilter = keep; return nil }
}

// WithoutStartupJitter makes workers probe at once even when the agent has
// just started: for a one-shot `wait`, where there is no herd to spread.
func WithoutStartupJitter() Option {
	return func(m *Manager) error { m.noStartupJitter = true; return nil }
}

// WithMaxProbesInFlight bounds the network probes running at once (default
// DefaultMaxProbesInFlight; 0: no bound). Due probes beyond it wait for a
// slot in the order they fell due.
func WithMaxProbesInFlight(n int) Option {
	return func(m *Manager) error {
		if n < 0 {
			return fmt.Errorf("max probes in flight: %d is negative; 0 means no bound", n)
		}
		m.maxInFlight = n
		return nil
	}
}

// WithAllowedDestinations lets network probes reach the link-local and
// cloud metadata addresses in allowed, which are refused otherwise
// (--allow-probe-destination): kubelet probes any address, but there the
// node's credentials are served to whoever asks, and a probe's author is
// not always the operator.
func WithAllowedDestinations(allowed []netip.Prefix) Option {
	return func(m *Manager) error { m.allowed = allowed; return nil }
}

// WithSuccessOutput keeps what passing probes print (their HTTP body,
// their command's output) in the results and histories, and so in the
// API (--keep-success-output). By default it is dropped, as kubelet
// drops it.
func WithSuccessOutput() Option {
	return func(m *Manager) error { m.keepSuccessOutput = true; return nil }
}

// WithFailureEvents says which event a probe failure makes
// (--probe-failure-events; default FailureEventsKubelet).
func WithFailureEvents(mode FailureEvents) Option {
	return func(m *Manager) error {
		if err := ValidateFailureEvents(string(mode)); err != nil {
			return fmt.Errorf("probe failure events: %w", err)
		}
		m.failureEvents = mode
		return nil
	}
}

// withRunner replaces the probe dispatcher (tests).
func withRunner(r probeRunner) Option {
	return func(m *Manager) error { m.runner = r; return nil }
}

// withJitter replaces the random source of jitter (tests).
func withJitter(f func() float64) Option {
	return func(m *Manager) error { m.jitter = f; return nil }
}

// NewManager returns a manager that runs exec probes with execRunner and
// writes results to store.
func NewManager(execRunner ExecRunner, store *results.Store, opts ...Option) (*Manager, error) {
	m := &Manager{
		results:  store,
		workers:  map[workerKey]*workerHandle{},
		finished: map[workerKey]string{},
		resyncAt: map[string]time.Time{},
		exited:   make(chan *workerHandle),
		jitter:   rand.Float64,
		metrics:  newMetrics(),

		maxInFlight: DefaultMaxProbesInFlight,
	}
	for _, opt := range opts {
		if err := opt(m); err != nil {
			return nil, err
		}
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.stateDir != "" {
		// A file that cannot be read costs only the continuity: Run says
		// so and probing starts from kubelet's initial values.
		var err error
		if m.restoredState, m.stateWarning, err = loadProbeState(m.stateDir); err != nil {
			return nil, err
		}
	}
	if m.failureEvents == "" {
		m.failureEvents = FailureEventsKubelet
	}
	m.sched = newScheduler(m.clock, m.maxInFlight)
	m.lateness = m.metrics.lateness
	if m.extraLateness != nil {
		m.lateness = observers{m.metrics.lateness, m.extraLateness}
	}
	if m.histories == nil {
		m.histories = results.NewHistories()
	}
	if m.runner == nil {
		if execRunner == nil {
			return nil, fmt.Errorf("an exec runner is required")
		}
		d := newDispatcher(execRunner, probe.NewDialer(m.allowed...), m.keepSuccessOutput)
		m.stalls = &stallMonitor{}
		d.stalls = m.stalls
		m.runner = d
	}
	m.start = m.clock.Now()
	if m.noStartupJitter {
		m.start = time.Time{} // as if up for ages: no worker jitters
	}
	m.status.Store(pods.NewStatus(pods.Resolve(nil, pods.Inputs{}), nil, nil))
	return m, nil
}

// Histories returns the probes' recent runs.
func (m *Manager) Histories() *results.Histories { return m.histories }

// pod implements podReader for the workers.
func (m *Manager) pod(key string) (*pods.Pod, bool) {
	return m.status.Load().Pod(key)
}

// Run follows the views (changes) and keeps the workers in step until ctx
// is done; then it stops them and waits.
func (m *Manager) Run(ctx context.Context, changes *pods.Subscription) {
	logger := klog.FromContext(ctx)
	if m.recorder == nil {
		m.recorder = events.Log(logger)
	}
	updates := m.results.Subscribe()
	defer updates.Close()
	resync := m.clock.NewTicker(time.Second)
	defer resync.Stop()
	// The scheduler outlives ctx until every worker is stopped: it waits
	// for their exits.
	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		m.sched.run(schedCtx)
	}()
	stallsDone := make(chan struct{})
	go func() {
		defer close(stallsDone)
		if m.stalls != nil {
			m.stalls.run(schedCtx)
		}
	}()
	defer func() {
		m.stopAll()
		stopSched()
		<-schedDone
		<-stallsDone
	}()
	defer m.saveState(logger) // before the workers stop and drop their results
	if m.stateWarning != nil {
		logger.Error(m.stateWarning, "Probe state not restored")
	} else if m.stateDir != "" {
		logger.Info("Restoring the probes' state", "stateDir", m.stateDir, "probes", len(m.restoredState))
	}

	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Ready():
			b := changes.Next()
			m.reconcile(ctx, b.Status)
			for _, key := range b.Changed {
				m.syncPod(key)
			}
		case <-updates.Ready():
			for _, u := range updates.Next() {
				// kubelet syncs the pod on every readiness and startup
				// change and on liveness failures.
				if u.Type == results.Liveness && u.Result != results.Failure {
					continue
				}
				m.syncPod(u.PodKey)
			}
		case h := <-m.exited:
			if m.workers[h.w.key] == h {
				delete(m.workers, h.w.key)
				if !h.stopping {
					m.finished[h.w.key] = h.exitID
				}
			}
			m.reconcile(ctx, m.status.Load())
		case <-resync.C():
			m.saveState(logger)
			now := m.clock.Now()
			for key, at := range m.resyncAt {
				if !now.Before(at) {
					m.syncPod(key)
				}
			}
		}
	}
}

// desiredWorker is a worker the view asks for.
type desiredWorker struct {
	pod       *pods.Pod
	container *pods.Container
	probe     *corev1.Probe
}

// resumeResults publishes, before the view is, the results a previous
// agent left (--state-dir) for the containers about to get workers: a
// ready container is never seen not ready while its worker starts (and
// waits out its start-up jitter).
func (m *Manager) resumeResults(desired map[workerKey]desiredWorker) {
	if m.restoredState == nil {
		return
	}
	for key, d := range desired {
		if _, running := m.workers[key]; running || d.container.Current == nil {
			continue
		}
		k := results.Key{ContainerID: d.container.Current.ID, Type: key.probeType}
		if _, known := m.results.Get(k); known {
			continue
		}
		if sv, ok := m.restoredState[k]; ok {
			m.results.Set(k, resumedResult(key.probeType, sv), key.pod)
		}
	}
}

// reconcile publishes st to the workers and starts and stops workers to
// match it. Repeating it changes nothing.
func (m *Manager) reconcile(ctx context.Context, st *pods.Status) {
	desired := map[workerKey]desiredWorker{}
	probedPods := map[string]bool{}
	for _, p := range st.Pods() {
		if !p.Probed() || (m.podFilter != nil && !m.podFilter(p.Namespace, p.Name)) {
			continue
		}
		probedPods[p.Key] = true
		for _, c := range p.Containers {
			for _, t := range results.ProbeTypes {
				if probe := c.Probe(t); probe != nil {
					desired[workerKey{pod: p.Key, container: c.Name, probeType: t}] = desiredWorker{pod: p, container: c, probe: probe}
				}
			}
		}
	}
	m.resumeResults(desired)
	m.status.Store(st)

	for key, h := range m.workers {
		d, ok := desired[key]
		if !ok || !sameWork(h.w, d.container.Spec, d.probe) {
			// Replaced only once it has exited (see the exited case), so
			// that two workers never write the same result.
			if !h.stopping {
				h.stopping = true
				m.sched.stop(h.task)
			}
		}
	}
	for key, d := range desired {
		if _, running := m.workers[key]; running {
			continue
		}
		current := ""
		if d.container.Current != nil {
			current = d.container.Current.ID
		}
		if id, done := m.finished[key]; done {
			if id == current {
				continue // it stopped by itself; a new container wakes it
			}
			delete(m.finished, key)
		}
		m.startWorker(ctx, key, d)
	}
	for key := range m.finished {
		if _, ok := desired[key]; !ok {
			delete(m.finished, key)
		}
	}
	m.histories.Retain(func(k results.HistoryKey) bool {
		_, ok := desired[workerKey{pod: k.Pod, container: k.Container, probeType: k.Type}]
		return ok
	})
	for key := range m.resyncAt {
		if !probedPods[key] {
			delete(m.resyncAt, key)
		}
	}
	for key := range probedPods {
		if _, ok := m.resyncAt[key]; !ok {
			m.resyncAt[key] = m.nextResync()
		}
	}
}

// sameWork reports whether a running worker already does what the spec
// asks: same probe, and the same ports and env it resolves against.
func sameWork(w *worker, c *spec.Container, p *corev1.Probe) bool {
	return reflect.DeepEqual(w.probe, p) && reflect.DeepEqual(w.container.Ports, c.Ports) && reflect.DeepEqual(w.container.Env, c.Env) &&
		sameExtensions(w.container.Extension(w.key.probeType), c.Extension(w.key.probeType))
}

// sameExtensions compares what a user wrote (not the compiled regexp).
func sameExtensions(a, b *spec.Extensions) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !reflect.DeepEqual(a.StartInterval, b.StartInterval) || (a.HTTPGet == nil) != (b.HTTPGet == nil) {
		return false
	}
	if a.HTTPGet == nil {
		return true
	}
	x, y := *a.HTTPGet, *b.HTTPGet
	return x.Method == y.Method && slices.Equal(x.ValidStatusCodes, y.ValidStatusCodes) && x.FailIfBodyNotMatchesRegexp == y.FailIfBodyNotMatchesRegexp
}

func (m *Manager) startWorker(ctx context.Context, key workerKey, d desiredWorker) {
	w := &worker{
		key:           key,
		namespace:     d.pod.Namespace,
		podName:       d.pod.Name,
		container:     d.container.Spec,
		probe:         d.probe,
		initial:       initialResult(key.probeType),
		clock:         m.clock,
		pods:          m,
		runner:        m.runner,
		results:       m.results,
		recorder:      m.recorder,
		failureEvents: m.failureEvents,
		metrics:       m.metrics.forWorker(key.probeType, key.container, d.pod.Name, d.pod.Namespace, d.pod.UID),
		lateness:      m.lateness,
		history:       m.histories.Get(results.HistoryKey{Pod: key.pod, Container: key.container, Type: key.probeType}),
		restore:       m.restored,
		killWaits:     m.killWaits,
	}
	h := &workerHandle{w: w}
	m.workers[key] = h
	h.task = m.sched.add(ctx, w, m.start, m.jitter, func() {
		// The worker will never step again: its fields are ours to read.
		if w.containerID != "" {
			m.results.Remove(w.resultKey())
		}
		w.metrics.delete()
		h.exitID = w.containerID
		select {
		case m.exited <- h:
		case <-ctx.Done():
		}
	})
}

// stopAll stops every worker; the scheduler waits for their exits.
func (m *Manager) stopAll() {
	for _, h := range m.workers {
		m.sched.stop(h.task)
	}
}

// syncPod does what kubelet's pod sync does for probes: a started
// container that is not ready gets its readiness probe run now rather than
// at its next tick.
func (m *Manager) syncPod(key string) {
	p, ok := m.pod(key)
	if !ok {
		return
	}
	for _, c := range p.Containers {
		if !c.Running() || c.Spec == nil {
			continue
		}
		id := c.Current.ID
		flags := results.Container{ID: id, Running: true, HasStartupProbe: c.Spec.Startup != nil, HasReadinessProbe: c.Spec.Readiness != nil}
		if flags.Started = m.results.Started(flags); !flags.Started || m.results.Ready(flags) {
			continue
		}
		if h, ok := m.workers[workerKey{pod: key, container: c.Name, probeType: results.Readiness}]; ok {
			m.sched.trigger(h.task)
		}
	}
	if _, ok := m.resyncAt[key]; ok {
		m.resyncAt[key] = m.nextResync()
	}
}

func (m *Manager) nextResync() time.Time {
	return m.clock.Now().Add(time.Duration((1 + resyncJitter*m.jitter()) * float64(resyncInterval)))
}

type observers []prometheus.Observer

func (os observers) Observe(v float64) {
	for _, o := range os {
		o.Observe(v)
	}
}
