package restart

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
)

// fakeManifests is a ManifestSource the test sets.
type fakeManifests struct {
	mu      sync.Mutex
	pods    []*spec.Pod
	changed chan struct{}
}

func (f *fakeManifests) Pods() ([]*spec.Pod, []*spec.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods, nil
}

func (f *fakeManifests) Changed() <-chan struct{} { return f.changed }

func (f *fakeManifests) set(p ...*spec.Pod) {
	f.mu.Lock()
	f.pods = p
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

type recorded struct {
	mu   sync.Mutex
	list []events.Event
}

func (r *recorded) Record(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, e)
}

func (r *recorded) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.list {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// hookCall is one lifecycle hook the restarter ran.
type hookCall struct {
	kind        string // postStart or preStop
	containerID string
}

// fakeHooks runs lifecycle handlers by their exec command: "fail" fails,
// "block" waits until released or cancelled, "call" calls during (what a
// synchronous test does while the hook runs); anything else succeeds.
type fakeHooks struct {
	mu      sync.Mutex
	calls   []hookCall
	release chan struct{}
	during  func(lifecycle.Target)
}

func (f *fakeHooks) Run(ctx context.Context, h *corev1.LifecycleHandler, t lifecycle.Target) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, hookCall{kind: h.Exec.Command[0], containerID: t.ContainerID})
	f.mu.Unlock()
	switch h.Exec.Command[1] {
	case "fail":
		return "secret output", errors.New("exit 3")
	case "block":
		select {
		case <-f.release:
			return "", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	case "call":
		f.during(t)
	}
	return "", nil
}

func (f *fakeHooks) called() []hookCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// hook is a handler fakeHooks understands.
func hook(kind, behaviour string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{kind, behaviour}}}
}

// callLog is the Runtime the restarter is given: the real client, with
// every mutating call noted in order.
type callLog struct {
	Runtime
	mu    sync.Mutex
	calls []string
}

func (l *callLog) note(call string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
}

func (l *callLog) StopContainer(ctx context.Context, id string, grace int64) error {
	l.note("stop " + id)
	return l.Runtime.StopContainer(ctx, id, grace)
}

func (l *callLog) CreateContainer(ctx context.Context, sandbox string, cfg *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	l.note("create " + cfg.GetMetadata().GetName())
	return l.Runtime.CreateContainer(ctx, sandbox, cfg, sbc)
}

func (l *callLog) StopPodSandbox(ctx context.Context, id string) error {
	l.note("stopp")
	return l.Runtime.StopPodSandbox(ctx, id)
}

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

type restartTest struct {
	rt        *fakeruntime.Runtime
	poller    *cri.Poller
	resolver  *pods.Resolver
	manifests *fakeManifests
	manifest  *spec.Pod
	store     *results.Store
	histories *results.Histories
	clock     *testingclock.FakeClock
	events    *recorded
	hooks     *fakeHooks
	calls     *callLog
	r         *Restarter
	sandbox   string
}

// newRestartTest runs a restarter over pod ns/web (uid-web), whose
// manifest lists container app with the given restart policy and a 30 s
// grace period; change it with setSpec. It is the whole pipeline (the CRI
// server over gRPC, the poller, the resolver, Run and the pod workers'
// goroutines), for tests of that wiring: a decision of pod sync is tested
// with syncTest (execute_test.go), which calls the sync directly.
func newRestartTest(t *testing.T, policy corev1.RestartPolicy, opts ...Option) *restartTest {
	t.Helper()
	rt := &restartTest{
		rt:        fakeruntime.NewForTest(t),
		store:     results.NewStore(),
		histories: results.NewHistories(),
		clock:     testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		events:    &recorded{},
		hooks:     &fakeHooks{release: make(chan struct{})},
		manifests: &fakeManifests{changed: make(chan struct{}, 1)},
		manifest: &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: policy, TerminationGracePeriodSeconds: 30,
			Containers: []spec.Container{{Name: "app"}}},
	}
	rt.manifests.set(rt.manifest)
	rt.rt.SetClock(rt.clock.Now)
	rt.sandbox = rt.rt.AddSandbox("ns", "web", "uid-web")
	client, err := cri.Dial(context.Background(), rt.rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	rt.poller, err = cri.NewPoller(client, cri.PollerConfig{}, cri.WithClock(rt.clock))
	require.NoError(t, err)
	rt.resolver = pods.NewResolver(pods.ResolverConfig{}, pods.WithManifests(rt.manifests), pods.WithRecorder(rt.events), pods.WithClock(rt.clock))
	rt.calls = &callLog{Runtime: client}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The poller relists when the test says, and when the restarter asks
	// (its ticker would be one more waiter on the fake clock).
	relister := &testRelister{poller: rt.poller, ctx: ctx, wg: &wg}
	opts = append([]Option{WithClock(rt.clock), WithRecorder(rt.events), WithHistories(rt.histories), WithRelister(relister),
		withJitter(func() float64 { return 0 })}, opts...)
	rt.r, err = New(rt.calls, rt.hooks, rt.store, Config{}, opts...)
	require.NoError(t, err)

	criSub, sub := rt.poller.Watch(), rt.resolver.Subscribe()
	wg.Go(func() { rt.resolver.Run(ctx, criSub) })
	wg.Go(func() { rt.r.Run(ctx, sub) })
	t.Cleanup(func() { cancel(); wg.Wait(); sub.Close(); criSub.Close() })
	return rt
}

