package restart

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
// "block" waits until released or cancelled; anything else succeeds.
type fakeHooks struct {
	mu      sync.Mutex
	calls   []hookCall
	release chan struct{}
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
	syncs     atomic.Int64
}

// newRestartTest runs a restarter over pod ns/web (uid-web), whose
// manifest lists container app with the given restart policy and a 30 s
// grace period; change it with setSpec.
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
	rt.poller, err = cri.NewPoller(client, cri.WithClock(rt.clock))
	require.NoError(t, err)
	rt.resolver = pods.NewResolver(pods.WithManifests(rt.manifests), pods.WithRecorder(rt.events), pods.WithClock(rt.clock))
	rt.calls = &callLog{Runtime: client}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The poller relists when the test says, and when the restarter asks
	// (its ticker would be one more waiter on the fake clock).
	relister := &testRelister{poller: rt.poller, ctx: ctx, wg: &wg}
	opts = append([]Option{WithClock(rt.clock), WithRecorder(rt.events), WithHistories(rt.histories), WithRelister(relister),
		withJitter(func() float64 { return 0 }), withSyncDone(func() { rt.syncs.Add(1) })}, opts...)
	rt.r, err = New(rt.calls, rt.hooks, rt.store, opts...)
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
	st := rt.r.Status()
	p, ok := st.Pod("uid-web")
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

// instances returns the container's instances as the resolver sees them.
func (rt *restartTest) instances(name string) []*cri.Container {
	p, ok := rt.resolver.View().Pod("uid-web")
	if !ok {
		return nil
	}
	c, ok := p.Container(name)
	if !ok {
		return nil
	}
	return c.Instances
}

// current returns the container's current instance as the pods' status
// (what the prober and the API read) shows it.
func (rt *restartTest) current(name string) *cri.Container {
	p, ok := rt.r.Status().Pod("uid-web")
	if !ok {
		return nil
	}
	c, ok := p.Container(name)
	if !ok {
		return nil
	}
	return c.Current
}

func TestLivenessFailureRestartsTheContainer(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.fail(id, results.Liveness)

	rt.eventually(t, "replacement started", rt.hasEvent("Started: Container started"))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
	grace, ok := rt.rt.StopTimeout(id)
	assert.True(t, ok)
	assert.Equal(t, int64(30), grace, "the pod's grace period")
	assert.Equal(t, id, rt.containers()[1].Annotations[cri.AnnotationRestartOf])
	assert.Equal(t, []string{
		"Killing: Container app failed liveness probe, will be restarted",
		"Created: Container created",
		"Started: Container started",
	}, rt.events.messages())
	// Kill, then create (kubelet's order): no replacement exists while the
	// old instance stops.
	assert.Equal(t, []string{"stop " + id, "create app"}, rt.calls.list())
}

// One failure, one restart, however often the pod is looked at meanwhile.
func TestOneFailureOneRestart(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.fail(id, results.Liveness)
	for range 5 {
		rt.fail(id, results.Liveness)
		rt.store.Set(results.Key{ContainerID: id, Type: results.Startup}, results.Failure, "uid-web")
	}
	rt.eventually(t, "restarted", rt.hasEvent("Started: Container started"))
	for range 3 {
		rt.relist(t)
	}
	rt.eventually(t, "settled", func() bool { return len(rt.states()) == 2 })
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
}

func TestExitsRestartPerPolicy(t *testing.T) {
	always, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever
	rule42 := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	tests := []struct {
		name      string
		policy    corev1.RestartPolicy
		container spec.Container
		exitCode  int32
		restart   bool
	}{
		{name: "Always, exit 0", policy: corev1.RestartPolicyAlways, exitCode: 0, restart: true},
		{name: "Always, exit 2", policy: corev1.RestartPolicyAlways, exitCode: 2, restart: true},
		{name: "OnFailure, exit 0", policy: corev1.RestartPolicyOnFailure, exitCode: 0, restart: false},
		{name: "OnFailure, exit 2", policy: corev1.RestartPolicyOnFailure, exitCode: 2, restart: true},
		{name: "Never, exit 2", policy: corev1.RestartPolicyNever, exitCode: 2, restart: false},
		{name: "the container's Always under Never", policy: corev1.RestartPolicyNever, container: spec.Container{RestartPolicy: &always}, exitCode: 0, restart: true},
		{name: "the container's Never under Always", policy: corev1.RestartPolicyAlways, container: spec.Container{RestartPolicy: &never}, exitCode: 1, restart: false},
		{name: "a rule for 42 under Never, exit 42", policy: corev1.RestartPolicyNever, container: spec.Container{RestartPolicy: &never, RestartPolicyRules: rule42}, exitCode: 42, restart: true},
		{name: "a rule for 42 under Never, exit 1", policy: corev1.RestartPolicyNever, container: spec.Container{RestartPolicy: &never, RestartPolicyRules: rule42}, exitCode: 1, restart: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRestartTest(t, tt.policy)
			rt.setSpec(func(p *spec.Pod) {
				c := tt.container
				c.Name = "app"
				p.Containers = []spec.Container{c, {Name: "keep"}} // keep: the pod is not over
			})
			id := rt.rt.AddContainer(rt.sandbox, "app", running)
			rt.rt.AddContainer(rt.sandbox, "keep", running)
			rt.relist(t)
			require.NoError(t, rt.rt.SetContainerState(id, exited, tt.exitCode))
			if tt.restart {
				rt.relist(t)
				rt.passSettle(t)
				rt.eventually(t, "restarted", func() bool { return slices.Contains(rt.states(), "app#1:CONTAINER_RUNNING") })
				return
			}
			rt.relistAndSettle(t)
			assert.NotContains(t, rt.states(), "app#1:CONTAINER_RUNNING")
		})
	}
}

