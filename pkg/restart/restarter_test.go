package restart

import (
	"context"
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
	"github.com/cri-prober/cri-prober/pkg/results"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
)

// fakeSpecs is a SpecSource for one pod.
type fakeSpecs struct {
	mu         sync.Mutex
	podKey     string
	policy     corev1.RestartPolicy
	grace      int64
	managed    map[string]bool
	probeGrace *int64
	changes    chan struct{}
	changed    []string
}

// manage makes the pod managed from now on, as the manager does when it
// first resolves the pod's spec, and says so.
func (f *fakeSpecs) manage(key string) {
	f.mu.Lock()
	f.podKey = key
	f.changed = append(f.changed, key)
	f.mu.Unlock()
	f.changes <- struct{}{}
}

func (f *fakeSpecs) PolicyChanges() <-chan struct{} { return f.changes }

// ProbeFailures answers two failures of any container's probe.
func (f *fakeSpecs) ProbeFailures(_, _, containerID string, t results.ProbeType) []results.Observation {
	return []results.Observation{
		{Time: time.Unix(1_000_000, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 1, Threshold: 2, ContainerID: containerID},
		{Time: time.Unix(1_000_001, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 2, Threshold: 2, Changed: true, ContainerID: containerID},
	}
}

func (f *fakeSpecs) ChangedPolicies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.changed
	f.changed = nil
	return out
}

func (f *fakeSpecs) RestartPolicy(key string) (corev1.RestartPolicy, int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy, f.grace, key == f.podKey
}

func (f *fakeSpecs) Manages(key, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return key == f.podKey && f.managed[name]
}

func (f *fakeSpecs) ProbeGracePeriod(string, string, results.ProbeType) *int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probeGrace
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

type restartTest struct {
	rt      *fakeruntime.Runtime
	poller  *cri.Poller
	store   *results.Store
	specs   *fakeSpecs
	clock   *testingclock.FakeClock
	events  *recorded
	r       *Restarter
	sandbox string
}

func newRestartTest(t *testing.T, policy corev1.RestartPolicy, opts ...Option) *restartTest {
	t.Helper()
	rt := &restartTest{
		rt:     fakeruntime.NewForTest(t),
		store:  results.NewStore(),
		specs:  &fakeSpecs{podKey: "uid-web", policy: policy, grace: 30, managed: map[string]bool{"app": true}, changes: make(chan struct{}, 1)},
		clock:  testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		events: &recorded{},
	}
	rt.rt.SetClock(rt.clock.Now)
	rt.sandbox = rt.rt.AddSandbox("ns", "web", "uid-web")
	client, err := cri.Dial(context.Background(), rt.rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	rt.poller, err = cri.NewPoller(client)
	require.NoError(t, err)
	opts = append([]Option{WithClock(rt.clock), WithRecorder(rt.events), withJitter(func() float64 { return 0 })}, opts...)
	rt.r, err = New(client, rt.specs, rt.store, opts...)
	require.NoError(t, err)

	sub := rt.poller.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.r.Run(ctx, sub) }()
	t.Cleanup(func() { cancel(); <-done; sub.Close() })
	return rt
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
		out = append(out, c.Name+"#"+itoa(c.Attempt)+":"+c.State.String())
	}
	return out
}

func itoa(u uint32) string {
	return string(rune('0' + u)) // attempts stay below 10 in these tests
}

// passSettle lets the settle time after an exit pass, once the pod's
// worker waits for it.
func (rt *restartTest) passSettle(t *testing.T) {
	t.Helper()
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	rt.clock.Step(exitSettle)
}

// relistAndSettle relists after a change and waits until the restarter has
// made its pass over the pod: for asserting that nothing was done.
func (rt *restartTest) relistAndSettle(t *testing.T) {
	t.Helper()
	before := rt.r.syncs.Load()
	rt.relist(t)
	rt.eventually(t, "a pass over the pod", func() bool { return rt.r.syncs.Load() > before })
}

func (rt *restartTest) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

func (rt *restartTest) hasEvent(msg string) func() bool {
	return func() bool {
		for _, m := range rt.events.messages() {
			if m == msg {
				return true
			}
		}
		return false
	}
}