// testRelister relists at once when the restarter asks.
type testRelister struct {
	poller *cri.Poller
	ctx    context.Context
	wg     *sync.WaitGroup
}

func (r *testRelister) Trigger() {
	r.wg.Go(func() { r.poller.Relist(r.ctx) }) //nolint:errcheck // an error shows as no new listing
}

func (r *testRelister) Relists() uint64 { return r.poller.Relists() }

// setSpec changes the pod's manifest.
func (rt *restartTest) setSpec(change func(*spec.Pod)) {
	p := *rt.manifest
	p.Containers = slices.Clone(p.Containers)
	change(&p)
	rt.manifest = &p
	rt.manifests.set(&p)
}

func (rt *restartTest) relist(t *testing.T) {
	t.Helper()
	_, err := rt.poller.Relist(context.Background())
	require.NoError(t, err)
}

func (rt *restartTest) fail(id string, probe results.ProbeType) {
	rt.store.Set(results.Key{ContainerID: id, Type: probe}, results.Failure, "uid-web")
}

func (rt *restartTest) containers() []fakeruntime.ContainerInfo { return rt.rt.Containers(rt.sandbox) }

// states renders the pod's instances as "name#attempt:state".
func (rt *restartTest) states() []string {
	var out []string
	for _, c := range rt.containers() {
		out = append(out, c.Name+"#"+strconv.Itoa(int(c.Attempt))+":"+c.State.String())
	}
	return out
}

// passSettle lets the settle time after an exit pass, once the pod's
// worker waits for it, and lists the runtime then.
func (rt *restartTest) passSettle(t *testing.T) {
	t.Helper()
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	rt.clock.Step(exitSettle)
	rt.relist(t)
}

// waiting says why the pod's status shows container name waiting.
func (rt *restartTest) waiting(name string) (pods.Waiting, bool) {
	return waitingOf(rt.r, "uid-web", name)
}

// waitingOf says why r's status (what the prober and the API read) shows
// container name of pod key waiting.
func waitingOf(r *Restarter, key, name string) (pods.Waiting, bool) {
	st := r.Status()
	p, ok := st.Pod(key)
	if !ok {
		return pods.Waiting{}, false
	}
	if _, ok := p.Container(name); !ok {
		return pods.Waiting{}, false
	}
	w, ok := st.For(p.Key).Waiting[name]
	return w, ok
}

// relistAndSettle relists after a change and waits until the restarter has
// made its pass over the pod: for asserting that nothing was done.
func (rt *restartTest) relistAndSettle(t *testing.T) {
	t.Helper()
	snap, err := rt.poller.Relist(context.Background())
	require.NoError(t, err)
	rt.eventually(t, "the listing handled", func() bool { return rt.r.quiet(snap.Seq) })
}

// relistUntil lists the runtime until cond holds: for what shows only in a
// listing made after the restarter acted.
func (rt *restartTest) relistUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	rt.eventually(t, what, func() bool {
		if cond() {
			return true
		}
		rt.relist(t)
		return false
	})
}

func (rt *restartTest) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A deadline, not a wait: generous for `go test -race ./...` running
	// every package at once on a 2-core CI machine.
	require.Eventually(t, cond, 15*time.Second, time.Millisecond, what)
}