func TestCrashLoopBacksOff(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)

	crash := func(attempt uint32) time.Time {
		t.Helper()
		var cur string
		for _, c := range rt.containers() {
			if c.Attempt == attempt {
				cur = c.ID
			}
		}
		require.NotEmpty(t, cur, "attempt %d", attempt)
		at := rt.clock.Now()
		require.NoError(t, rt.rt.SetContainerState(cur, exited, 1))
		rt.relist(t)
		rt.passSettle(t)
		return at
	}
	crash(0)
	rt.eventually(t, "first restart at once", rt.runs("app#1"))
	require.Equal(t, id, rt.containers()[0].ID)
	rt.relist(t)

	crashed := crash(1)
	rt.eventually(t, "back-off reported", rt.hasEvent("BackOff: Back-off restarting failed container app in pod web_ns(uid-web)"))
	// The status shows it at the sync's end, after the event (as kubelet's
	// reasonCache).
	rt.eventually(t, "back-off shown", func() bool { _, ok := rt.waiting("app"); return ok })
	w, _ := rt.waiting("app")
	assert.Equal(t, WaitingCrashLoop, w.Reason)
	assert.Equal(t, crashed.Add(10*time.Second), w.Until, "10 s from the exit")

	// Step only once the worker waits on the clock: a step before it sets
	// its timer would push the timer's end past the steps below.
	rt.eventually(t, "the worker waits out the back-off", rt.clock.HasWaiters)
	rt.clock.Step(9 * time.Second)
	rt.relist(t)
	assert.Len(t, rt.containers(), 2, "still backing off")
	rt.clock.Step(time.Second)
	rt.eventually(t, "restarted after 10 s", func() bool {
		s := rt.states()
		return len(s) == 2 && s[1] == "app#2:CONTAINER_RUNNING"
	})
	assert.Equal(t, "app#1:CONTAINER_EXITED", rt.states()[0], "the older exited instance is removed, the last kept")
	rt.eventually(t, "no longer waiting once restarted", func() bool { _, ok := rt.waiting("app"); return !ok })
	rt.relist(t)

	crashed = crash(2)
	rt.eventually(t, "backing off again, 20 s", func() bool {
		w, ok := rt.waiting("app")
		return ok && w.Until.Equal(crashed.Add(20*time.Second))
	})
	st := rt.r.Status()
	_, ok := st.Pod("uid-web")
	require.True(t, ok)
	assert.True(t, st.For("uid-web").Initialized, "its syncs saw it initialized: kubelet's Initialized stays True")
}

// A pod removed and made again with the same UID (a static pod's manifest
// put back) backs off where it left off, as kubelet does: its back-off
// is keyed by UID and kept until it expires.
func TestBackoffOutlivesThePod(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(id, exited, 1))
	rt.relist(t)
	rt.passSettle(t)
	rt.eventually(t, "first restart at once", rt.runs("app#1"))
	rt.relist(t)

	again := rt.makeAgainBackingOff(t, nil)
	assert.Len(t, rt.rt.Containers(again), 1, "not restarted at once")
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

// A worker whose pod went away leaves no timer behind: a restart whose
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

// An exit is restarted only if the sandbox is still ready a moment later:
// stopping a pod kills its containers first.
func TestExitOfAPodBeingStoppedIsNotRestarted(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(id, exited, 137))
	rt.relist(t)
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	_, err := rt.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: rt.sandbox})
	require.NoError(t, err)
	before := rt.syncs.Load()
	rt.clock.Step(exitSettle)
	rt.eventually(t, "a pass after the settle", func() bool { return rt.syncs.Load() > before })
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states())
}

// The runtime failing while an exit is due for a restart is the agent's
// trouble: the restart is tried again, not dropped.
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

