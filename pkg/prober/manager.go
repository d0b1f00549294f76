// Package prober runs liveness, readiness and startup probes with kubelet's
// semantics. The Manager matches the runtime's pods (from the cri poller)
// with probe specs (Pod manifests and CRI annotations) and keeps one worker
// per pod, container and probe type; each worker follows kubelet's decision
// sequence and writes stable results to a results.Store.
package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// ExecRunner runs probe commands in containers (pkg/exec.Runner).
type ExecRunner interface {
	Run(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (exec.Result, error)
}

// ManifestSource gives the pods of Pod manifests (spec.ManifestDir).
type ManifestSource interface {
	Pods() ([]*spec.Pod, []*spec.Error)
	Changed() <-chan struct{}
}

// kubelet re-syncs each pod every minute, jittered by up to half of it;
// each sync also re-triggers readiness probes of started, unready containers.
const (
	resyncInterval = time.Minute
	resyncJitter   = 0.5
)

// Manager runs the probe workers. Create it with NewManager and run it
// with Run; everything it starts stops when Run returns.
type Manager struct {
	clock     clock.WithTicker
	start     time.Time
	jitter    func() float64
	runner    probeRunner
	results   *results.Store
	recorder  Recorder
	manifests ManifestSource
	hostIP    string
	// probeNetwork is where network probes are dialled from for pods
	// that do not say (spec.ProbeNetworkNode or spec.ProbeNetworkPod).
	probeNetwork string
	metrics      *metrics
	// podFilter, if set, limits probing to the pods it accepts.
	podFilter       func(namespace, name string) bool
	noStartupJitter bool
	extraLateness   prometheus.Observer

	// Published by Run for workers and Report.
	views atomic.Pointer[map[string]*podStatus]
	pods  atomic.Pointer[[]*pod]
	byKey atomic.Pointer[map[string]*pod]
	// policyChanges tells the restarter about pods whose management
	// changed (see PolicyChanges).
	policyChanges keyNotifier

	// histories outlive workers (a spec edit replaces the worker, a
	// restart keeps it) and go with their pod.
	historiesMu sync.Mutex
	histories   map[workerKey]*results.History

	// stateDir keeps the probes' state across agent restarts ("": none);
	// restoredState is what the previous agent left, read once before any
	// worker starts and never written after.
	stateDir      string
	restoredState map[results.Key]results.Saved
	stateErr      error

	// Owned by Run.
	savedState  map[results.Key]results.Saved // as last written
	policies    map[string]string             // managed pods' policy signatures
	workers     map[workerKey]*workerHandle
	finished    map[workerKey]string // container ID a worker stopped by itself at
	reported    map[string]bool      // problems already logged
	resyncAt    map[string]time.Time
	annotations map[string]annotationSpec // by container ID: configs never change
	exited      chan *workerHandle
	wg          sync.WaitGroup
}

type workerHandle struct {
	w        *worker
	cancel   context.CancelFunc
	stopping bool
	exitID   string // the worker's container ID when it exited
}

type annotationSpec struct {
	spec *spec.Container
	errs []*spec.Error
}

// Option configures NewManager.
type Option func(*Manager) error

// WithClock replaces the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(m *Manager) error { m.clock = c; return nil }
}

// WithRecorder receives the probe events (default: logged).
func WithRecorder(r Recorder) Option {
	return func(m *Manager) error { m.recorder = r; return nil }
}

// WithManifests adds Pod manifests as a spec source.
func WithManifests(src ManifestSource) Option {
	return func(m *Manager) error { m.manifests = src; return nil }
}

// WithHostIP sets the address probed for host-network pods, which have no
// pod IP of their own (kubelet probes the node's address).
func WithHostIP(ip string) Option {
	return func(m *Manager) error { m.hostIP = ip; return nil }
}

// WithProbeNetwork sets where network probes are dialled from for pods
// that do not say: spec.ProbeNetworkNode (the default, kubelet's) or
// spec.ProbeNetworkPod (inside the pod's network namespace).
func WithProbeNetwork(network string) Option {
	return func(m *Manager) error {
		if err := spec.ValidateProbeNetwork(network); err != nil {
			return fmt.Errorf("probe network: %w", err)
		}
		m.probeNetwork = network
		return nil
	}
}