// runs says whether the container's instance ("name#attempt") has been
// started: a test that makes it exit before then races the restart.
func (rt *restartTest) runs(instance string) func() bool {
	return func() bool { return slices.Contains(rt.states(), instance+":CONTAINER_RUNNING") }
}

func (rt *restartTest) hasEvent(msg string) func() bool {
	return func() bool { return slices.Contains(rt.events.messages(), msg) }
}

// current returns the container's current instance as the pods' status
// (what the prober and the API read) shows it.
func (rt *restartTest) current(name string) *cri.Container { return currentOf(rt.r, "uid-web", name) }

// currentOf returns the current instance of container name of pod key as
// r's status shows it.
func currentOf(r *Restarter, key, name string) *cri.Container {
	p, ok := r.Status().Pod(key)
	if !ok {
		return nil
	}
	c, ok := p.Container(name)
	if !ok {
		return nil
	}
	return c.Current
}

// Wiring: the worker's own timer, not a listing, ends a back-off. The
// sync that backs off sets it for the back-off's end; it does not fire
// before, and when it does, its sync asks for the listing it needs and
// restarts. TestSyncCrashLoopBacksOff has the decisions.
func TestBackoffEndsOnTheWorkersTimer(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)

	crash := func(attempt uint32) {
		t.Helper()
		var cur string
		for _, c := range rt.containers() {
			if c.Attempt == attempt {
				cur = c.ID
			}
		}
		require.NotEmpty(t, cur, "attempt %d", attempt)
		require.NoError(t, rt.rt.SetContainerState(cur, exited, 1))
		rt.relist(t)
		rt.passSettle(t)
	}
	crash(0)
	rt.eventually(t, "first restart at once", rt.runs("app#1"))
	rt.relist(t)

	crash(1)
	rt.eventually(t, "back-off shown", func() bool { w, ok := rt.waiting("app"); return ok && w.Reason == WaitingCrashLoop })
	// Step only once the worker waits on the clock: a step before it sets
	// its timer would push the timer's end past the steps below.
	rt.eventually(t, "the worker waits out the back-off", rt.clock.HasWaiters)
	rt.clock.Step(9 * time.Second)
	rt.relist(t)
	assert.Len(t, rt.containers(), 2, "still backing off")
	rt.clock.Step(time.Second)
	rt.eventually(t, "restarted after 10 s (the dead instances left to the garbage collection)", func() bool {
		s := rt.states()
		return len(s) == 3 && s[2] == "app#2:CONTAINER_RUNNING"
	})
}

// makeAgainBackingOff removes the pod and makes it again with the same UID,
// its container app exited, and waits until that exit backs off. gone, if
// set, is checked once the first pod is gone.
func (rt *restartTest) makeAgainBackingOff(t *testing.T, gone func()) string {
	t.Helper()
	rt.rt.DeleteSandbox(rt.sandbox)
	rt.relist(t)
	rt.eventually(t, "the pod is gone", func() bool { _, ok := rt.r.Status().Pod("uid-web"); return !ok })
	if gone != nil {
		gone()
	}
	again := rt.rt.AddSandbox("ns", "web", "uid-web")
	rt.rt.AddContainer(again, "app", exited)
	rt.relist(t)
	rt.passSettle(t)
	rt.eventually(t, "backing off from the first pod's restart", func() bool {
		w, ok := rt.waiting("app")
		return ok && w.Reason == WaitingCrashLoop
	})
	return again
}

// Wiring: a worker whose pod went away leaves no timer behind: a restart whose
// start failed retries on a timer, and that timer stopping with the worker
// is what lets the pod made again wait out its settle time and back off.
func TestGoneWorkerLeavesNoTimer(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(id, exited, 1))
	rt.rt.SetError("StartContainer", status.Error(codes.Unavailable, "runtime busy"))
	rt.relist(t)
	rt.passSettle(t)
	rt.eventually(t, "the restart's start failed", func() bool {
		w, ok := rt.waiting("app")
		return ok && w.Reason == "RunContainerError"
	})
	rt.eventually(t, "the worker waits to retry", rt.clock.HasWaiters)
	rt.rt.SetError("StartContainer", nil)

	rt.makeAgainBackingOff(t, func() {
		rt.eventually(t, "its timer stopped", func() bool { return !rt.clock.HasWaiters() })
	})
}