// The liveness kill sequence observed on kubelet (§11): kills 1–3 restart
// at once, kill 4 waits 20 s.
func TestRepeatedLivenessKillsBackOffLikeKubelet(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	current := func() (string, uint32) {
		var id string
		var attempt uint32
		for _, c := range rt.containers() {
			if c.State == running && c.Attempt >= attempt {
				id, attempt = c.ID, c.Attempt
			}
		}
		return id, attempt
	}
	for kill := 1; kill <= 3; kill++ {
		rt.clock.Step(12 * time.Second)
		id, attempt := current()
		require.NotEmpty(t, id)
		rt.fail(id, results.Liveness)
		rt.eventually(t, "restarted at once", func() bool { _, a := current(); return a == attempt+1 })
		rt.relist(t)
		rt.eventually(t, "the restart seen", func() bool { c := rt.current("app"); return c != nil && c.Attempt == attempt+1 })
	}
	rt.clock.Step(12 * time.Second)
	id, attempt := current()
	rt.fail(id, results.Liveness)
	rt.eventually(t, "kill 4 backs off", func() bool { w, ok := rt.waiting("app"); return ok && w.Reason == WaitingCrashLoop })
	_, a := current()
	assert.Equal(t, uint32(0), a, "nothing running while backing off")
	rt.eventually(t, "the worker waits out the back-off", rt.clock.HasWaiters)
	rt.clock.Step(19 * time.Second)
	rt.relist(t)
	_, a = current()
	assert.Zero(t, a)
	rt.clock.Step(time.Second)
	rt.eventually(t, "restarted after 20 s", func() bool { _, a := current(); return a == attempt+1 })
}

func TestUnmanagedContainersAreNeverTouched(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.rt.AddContainer(rt.sandbox, "app", running)
	other := rt.rt.AddContainer(rt.sandbox, "other", running)
	rt.relist(t)
	rt.fail(other, results.Liveness)
	require.NoError(t, rt.rt.SetContainerState(other, exited, 1))
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING", "other#0:CONTAINER_EXITED"}, rt.states())
	assert.Empty(t, rt.events.messages())
}

// After an agent restart: a replacement found created but not started is
// started; a container whose newer instance runs is left alone.
func TestResumesAfterAgentRestart(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	old := rt.rt.AddContainer(rt.sandbox, "app", exited)
	rt.rt.AddContainer(rt.sandbox, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old}))
	rt.relist(t)
	rt.eventually(t, "ours: started", func() bool {
		s := rt.states()
		return len(s) == 2 && s[1] == "app#1:CONTAINER_RUNNING"
	})
	rt.eventually(t, "and told", rt.hasEvent("Started: Container started"))
	assert.Len(t, rt.events.messages(), 1)
}

// An agent killed after creating a replacement but before its stop took
// effect: the old instance still runs. Starting the replacement would run
// two; it is removed instead, and the running one is left to its probes.
func TestInterruptedRestartWithTheOldInstanceRunning(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	old := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.rt.AddContainer(rt.sandbox, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old}))
	rt.relist(t)
	rt.eventually(t, "the replacement removed and told", rt.hasEvent("AbandonedRestart: Removed container app (attempt 1) left by an interrupted restart: the instance it was to replace is still running and will be probed again"))
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, rt.states())
	assert.Len(t, rt.events.messages(), 1)

	// If it fails its probe again, it is restarted once, as attempt 1.
	rt.relist(t)
	rt.eventually(t, "the removal seen", func() bool { return len(rt.instances("app")) == 1 })
	rt.fail(old, results.Liveness)
	rt.eventually(t, "restarted", rt.hasEvent("Started: Container started"))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
}

// A pod that becomes managed (its manifest appears) after the restarter
// first saw it is looked at again: the resolver says it changed.
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

func TestSomeoneElsesCreatedContainerIsNotStarted(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.rt.AddContainer(rt.sandbox, "app", created) // a harness between create and start
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"app#0:CONTAINER_CREATED"}, rt.states())
}

// preStop runs before the stop, and its time comes off the grace period;
// postStart runs after the replacement starts, and until it is over the
// old instance stays the container's current one (nothing probes the new
// one before its hook is done, as under kubelet).
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

// A failed postStart kills the container (event FailedPostStartHook, kill
// message FailedPostStartHook, the pod's grace period) and it is restarted
// with back-off.
func TestFailedPostStartHook(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.setSpec(func(p *spec.Pod) {
		p.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: hook("postStart", "fail")}
	})
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.eventually(t, "the spec seen", func() bool { p, _ := rt.resolver.View().Pod("uid-web"); return p != nil && p.Source != "" })
	require.NoError(t, rt.rt.SetContainerState(id, exited, 1))
	rt.relist(t)
	rt.passSettle(t)
	rt.eventually(t, "the hook failed and the container was killed", rt.hasEvent("Killing: FailedPostStartHook"))
	assert.Equal(t, []string{
		"Created: Container created",
		"Started: Container started",
		"FailedPostStartHook: PostStartHook failed",
		"Killing: FailedPostStartHook",
	}, rt.events.messages()[:4], "the hook's output stays out of events")
	replacement := rt.hooks.called()[0].containerID
	rt.eventually(t, "stopped with the pod's grace period", func() bool { g, ok := rt.rt.StopTimeout(replacement); return ok && g == 30 })
	rt.relist(t)
	rt.eventually(t, "restarted with back-off", func() bool { w, ok := rt.waiting("app"); return ok && w.Reason == WaitingCrashLoop })
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