func TestLivenessFailureRestartsTheContainer(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.fail(id, results.Liveness)

	rt.eventually(t, "replacement started", rt.hasEvent("Started: Started container app"))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
	grace, ok := rt.rt.StopTimeout(id)
	assert.True(t, ok)
	assert.Equal(t, int64(30), grace, "the pod's grace period")
	assert.Equal(t, id, rt.containers()[1].Annotations[cri.AnnotationRestartOf])
	assert.Equal(t, []string{
		"Killing: Container app failed liveness probe, will be restarted",
		"Created: Created container app",
		"Started: Started container app",
	}, rt.events.messages())
}

func TestStartupFailureUsesTheProbeGracePeriod(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	five := int64(5)
	rt.specs.probeGrace = &five
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.fail(id, results.Startup)
	rt.eventually(t, "killed", rt.hasEvent("Killing: Container app failed startup probe, will be restarted"))
	rt.eventually(t, "stopped with the probe's grace period", func() bool { g, _ := rt.rt.StopTimeout(id); return g == 5 })
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
	rt.eventually(t, "restarted", rt.hasEvent("Started: Started container app"))
	for range 3 {
		rt.relist(t)
	}
	rt.eventually(t, "settled", func() bool { return len(rt.states()) == 2 })
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
}

func TestNeverPolicyStopsAndStopsTheSandbox(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyNever)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	rt.fail(id, results.Liveness)
	rt.eventually(t, "sandbox stopped", func() bool {
		s, _ := rt.rt.SandboxState(rt.sandbox)
		return s == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	})
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states())
	assert.Equal(t, []string{
		"Killing: Container app failed liveness probe",
		"StoppingPod: Stopping pod sandbox: no container left running (restartPolicy Never)",
	}, rt.events.messages())
}

func TestNeverPolicyKeepsTheSandboxWhileOthersRun(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyNever)
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.rt.AddContainer(rt.sandbox, "other", running)
	rt.relist(t)
	rt.fail(id, results.Liveness)
	rt.eventually(t, "killed", rt.hasEvent("Killing: Container app failed liveness probe"))
	s, _ := rt.rt.SandboxState(rt.sandbox)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, s)
}