// Wiring: the runtime failing while an exit is due for a restart is the
// agent's trouble: the listing the sync asks for after the settle time
// fails, nothing is done on the older one, and the restart is tried again
// with the next listing, not dropped.
func TestExitRestartSurvivesARuntimeError(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(id, exited, 1))
	rt.relist(t)
	// The listing after the settle time, which tells whether the sandbox
	// is still ready, fails: nothing is restarted on an old picture.
	rt.rt.SetError("ListContainers", status.Error(codes.Unavailable, "runtime down"))
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	listings := rt.rt.Calls("ListContainers")
	rt.clock.Step(exitSettle)
	rt.eventually(t, "the listing asked for failed", func() bool { return rt.rt.Calls("ListContainers") > listings })
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states())
	rt.rt.SetError("ListContainers", nil)
	rt.relist(t)
	rt.eventually(t, "restarted once the runtime answers", rt.hasEvent("Started: Container started"))
}

// Wiring: a pod that becomes managed (its manifest appears) after the
// restarter first saw it is looked at again: the resolver says it changed.
func TestPodManagedAfterTheRestarterSawIt(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.manifests.set() // not known yet
	id := rt.rt.AddContainer(rt.sandbox, "app", exited)
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states(), "unknown: left alone")

	rt.manifests.set(rt.manifest)
	// Past the exit settle time, stepping until the restarter, which
	// learns of the spec asynchronously, has set its timer and acted.
	started := rt.hasEvent("Started: Container started")
	rt.eventually(t, "restarted once known", func() bool {
		if started() {
			return true
		}
		rt.clock.Step(time.Minute)
		return false
	})
	assert.Equal(t, id, rt.containers()[1].Annotations[cri.AnnotationRestartOf])
}

// Wiring: preStop runs before the stop, and the time it takes on the
// clock comes off the grace period; postStart runs after the replacement
// starts, and until it is over the old instance stays the container's
// current one across listings (nothing probes the new one before its hook
// is done, as under kubelet). Both hooks block the worker's goroutine
// while the test lists the runtime and steps the clock.
func TestLifecycleHooks(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.setSpec(func(p *spec.Pod) {
		p.TerminationGracePeriodSeconds = 10
		p.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: hook("preStop", "block"), PostStart: hook("postStart", "block")}
	})
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.eventually(t, "the spec seen", func() bool { p, _ := rt.resolver.View().Pod("uid-web"); return p != nil && p.Source != "" })
	rt.fail(id, results.Liveness)
	rt.eventually(t, "preStop running", func() bool { return len(rt.hooks.called()) == 1 })
	assert.Equal(t, hookCall{kind: "preStop", containerID: id}, rt.hooks.called()[0])
	assert.Empty(t, rt.calls.list(), "no stop while preStop runs")
	rt.eventually(t, "the grace timer set", rt.clock.HasWaiters)
	rt.clock.Step(3 * time.Second)
	rt.hooks.release <- struct{}{} // preStop done after 3 s
	rt.eventually(t, "stopped", func() bool { _, ok := rt.rt.StopTimeout(id); return ok })
	grace, _ := rt.rt.StopTimeout(id)
	assert.Equal(t, int64(7), grace, "10 s less the 3 s the hook took")

	rt.eventually(t, "postStart running", func() bool { return len(rt.hooks.called()) == 2 })
	replacement := rt.hooks.called()[1].containerID
	assert.Equal(t, "postStart", rt.hooks.called()[1].kind)
	assert.NotEqual(t, id, replacement)
	rt.relist(t)
	rt.eventually(t, "the replacement listed", func() bool { return len(rt.containers()) == 2 })
	rt.relist(t)
	assert.Equal(t, id, rt.current("app").ID, "the old instance stays current while postStart runs")
	rt.hooks.release <- struct{}{}
	rt.relistUntil(t, "the replacement current once started and listed", func() bool { c := rt.current("app"); return c != nil && c.ID == replacement })
}

func TestNextLogPath(t *testing.T) {
	assert.Equal(t, "app/1.log", nextLogPath("app/0.log", 1))
	assert.Equal(t, "app_12.log", nextLogPath("app_3.log", 12))
	assert.Equal(t, "app.log.2", nextLogPath("app.log", 2))
	assert.Equal(t, "", nextLogPath("", 1))
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"recreate", "stop", "none"} {
		m, err := ParseMode(s)
		assert.NoError(t, err)
		assert.Equal(t, Mode(s), m)
	}
	_, err := ParseMode("sometimes")
	assert.EqualError(t, err, `restart mode "sometimes": want recreate, stop or none`)
}