// WithStateDir keeps each probe's stable result and current run in dir and
// restores them for containers whose ID has not changed when the agent
// starts again, so that an agent restart never turns a ready container not
// ready. The state is read in NewManager and written at most once a
// second, and when Run ends.
func WithStateDir(dir string) Option {
	return func(m *Manager) error {
		m.stateDir = dir
		// A state that cannot be read costs only the continuity: Run
		// says so and probing starts from kubelet's initial values.
		m.restoredState, m.stateErr = loadProbeState(dir)
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
		results:       store,
		workers:       map[workerKey]*workerHandle{},
		finished:      map[workerKey]string{},
		reported:      map[string]bool{},
		resyncAt:      map[string]time.Time{},
		annotations:   map[string]annotationSpec{},
		policies:      map[string]string{},
		histories:     map[workerKey]*results.History{},
		policyChanges: keyNotifier{ready: make(chan struct{}, 1)},
		exited:        make(chan *workerHandle),
		jitter:        rand.Float64,
		hostIP:        "127.0.0.1",
		metrics:       newMetrics(),
	}
	for _, opt := range opts {
		if err := opt(m); err != nil {
			return nil, err
		}
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.runner == nil {
		if execRunner == nil {
			return nil, fmt.Errorf("an exec runner is required")
		}
		m.runner = &dispatcher{exec: execRunner, http: netprobe.NewHTTPGet()}
	}
	m.start = m.clock.Now()
	if m.noStartupJitter {
		m.start = time.Time{} // as if up for ages: no worker jitters
	}
	empty := map[string]*podStatus{}
	m.views.Store(&empty)
	return m, nil
}

// podStatus implements statusReader for the workers.
func (m *Manager) podStatus(key string) (*podStatus, bool) {
	s, ok := (*m.views.Load())[key]
	return s, ok
}

// Run follows the poller's changes (and the manifests, if any) and keeps
// the workers in step until ctx is done; then it stops them and waits.
func (m *Manager) Run(ctx context.Context, changes *cri.Subscription) {
	logger := klog.FromContext(ctx)
	if m.recorder == nil {
		m.recorder = events.Log(logger)
	}
	updates := m.results.Subscribe()
	defer updates.Close()
	resync := m.clock.NewTicker(time.Second)
	defer resync.Stop()
	var manifestsChanged <-chan struct{}
	if m.manifests != nil {
		manifestsChanged = m.manifests.Changed()
	}
	defer m.stopAll()
	defer m.saveState(logger) // before the workers stop and drop their results
	if m.stateErr != nil {
		logger.Error(m.stateErr, "Probe state not restored")
	} else if m.stateDir != "" {
		logger.Info("Restoring the probes' state", "stateDir", m.stateDir, "probes", len(m.restoredState))
	}

	var snap *cri.Snapshot
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Ready():
			b := changes.Next()
			snap = b.Snapshot
			m.reconcile(ctx, snap)
			if b.Resync {
				m.syncAll()
			}
			for _, ev := range b.Events {
				m.syncPod(ev.Pod.Key())
			}
		case <-manifestsChanged:
			m.reconcile(ctx, snap)
			m.syncAll()
		case <-updates.Ready():
			for _, u := range updates.Next() {
				// kubelet syncs the pod on every readiness and startup
				// change and on liveness failures.
				if u.Type == results.Liveness && u.Result != results.Failure {
					continue
				}
				m.syncPod(u.PodUID)
			}
		case h := <-m.exited:
			if m.workers[h.w.key] == h {
				delete(m.workers, h.w.key)
				if !h.stopping {
					m.finished[h.w.key] = h.exitID
				}
			}
			m.reconcile(ctx, snap)
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

// reconcile matches specs to the snapshot, publishes the workers' view and
// starts and stops workers to match. Repeating it changes nothing.
type desiredWorker struct {
	pod       *pod
	container *podContainer
	probe     *corev1.Probe
}

// resumeResults publishes, before the pods are, the results a previous
// agent left (--state-dir) for the containers about to get workers: a
// ready container is never seen not ready while its worker starts (and
// waits out its start-up jitter).
func (m *Manager) resumeResults(desired map[workerKey]desiredWorker) {
	if m.restoredState == nil {
		return
	}
	for key, d := range desired {
		if _, running := m.workers[key]; running || d.container.instance == nil {
			continue
		}
		k := results.Key{ContainerID: d.container.instance.ID, Type: key.probeType}
		if _, known := m.results.Get(k); known {
			continue
		}
		if sv, ok := m.restoredState[k]; ok {
			m.results.Set(k, resumedResult(key.probeType, sv), key.pod)
		}
	}
}

func (m *Manager) reconcile(ctx context.Context, snap *cri.Snapshot) {
	var manifests []*spec.Pod
	var manifestErrs []*spec.Error
	if m.manifests != nil {
		manifests, manifestErrs = m.manifests.Pods()
	}
	res := resolve(snap, manifests, manifestErrs, m.annotationSpec(snap))
	m.reportProblems(ctx, manifestErrs, res)

	views := make(map[string]*podStatus, len(res.pods))
	desired := map[workerKey]desiredWorker{}
	for _, p := range res.pods {
		if !p.probed() || (m.podFilter != nil && !m.podFilter(p.namespace, p.name)) {
			continue
		}
		views[p.key] = p.status(m.hostIP, m.probeNetwork)
		for name, pc := range p.containers {
			if pc.spec == nil {
				continue
			}
			for _, t := range results.ProbeTypes {
				if probe := pc.spec.Probe(t); probe != nil {
					desired[workerKey{pod: p.key, container: name, probeType: t}] = desiredWorker{pod: p, container: pc, probe: probe}
				}
			}
		}
	}
	byKey := make(map[string]*pod, len(res.pods))
	for _, p := range res.pods {
		byKey[p.key] = p
	}
	m.resumeResults(desired)
	m.views.Store(&views)
	m.pods.Store(&res.pods)
	m.byKey.Store(&byKey)
	m.notePolicies(res.pods)

	for key, h := range m.workers {
		d, ok := desired[key]
		if !ok || !sameWork(h.w, d.container.spec, d.probe) {
			// Replaced only once it has exited (see the exited case), so
			// that two workers never write the same result.
			if !h.stopping {
				h.stopping = true
				h.cancel()
			}
		}
	}
	for key, d := range desired {
		if _, running := m.workers[key]; running {
			continue
		}
		current := ""
		if d.container.instance != nil {
			current = d.container.instance.ID
		}
		if id, done := m.finished[key]; done {
			if id == current {
				continue // it stopped by itself; a new container wakes it
			}
			delete(m.finished, key)
		}
		m.startWorker(ctx, key, d.pod, d.container.spec, d.probe)
	}
	for key := range m.finished {
		if _, ok := desired[key]; !ok {
			delete(m.finished, key)
		}
	}
	m.historiesMu.Lock()
	for key := range m.histories {
		if _, ok := desired[key]; !ok {
			delete(m.histories, key)
		}
	}
	m.historiesMu.Unlock()
	for key := range m.resyncAt {
		if _, ok := views[key]; !ok {
			delete(m.resyncAt, key)
		}
	}
	for key := range views {
		if _, ok := m.resyncAt[key]; !ok {
			m.resyncAt[key] = m.nextResync()
		}
	}
}

// annotationSpec returns a function reading a container's annotations,
// each container parsed once: its config never changes.
func (m *Manager) annotationSpec(snap *cri.Snapshot) annotationReader {
	if snap != nil {
		for id := range m.annotations {
			if _, ok := snap.Container(id); !ok {
				delete(m.annotations, id)
			}
		}
	}
	return func(p *pod, c *cri.Container) (*spec.Container, []*spec.Error) {
		a, ok := m.annotations[c.ID]
		if !ok {
			a.spec, a.errs = spec.ContainerFromAnnotations(p.namespace, p.name, c.Name, c.Annotations)
			m.annotations[c.ID] = a
		}
		return a.spec, a.errs
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

func (m *Manager) startWorker(ctx context.Context, key workerKey, p *pod, c *spec.Container, probe *corev1.Probe) {
	wctx, cancel := context.WithCancel(ctx)
	w := &worker{
		key:       key,
		namespace: p.namespace,
		podName:   p.name,
		container: c,
		probe:     probe,
		initial:   initialResult(key.probeType),
		clock:     m.clock,
		status:    m,
		runner:    m.runner,
		results:   m.results,
		recorder:  m.recorder,
		trigger:   make(chan struct{}, 1),
		metrics:   m.metrics.forWorker(key.probeType, key.container, p.name, p.namespace, p.uid),
		lateness:  m.latenessObserver(),
		history:   m.history(key),
		restore:   m.restored,
	}
	h := &workerHandle{w: w, cancel: cancel}
	m.workers[key] = h
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		w.run(wctx, m.start, m.jitter)
		// The worker's goroutine is over: its fields are ours to read.
		if w.containerID != "" {
			m.results.Remove(w.resultKey())
		}
		w.metrics.delete()
		h.exitID = w.containerID
		select {
		case m.exited <- h:
		case <-ctx.Done():
		}
	}()
}

// history returns the history of a worker key, made on first use.
func (m *Manager) history(key workerKey) *results.History {
	m.historiesMu.Lock()
	defer m.historiesMu.Unlock()
	h, ok := m.histories[key]
	if !ok {
		h = results.NewHistory()
		m.histories[key] = h
	}
	return h
}

// ProbeHistory is one probe's recent runs, oldest first.
type ProbeHistory struct {
	Container string
	Type      results.ProbeType
	Recent    []results.Observation // the last runs, any outcome
	Failures  []results.Observation // the last failures and errors, kept apart
}

// History returns the recent runs of every probe of a pod (by its key,
// cri.Pod.Key), across its containers' restarts, by container then type.
func (m *Manager) History(podKey string) []ProbeHistory {
	m.historiesMu.Lock()
	var out []ProbeHistory
	var hs []*results.History
	for k, h := range m.histories {
		if k.pod == podKey {
			out = append(out, ProbeHistory{Container: k.container, Type: k.probeType})
			hs = append(hs, h)
		}
	}
	m.historiesMu.Unlock()
	for i, h := range hs {
		out[i].Recent, out[i].Failures = h.Snapshot()
	}
	slices.SortFunc(out, func(a, b ProbeHistory) int {
		if a.Container != b.Container {
			return strings.Compare(a.Container, b.Container)
		}
		return int(a.Type) - int(b.Type)
	})
	return out
}

// ProbeFailures returns the failures of one container instance's probe
// that reached the threshold: the last run of consecutive failures, oldest
// first (nil if its history has none).
func (m *Manager) ProbeFailures(podKey, container, containerID string, t results.ProbeType) []results.Observation {
	m.historiesMu.Lock()
	h, ok := m.histories[workerKey{pod: podKey, container: container, probeType: t}]
	m.historiesMu.Unlock()
	if !ok {
		return nil
	}
	_, all := h.Snapshot()
	end := len(all)
	for end > 0 && (all[end-1].ContainerID != containerID || all[end-1].Outcome != results.OutcomeFailure) {
		end--
	}
	if end == 0 {
		return nil
	}
	start := end - 1
	for start > 0 && all[start-1].ContainerID == containerID && all[start-1].Outcome == results.OutcomeFailure &&
		all[start-1].Consecutive == all[start].Consecutive-1 {
		start--
	}
	return all[start:end]
}

func (m *Manager) stopAll() {
	for _, h := range m.workers {
		h.cancel()
	}
	m.wg.Wait()
}

// syncPod does what kubelet's pod sync does for probes: a started
// container that is not ready gets its readiness probe run now rather than
// at its next tick.
func (m *Manager) syncPod(key string) {
	s, ok := m.podStatus(key)
	if !ok {
		return
	}
	for name, c := range s.containers {
		if !c.running() || !m.results.Started(c.id, true, c.hasStartupProbe) || m.results.Ready(c.id, true, true, c.hasReadinessProbe) {
			continue
		}
		if h, ok := m.workers[workerKey{pod: key, container: name, probeType: results.Readiness}]; ok {
			h.w.triggerNow()
		}
	}
	m.resyncAt[key] = m.nextResync()
}

func (m *Manager) syncAll() {
	for key := range *m.views.Load() {
		m.syncPod(key)
	}
}

func (m *Manager) nextResync() time.Time {
	return m.clock.Now().Add(time.Duration((1 + resyncJitter*m.jitter()) * float64(resyncInterval)))
}

// reportProblems logs each problem once while it lasts (again if it comes
// back after being fixed); container-level ones are also events.
func (m *Manager) reportProblems(ctx context.Context, manifestErrs []*spec.Error, res resolution) {
	logger := klog.FromContext(ctx)
	seen := map[string]bool{}
	report := func(e *spec.Error) {
		msg := e.Error()
		seen[msg] = true
		if m.reported[msg] {
			return
		}
		logger.Error(e, "Invalid probe configuration; fix it and it is picked up without a restart")
		if e.Pod != "" {
			m.recorder.Record(events.Event{Time: m.clock.Now(), Type: events.Warning, Reason: ReasonInvalidProbeConfig,
				Namespace: e.Namespace, Pod: e.Pod, Container: e.Container, Message: msg})
		}
	}
	for _, e := range manifestErrs {
		report(e)
	}
	for _, p := range res.pods {
		for _, e := range p.errs {
			if e.Source == "annotations" {
				report(e) // manifest errors were reported above
			}
		}
		for _, pc := range p.containers {
			for _, e := range pc.errs {
				report(e)
			}
		}
	}
	for _, w := range res.warnings {
		seen[w] = true
		if !m.reported[w] {
			logger.Info("Probe configuration warning", "warning", w)
		}
	}
	m.reported = seen
}

func (m *Manager) lookup(podKey string) (*pod, bool) {
	byKey := m.byKey.Load()
	if byKey == nil {
		return nil, false
	}
	p, ok := (*byKey)[podKey]
	return p, ok
}

// notePolicies records the managed pods' policies (published in byKey
// just before) and tells PolicyChanges' reader which ones are new or
// changed: the restarter may have looked at such a pod before the manager
// knew it (both read the same relist), and must look again.
func (m *Manager) notePolicies(pods []*pod) {
	next := make(map[string]string, len(m.policies))
	var changed []string
	for _, p := range pods {
		sig := p.policySignature()
		if sig == "" {
			continue
		}
		next[p.key] = sig
		if m.policies[p.key] != sig {
			changed = append(changed, p.key)
		}
	}
	m.policies = next
	m.policyChanges.add(changed)
}

// PolicyChanges is signalled when pods became managed or their restart
// policy or managed containers changed; ChangedPolicies returns them.
func (m *Manager) PolicyChanges() <-chan struct{} { return m.policyChanges.ready }

// ChangedPolicies returns the pod keys changed since the last call.
func (m *Manager) ChangedPolicies() []string { return m.policyChanges.take() }

// RestartPolicy returns a managed pod's restart policy and grace period
// (for the restarter); ok is false when cri-prober manages none of its
// containers.
func (m *Manager) RestartPolicy(podKey string) (corev1.RestartPolicy, int64, bool) {
	p, ok := m.lookup(podKey)
	if !ok {
		return "", 0, false
	}
	for _, pc := range p.containers {
		if pc.managed {
			return p.policy.RestartPolicy, p.policy.TerminationGracePeriodSeconds, true
		}
	}
	return "", 0, false
}

// Manages reports whether cri-prober may stop and restart the container.
func (m *Manager) Manages(podKey, container string) bool {
	p, ok := m.lookup(podKey)
	if !ok {
		return false
	}
	pc, ok := p.containers[container]
	return ok && pc.managed
}

// ProbeGracePeriod returns the terminationGracePeriodSeconds of a
// container's liveness or startup probe, if it sets one.
func (m *Manager) ProbeGracePeriod(podKey, container string, t results.ProbeType) *int64 {
	p, ok := m.lookup(podKey)
	if !ok {
		return nil
	}
	pc, ok := p.containers[container]
	if !ok || pc.spec == nil {
		return nil
	}
	if probe := pc.spec.Probe(t); probe != nil {
		return probe.TerminationGracePeriodSeconds
	}
	return nil
}

func (m *Manager) latenessObserver() prometheus.Observer {
	if m.extraLateness == nil {
		return m.metrics.lateness
	}
	return observers{m.metrics.lateness, m.extraLateness}
}

type observers []prometheus.Observer

func (os observers) Observe(v float64) {
	for _, o := range os {
		o.Observe(v)
	}
}

// keyNotifier collects keys for one reader and signals it without ever
// blocking the writer; keys added before the reader takes them are merged.
type keyNotifier struct {
	mu      sync.Mutex
	pending map[string]struct{}
	ready   chan struct{} // capacity 1
}

func (n *keyNotifier) add(keys []string) {
	if len(keys) == 0 {
		return
	}
	n.mu.Lock()
	if n.pending == nil {
		n.pending = map[string]struct{}{}
	}
	for _, k := range keys {
		n.pending[k] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.ready <- struct{}{}:
	default:
	}
}

func (n *keyNotifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	keys := make([]string, 0, len(n.pending))
	for k := range n.pending {
		keys = append(keys, k)
	}
	clear(n.pending)
	return keys
}