func TestExitsRestartPerPolicy(t *testing.T) {
	tests := []struct {
		policy   corev1.RestartPolicy
		exitCode int32
		restart  bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 2, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 2, true},
		{corev1.RestartPolicyNever, 2, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+"/"+itoa(uint32(tt.exitCode)), func(t *testing.T) {
			rt := newRestartTest(t, tt.policy)
			id := rt.rt.AddContainer(rt.sandbox, "app", running)
			rt.relist(t)
			require.NoError(t, rt.rt.SetContainerState(id, exited, tt.exitCode))
			if tt.restart {
				rt.relist(t)
				rt.passSettle(t)
				rt.eventually(t, "restarted", func() bool { return len(rt.states()) == 2 })
				return
			}
			rt.relistAndSettle(t)
			assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states())
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
	rt.eventually(t, "first restart at once", func() bool { return len(rt.states()) == 2 })
	require.Equal(t, id, rt.containers()[0].ID)

	crashed := crash(1)
	rt.eventually(t, "back-off reported", rt.hasEvent("BackOff: Back-off restarting failed container app in pod web_ns(uid-web)"))
	w, ok := rt.r.Waiting("uid-web", "app")
	require.True(t, ok)
	assert.Equal(t, WaitingCrashLoop, w.Reason)
	assert.Equal(t, crashed.Add(10*time.Second), w.Until, "10 s from the exit")

	rt.clock.Step(9 * time.Second)
	rt.relist(t)
	assert.Len(t, rt.containers(), 2, "still backing off")
	rt.clock.Step(time.Second)
	rt.eventually(t, "restarted after 10 s", func() bool {
		s := rt.states()
		return len(s) == 2 && s[1] == "app#2:CONTAINER_RUNNING"
	})
	assert.Equal(t, "app#1:CONTAINER_EXITED", rt.states()[0], "the older exited instance is removed, the last kept")
	_, ok = rt.r.Waiting("uid-web", "app")
	assert.False(t, ok)

	crashed = crash(2)
	rt.eventually(t, "backing off again, 20 s", func() bool {
		w, ok := rt.r.Waiting("uid-web", "app")
		return ok && w.Until.Equal(crashed.Add(20*time.Second))
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
	before := rt.r.syncs.Load()
	rt.clock.Step(exitSettle)
	rt.eventually(t, "a pass after the settle", func() bool { return rt.r.syncs.Load() > before })
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
	rt.rt.SetError("PodSandboxStatus", status.Error(codes.Unavailable, "runtime down"))
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	before := rt.r.syncs.Load()
	rt.clock.Step(exitSettle)
	rt.eventually(t, "a pass that met the error", func() bool { return rt.r.syncs.Load() > before })
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states())
	rt.rt.SetError("PodSandboxStatus", nil)
	rt.eventually(t, "a retry is due", rt.clock.HasWaiters)
	rt.clock.Step(failedActionBackoff)
	rt.eventually(t, "restarted once the runtime answers", rt.hasEvent("Started: Started container app"))
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
	}
	rt.clock.Step(12 * time.Second)
	id, attempt := current()
	rt.fail(id, results.Liveness)
	rt.eventually(t, "kill 4 backs off", func() bool { w, ok := rt.r.Waiting("uid-web", "app"); return ok && w.Reason == WaitingCrashLoop })
	_, a := current()
	assert.Equal(t, uint32(0), a, "nothing running while backing off")
	rt.clock.Step(19 * time.Second)
	rt.relist(t)
	_, a = current()
	assert.Zero(t, a)
	rt.clock.Step(time.Second)
	rt.eventually(t, "restarted after 20 s", func() bool { _, a := current(); return a == attempt+1 })
}

func TestModes(t *testing.T) {
	t.Run("stop only", func(t *testing.T) {
		rt := newRestartTest(t, corev1.RestartPolicyAlways, WithMode(StopOnly))
		id := rt.rt.AddContainer(rt.sandbox, "app", running)
		rt.relist(t)
		rt.fail(id, results.Liveness)
		rt.eventually(t, "stopped", func() bool { return rt.states()[0] == "app#0:CONTAINER_EXITED" })
		rt.relistAndSettle(t)
		assert.Len(t, rt.states(), 1, "never re-created")
		assert.Equal(t, "Killing: Container app failed liveness probe", rt.events.messages()[0])
	})
	t.Run("none observes", func(t *testing.T) {
		rt := newRestartTest(t, corev1.RestartPolicyAlways, WithMode(Observe))
		id := rt.rt.AddContainer(rt.sandbox, "app", running)
		rt.relist(t)
		rt.fail(id, results.Liveness)
		rt.eventually(t, "reported", rt.hasEvent("WouldKill: Container app failed liveness probe and would be stopped and restarted (--restart=none: nothing done)"))
		assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, rt.states())
		_, stopped := rt.rt.StopTimeout(id)
		assert.False(t, stopped)
	})
}

func TestUnmanagedContainersAreNeverTouched(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	other := rt.rt.AddContainer(rt.sandbox, "other", running)
	rt.relist(t)
	rt.fail(other, results.Liveness)
	require.NoError(t, rt.rt.SetContainerState(other, exited, 1))
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"other#0:CONTAINER_EXITED"}, rt.states())
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
	rt.eventually(t, "and told", rt.hasEvent("Started: Started container app"))
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
	rt.fail(old, results.Liveness)
	rt.eventually(t, "restarted", rt.hasEvent("Started: Started container app"))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, rt.states())
}

// The restarter and the manager read the same relist; at the agent's
// start the restarter can look at a pod before the manager has resolved
// its spec. The manager's policy change brings it back.
func TestPodManagedAfterTheRestarterSawIt(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.specs.podKey = "" // not known yet
	id := rt.rt.AddContainer(rt.sandbox, "app", exited)
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, rt.states(), "unknown: left alone")

	rt.specs.manage("uid-web")
	rt.clock.Step(time.Minute) // past the exit settle time
	rt.eventually(t, "restarted once known", rt.hasEvent("Started: Started container app"))
	assert.Equal(t, id, rt.containers()[1].Annotations[cri.AnnotationRestartOf])
}

func TestSomeoneElsesCreatedContainerIsNotStarted(t *testing.T) {
	rt := newRestartTest(t, corev1.RestartPolicyAlways)
	rt.rt.AddContainer(rt.sandbox, "app", created) // a harness between create and start
	rt.relistAndSettle(t)
	assert.Equal(t, []string{"app#0:CONTAINER_CREATED"}, rt.states())
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
