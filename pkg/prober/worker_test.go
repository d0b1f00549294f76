package prober

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const (
	testPod       = "pod-uid"
	testContainer = "app"
	testID        = "container-1"
)

var (
	liveness  = results.Liveness
	readiness = results.Readiness
	startup   = results.Startup
	allTypes  = []results.ProbeType{liveness, readiness, startup}
)

// podStatus and containerStatus are what a worker test sets of its pod;
// fakeStatus gives the worker the pods.Pod they make.
type podStatus struct {
	key, namespace, name string
	phase                corev1.PodPhase
	terminating          bool
	ip                   string
	restartPolicy        corev1.RestartPolicy
	containers           map[string]containerStatus
}

type containerStatus struct {
	id              string
	state           cri.ContainerState
	startedAt       time.Time
	exitCode        int32
	hasStartupProbe bool
}

func (s *podStatus) toPod() *pods.Pod {
	p := &pods.Pod{Key: s.key, Namespace: s.namespace, Name: s.name, Phase: s.phase, Terminating: s.terminating, ProbeHost: s.ip,
		Sandbox: &cri.Sandbox{State: cri.SandboxReady, IPs: []string{s.ip}}, Policy: spec.PodPolicy{RestartPolicy: s.restartPolicy}}
	for name, c := range s.containers {
		pc := &pods.Container{Name: name, Spec: &spec.Container{Name: name}}
		if c.hasStartupProbe {
			pc.Spec.Startup = &corev1.Probe{}
		}
		if c.id != "" {
			pc.Current = &cri.Container{ID: c.id, Name: name, State: c.state, StartedAt: c.startedAt, ExitCode: c.exitCode}
			pc.Instances = []*cri.Container{pc.Current}
		}
		p.Containers = append(p.Containers, pc)
	}
	return p
}

// fakeStatus is a podReader whose pod the test sets.
type fakeStatus struct {
	mu     sync.Mutex
	status *podStatus
}

func (f *fakeStatus) pod(string) (*pods.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status == nil {
		return nil, false
	}
	return f.status.toPod(), true
}

func (f *fakeStatus) set(s *podStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
}

// fakeRunner answers probes with a canned outcome and counts calls.
type fakeRunner struct {
	mu    sync.Mutex
	next  outcome
	calls int
	// block, if set, holds probes until their context ends.
	block bool
	// gate, if set, holds probes until it is closed or a value is sent.
	gate chan struct{}
}

func (f *fakeRunner) probe(ctx context.Context, _ *corev1.Probe, _ Target) outcome {
	f.mu.Lock()
	f.calls++
	o, block, gate := f.next, f.block, f.gate
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return outcome{err: ctx.Err(), raw: results.OutcomeUnknown}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return outcome{err: ctx.Err(), raw: results.OutcomeUnknown}
		}
	}
	return o
}

func (f *fakeRunner) answer(r results.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r {
	case results.Success:
		f.next = outcome{result: results.Success, raw: results.OutcomeSuccess}
	default:
		f.next = outcome{result: results.Failure, raw: results.OutcomeFailure, output: "boom"}
	}
}

func (f *fakeRunner) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// events collects recorded events.
type eventList struct {
	mu   sync.Mutex
	list []events.Event
}

func (e *eventList) Record(ev events.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *eventList) all() []events.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func (e *eventList) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.list {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	return out
}

type workerTest struct {
	w       *worker
	clock   *testingclock.FakeClock
	status  *fakeStatus
	runner  *fakeRunner
	results *results.Store
	events  *eventList
	metrics *metrics
}

// Like kubelet's worker tests: period, timeout and thresholds 1 unless the
// probe says otherwise; restart policy Never; a running container that
// started just now, with no startup probe.
func newWorkerTest(t *testing.T, probeType results.ProbeType, tune func(*corev1.Probe)) *workerTest {
	t.Helper()
	p := &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 1,
	}
	if tune != nil {
		tune(p)
	}
	clk := testingclock.NewFakeClock(time.Unix(100000, 0))
	wt := &workerTest{clock: clk, status: &fakeStatus{}, runner: &fakeRunner{}, results: results.NewStore(), events: &eventList{}, metrics: newMetrics()}
	wt.runner.answer(results.Success)
	wt.status.set(wt.pod(containerStatus{id: testID, state: cri.StateRunning, startedAt: clk.Now()}))
	wt.w = &worker{
		key:       workerKey{pod: testPod, container: testContainer, probeType: probeType},
		namespace: "ns",
		podName:   "web",
		container: &spec.Container{Name: testContainer},
		probe:     p,
		initial:   initialResult(probeType),
		clock:     clk,
		pods:      wt.status,
		runner:    wt.runner,
		results:   wt.results,
		recorder:  wt.events,
		metrics:   wt.metrics.forWorker(probeType, testContainer, "web", "ns", testPod),
		lateness:  wt.metrics.lateness,
	}
	if probeType == startup {
		wt.setContainer(func(c *containerStatus) { c.hasStartupProbe = true })
	}
	return wt
}

func (wt *workerTest) pod(c containerStatus) *podStatus {
	return &podStatus{
		key: testPod, namespace: "ns", name: "web", phase: corev1.PodRunning, ip: "10.0.0.1",
		restartPolicy: corev1.RestartPolicyNever,
		containers:    map[string]containerStatus{testContainer: c},
	}
}

func (wt *workerTest) setContainer(change func(*containerStatus)) {
	s := *wt.status.status
	c := s.containers[testContainer]
	change(&c)
	s.containers = map[string]containerStatus{testContainer: c}
	wt.status.set(&s)
}

func (wt *workerTest) setPod(change func(*podStatus)) {
	s := *wt.status.status
	change(&s)
	wt.status.set(&s)
}

func (wt *workerTest) step(t *testing.T) bool {
	t.Helper()
	return wt.w.step(context.Background())
}

// result returns the cached result for the current container (ok=false:
// none).
func (wt *workerTest) result(id string) (results.Result, bool) {
	return wt.results.Get(results.Key{ContainerID: id, Type: wt.w.key.probeType})
}

func (wt *workerTest) expect(t *testing.T, id string, want results.Result) {
	t.Helper()
	got, ok := wt.result(id)
	require.True(t, ok, "no cached result for %s", id)
	assert.Equal(t, want, got)
}

// markStarted makes the container started, as a successful startup probe
// would.
func (wt *workerTest) markStarted() {
	wt.results.Set(results.Key{ContainerID: testID, Type: startup}, results.Success, testPod)
}

// waitingResult is what a created, not yet started container gets: kubelet's
// Failure for readiness; liveness and startup keep their initial values, so
// that starting it later does not find a Failure that no probe produced
// (kubelet never sees that gap: it starts what it creates in one sync).
func waitingResult(t results.ProbeType) *results.Result {
	r := initialResult(t)
	if t == readiness {
		r = results.Failure
	}
	return &r
}

func TestDoProbe(t *testing.T) {
	type row struct {
		name          string
		setup         func(wt *workerTest)
		wantKeepGoing bool
		want          *results.Result // nil: no result cached
	}
	success, failure := results.Success, results.Failure
	for _, probeType := range allTypes {
		rows := []row{
			{name: "no pod status", setup: func(wt *workerTest) { wt.status.set(nil) }, wantKeepGoing: true},
			{name: "pod failed", setup: func(wt *workerTest) { wt.setPod(func(s *podStatus) { s.phase = corev1.PodFailed }) }},
			{name: "pod succeeded", setup: func(wt *workerTest) { wt.setPod(func(s *podStatus) { s.phase = corev1.PodSucceeded }) }},
			{name: "no such container", setup: func(wt *workerTest) {
				wt.setPod(func(s *podStatus) { s.containers = map[string]containerStatus{} })
			}, wantKeepGoing: true},
			{name: "container without ID", setup: func(wt *workerTest) { wt.setContainer(func(c *containerStatus) { c.id = "" }) }, wantKeepGoing: true},
			{name: "container waiting", setup: func(wt *workerTest) { wt.setContainer(func(c *containerStatus) { c.state = cri.StateCreated }) }, wantKeepGoing: true, want: waitingResult(probeType)},
			{name: "container terminated, restartPolicy Never", setup: func(wt *workerTest) {
				wt.setContainer(func(c *containerStatus) { c.state = cri.StateExited })
			}, want: &failure},
			// kubelet 1.36 (ContainerRestartRules): the worker goes on only
			// if the container will be restarted, exit code considered.
			{name: "container failed, restartPolicy OnFailure", setup: func(wt *workerTest) {
				wt.setContainer(func(c *containerStatus) { c.state, c.exitCode = cri.StateExited, 1 })
				wt.setPod(func(s *podStatus) { s.restartPolicy = corev1.RestartPolicyOnFailure })
			}, wantKeepGoing: true, want: &failure},
			{name: "container succeeded, restartPolicy OnFailure", setup: func(wt *workerTest) {
				wt.setContainer(func(c *containerStatus) { c.state, c.exitCode = cri.StateExited, 0 })
				wt.setPod(func(s *podStatus) { s.restartPolicy = corev1.RestartPolicyOnFailure })
			}, want: &failure},
			{name: "container succeeded, restartPolicy Always", setup: func(wt *workerTest) {
				wt.setContainer(func(c *containerStatus) { c.state, c.exitCode = cri.StateExited, 0 })
				wt.setPod(func(s *podStatus) { s.restartPolicy = corev1.RestartPolicyAlways })
			}, wantKeepGoing: true, want: &failure},
			{name: "probe success", wantKeepGoing: true, want: &success},
			{name: "initial delay passed", setup: func(wt *workerTest) {
				wt.w.probe.InitialDelaySeconds = 10
				wt.setContainer(func(c *containerStatus) { c.startedAt = wt.clock.Now().Add(-100 * time.Second) })
			}, wantKeepGoing: true, want: &success},
		}
		// Pod shutting down: liveness and startup go quiet and stop;
		// readiness keeps probing.
		terminating := row{name: "pod terminating", setup: func(wt *workerTest) { wt.setPod(func(s *podStatus) { s.terminating = true }) }, want: &success}
		if probeType == readiness {
			terminating.wantKeepGoing = true
		}
		rows = append(rows, terminating)

		for _, tt := range rows {
			t.Run(probeType.String()+"/"+tt.name, func(t *testing.T) {
				wt := newWorkerTest(t, probeType, nil)
				if tt.setup != nil {
					tt.setup(wt)
				}
				assert.Equal(t, tt.wantKeepGoing, wt.step(t))
				got, ok := wt.result(testID)
				if tt.want == nil {
					assert.False(t, ok, "no result expected, got %v", got)
				} else {
					assert.True(t, ok)
					assert.Equal(t, *tt.want, got)
				}
			})
		}
	}
}

func TestInitialDelay(t *testing.T) {
	for _, probeType := range allTypes {
		t.Run(probeType.String(), func(t *testing.T) {
			wt := newWorkerTest(t, probeType, func(p *corev1.Probe) { p.InitialDelaySeconds = 10 })
			wt.clock.Step(9999 * time.Millisecond) // 9.999 s truncates to 9 < 10
			assert.True(t, wt.step(t))
			wt.expect(t, testID, initialResult(probeType))
			assert.Zero(t, wt.runner.callCount(), "not probed before the delay")

			wt.clock.Step(time.Millisecond) // 10 s: probing starts
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Success)
		})
	}
}

// Readiness, success 1, failure 3: failures below the threshold leave a
// Success standing, the third flips it; one success flips it back.
func TestFailureThreshold(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.FailureThreshold = 3 })
	for range 2 {
		for range 3 {
			wt.runner.answer(results.Success)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Success)
		}
		for range 2 {
			wt.runner.answer(results.Failure)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Success)
		}
		wt.runner.answer(results.Failure)
		assert.True(t, wt.step(t))
		wt.expect(t, testID, results.Failure)
	}
}

// Readiness, success 3, failure 1: it takes three successes to become
// ready, and one failure to stop being so.
func TestSuccessThreshold(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.SuccessThreshold = 3 })
	for range 2 {
		for range 2 {
			wt.runner.answer(results.Success)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Failure)
		}
		wt.runner.answer(results.Success)
		assert.True(t, wt.step(t))
		wt.expect(t, testID, results.Success)

		wt.runner.answer(results.Failure)
		assert.True(t, wt.step(t))
		wt.expect(t, testID, results.Failure)
	}
}

func TestStartupProbeSuccessHolds(t *testing.T) {
	wt := newWorkerTest(t, startup, nil)
	assert.True(t, wt.step(t))
	wt.expect(t, testID, results.Success)
	assert.True(t, wt.w.onHold)
	assert.Zero(t, wt.w.resultRun)
}

// Startup, failure 3: Unknown, Unknown, then Failure with the run reset and
// the worker on hold.
func TestStartupProbeFailureThreshold(t *testing.T) {
	wt := newWorkerTest(t, startup, func(p *corev1.Probe) { p.FailureThreshold = 3 })
	wt.runner.answer(results.Failure)
	for i, want := range []struct {
		result results.Result
		run    int
		hold   bool
	}{{results.Unknown, 1, false}, {results.Unknown, 2, false}, {results.Failure, 0, true}} {
		assert.True(t, wt.step(t))
		wt.expect(t, testID, want.result)
		assert.Equal(t, want.run, wt.w.resultRun, "probe %d", i+1)
		assert.Equal(t, want.hold, wt.w.onHold, "probe %d", i+1)
	}
}

func TestOnHoldAfterLivenessOrStartupFailure(t *testing.T) {
	for _, probeType := range []results.ProbeType{liveness, startup} {
		t.Run(probeType.String(), func(t *testing.T) {
			wt := newWorkerTest(t, probeType, nil)
			wt.runner.answer(results.Failure)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Failure)
			assert.True(t, wt.w.onHold)

			// On hold: a passing probe is not even run.
			wt.runner.answer(results.Success)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Failure)
			assert.Equal(t, 1, wt.runner.callCount())

			// A new container lifts the hold.
			wt.setContainer(func(c *containerStatus) { c.id = "container-2" })
			assert.True(t, wt.step(t))
			wt.expect(t, "container-2", results.Success)
			_, ok := wt.result(testID)
			assert.False(t, ok, "the old container's result is removed")
			if probeType == startup {
				assert.True(t, wt.w.onHold, "a startup probe holds again after success")
			} else {
				assert.False(t, wt.w.onHold)
			}
		})
	}
}

// A failed container whose kill waits (the restarter's restart budget or
// pause) is probed on instead of held: its failures go on being reported,
// and a recovery turns its result back to Success, so that a kill that
// goes ahead later acts on a current result. A startup success still
// holds.
func TestKillWaitsKeepsProbing(t *testing.T) {
	for _, probeType := range []results.ProbeType{liveness, startup} {
		t.Run(probeType.String(), func(t *testing.T) {
			wt := newWorkerTest(t, probeType, nil)
			waits := false
			wt.w.killWaits = func(id string) bool { return waits && id == testID }
			wt.runner.answer(results.Failure)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Failure)
			assert.True(t, wt.w.onHold)

			assert.True(t, wt.step(t))
			assert.Equal(t, 1, wt.runner.callCount(), "held while the kill does not wait")

			waits = true
			assert.True(t, wt.step(t))
			assert.Equal(t, 2, wt.runner.callCount(), "the kill waits: probed on")
			wt.expect(t, testID, results.Failure)

			wt.runner.answer(results.Success)
			assert.True(t, wt.step(t))
			assert.Equal(t, 3, wt.runner.callCount())
			wt.expect(t, testID, results.Success)
			if probeType == startup {
				assert.True(t, wt.w.onHold, "started: no more startup probes")
				assert.True(t, wt.step(t))
				assert.Equal(t, 3, wt.runner.callCount())
			}
		})
	}
}

// Liveness (and startup), failure 3: run counts 1,1,2 then Failure with the
// run reset to 0, so the next container gets a full threshold.
func TestResultRunOnLivenessAndStartupFailure(t *testing.T) {
	for _, tt := range []struct {
		probeType results.ProbeType
		before    results.Result // stable result while below the threshold
	}{{liveness, results.Success}, {startup, results.Unknown}} {
		t.Run(tt.probeType.String(), func(t *testing.T) {
			wt := newWorkerTest(t, tt.probeType, func(p *corev1.Probe) { p.FailureThreshold = 3 })
			steps := []struct {
				answer results.Result
				run    int
				want   results.Result
			}{
				{results.Success, 1, results.Success},
				{results.Failure, 1, tt.before},
				{results.Failure, 2, tt.before},
				{results.Failure, 0, results.Failure},
			}
			if tt.probeType == startup {
				// A startup success would hold the worker; start with a failure.
				steps = steps[1:]
			}
			for i, s := range steps {
				wt.runner.answer(s.answer)
				assert.True(t, wt.step(t))
				assert.Equal(t, s.run, wt.w.resultRun, "step %d", i)
				wt.expect(t, testID, s.want)
			}
		})
	}
}

// A container with a startup probe that has not succeeded: liveness and
// readiness are not run.
func TestLivenessAndReadinessWaitForStarted(t *testing.T) {
	for _, probeType := range []results.ProbeType{liveness, readiness} {
		t.Run(probeType.String(), func(t *testing.T) {
			wt := newWorkerTest(t, probeType, nil)
			wt.setContainer(func(c *containerStatus) { c.hasStartupProbe = true })
			wt.runner.answer(results.Failure)
			assert.True(t, wt.step(t))
			wt.expect(t, testID, initialResult(probeType))
			assert.Zero(t, wt.runner.callCount())

			wt.markStarted()
			assert.True(t, wt.step(t))
			wt.expect(t, testID, results.Failure)
		})
	}
}

// Startup, failure 2: F ⇒ Unknown; S ⇒ Success; once started, a failing
// startup probe is not run again.
func TestStartupProbeStopsOnceStarted(t *testing.T) {
	wt := newWorkerTest(t, startup, func(p *corev1.Probe) { p.FailureThreshold = 2 })
	wt.runner.answer(results.Failure)
	assert.True(t, wt.step(t))
	wt.expect(t, testID, results.Unknown)

	wt.runner.answer(results.Success)
	assert.True(t, wt.step(t))
	wt.expect(t, testID, results.Success)

	wt.w.onHold = false // even without the hold, Started stops it
	wt.runner.answer(results.Failure)
	assert.True(t, wt.step(t))
	wt.expect(t, testID, results.Success)
	assert.Equal(t, 2, wt.runner.callCount())
}

func TestProbeErrorsAreThrownAway(t *testing.T) {
	wt := newWorkerTest(t, liveness, nil)
	wt.runner.next = outcome{err: errors.New(`port "http" not found`), raw: results.OutcomeUnknown}
	for range 5 {
		assert.True(t, wt.step(t))
	}
	wt.expect(t, testID, results.Success) // the initial value stands
	assert.False(t, wt.w.onHold)
	assert.Zero(t, wt.w.resultRun)
	obs, ok := wt.results.LastObservation(results.Key{ContainerID: testID, Type: liveness})
	require.True(t, ok, "an error is visible")
	assert.Equal(t, results.OutcomeUnknown, obs.Outcome)
	assert.Equal(t, `port "http" not found`, obs.Err)
	assert.Contains(t, wt.events.messages(), `Unhealthy: Liveness probe errored and resulted in unknown state: port "http" not found`)
}

// The agent's own exhaustion (no file descriptor, no port) takes kubelet's
// error path (retried, Unknown, no threshold count, never a kill) and the
// warning names the agent, not the container.
func TestAgentResourceErrorsAreNotTheContainers(t *testing.T) {
	wt := newWorkerTest(t, liveness, nil)
	wt.runner.next = outcome{err: errors.New("agent out of file descriptors (EMFILE)"), raw: results.OutcomeUnknown, reason: ReasonAgentResources, resourceCause: "EMFILE"}
	for range 5 {
		assert.True(t, wt.step(t))
	}
	wt.expect(t, testID, results.Success) // the initial value stands: no kill
	assert.False(t, wt.w.onHold)
	assert.Zero(t, wt.w.resultRun)
	evs := wt.events.all()
	require.Len(t, evs, 5)
	assert.Equal(t, events.Warning, evs[0].Type)
	assert.Equal(t, ReasonAgentResourceExhausted, evs[0].Reason)
	assert.Equal(t, "Liveness probe could not run, the agent is out of resources: agent out of file descriptors (EMFILE); the result is unknown and not counted against the container", evs[0].Message)
	assert.Equal(t, 5.0, testutil.ToFloat64(wt.metrics.failures.WithLabelValues("Liveness", ReasonAgentResources)))
	assert.Equal(t, 5.0, testutil.ToFloat64(wt.metrics.agentResources.WithLabelValues("EMFILE")))
}

// Under --max-concurrent-exec-per-pod, a probe that waited a second or more
// for its pod's slot says so.
func TestExecQueueWaitIsReported(t *testing.T) {
	wt := newWorkerTest(t, readiness, nil)
	wt.runner.next = outcome{result: results.Success, raw: results.OutcomeSuccess, queued: 999 * time.Millisecond}
	assert.True(t, wt.step(t))
	assert.NotContains(t, strings.Join(wt.events.messages(), "\n"), ReasonExecProbeQueued, "short waits show in the metric only")
	wt.runner.next.queued = 2500 * time.Millisecond
	assert.True(t, wt.step(t))
	assert.Contains(t, wt.events.messages(), "ExecProbeQueued: Readiness probe waited 2.5s for an exec slot of the pod (--max-concurrent-exec-per-pod); the wait is not counted against its timeout")
}

// A new container gets the initial value and loses the hold, but, as in
// kubelet, the consecutive count carries over.
func TestNewContainerKeepsTheRun(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.SuccessThreshold = 3 })
	for range 2 {
		assert.True(t, wt.step(t))
	}
	wt.expect(t, testID, results.Failure)
	wt.setContainer(func(c *containerStatus) { c.id = "container-2" })
	assert.True(t, wt.step(t))
	wt.expect(t, "container-2", results.Success)
}

func TestProbeEvents(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.FailureThreshold = 2 })
	wt.runner.next = outcome{result: results.Success, raw: results.OutcomeWarning, output: "Probe terminated redirects, Response body: moved"}
	wt.step(t)
	wt.runner.next = outcome{result: results.Failure, raw: results.OutcomeFailure, output: "HTTP probe failed with statuscode: 500"}
	wt.step(t)
	wt.step(t)
	assert.Equal(t, []string{
		"ProbeWarning: Readiness probe warning: Probe terminated redirects, Response body: moved",
		"ContainerReady: Container app is ready",
		"Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 500",
		"Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 500",
		"ContainerNotReady: Container app is not ready: readiness probe failed 2 times in a row",
	}, wt.events.messages())
	ev := wt.events.list[0]
	assert.Equal(t, events.Event{Time: wt.clock.Now(), Type: events.Warning, Reason: ReasonProbeWarning, Namespace: "ns", Pod: "web", Container: "app",
		Message: "Readiness probe warning: Probe terminated redirects, Response body: moved"}, ev)

	obs, ok := wt.results.LastObservation(results.Key{ContainerID: testID, Type: readiness})
	require.True(t, ok)
	assert.Equal(t, 2, obs.Consecutive)
	assert.Equal(t, 2, obs.Threshold)
	assert.Equal(t, results.OutcomeFailure, obs.Outcome)
}

func TestTransitionEvents(t *testing.T) {
	tests := []struct {
		probeType results.ProbeType
		answer    results.Result
		want      string
	}{
		{liveness, results.Failure, "LivenessProbeFailed: Container app failed liveness probe"},
		{startup, results.Success, "StartupProbeSucceeded: Container app started: startup probe succeeded"},
		{startup, results.Failure, "StartupProbeFailed: Container app failed startup probe"},
		{readiness, results.Success, "ContainerReady: Container app is ready"},
	}
	for _, tt := range tests {
		wt := newWorkerTest(t, tt.probeType, nil)
		wt.runner.answer(tt.answer)
		wt.step(t)
		assert.Contains(t, wt.events.messages(), tt.want)
	}
	// Liveness success is the initial value: no news.
	wt := newWorkerTest(t, liveness, nil)
	wt.step(t)
	assert.Empty(t, wt.events.messages())
}

// --- the run loop, with a fake clock ---

type runningWorker struct {
	*workerTest
	sched  *scheduler
	task   *task
	cancel context.CancelFunc
	done   chan struct{} // closed when the worker exited
	loop   chan struct{} // closed when the scheduler's loop returned
}

// startWorker runs wt's worker on a scheduler of its own, as the manager
// does.
func startWorker(t *testing.T, wt *workerTest, agentStart time.Time, jitter float64) *runningWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rw := &runningWorker{workerTest: wt, sched: newScheduler(wt.clock, 0), cancel: cancel, done: make(chan struct{}), loop: make(chan struct{})}
	go func() {
		defer close(rw.loop)
		rw.sched.run(ctx)
	}()
	rw.task = rw.sched.add(ctx, wt.w, agentStart, func() float64 { return jitter }, func() { close(rw.done) })
	t.Cleanup(rw.stop)
	return rw
}

func (rw *runningWorker) stop() {
	rw.sched.stop(rw.task)
	<-rw.done
	rw.cancel()
	<-rw.loop
}

func (rw *runningWorker) waitCalls(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return rw.runner.callCount() >= n && rw.clock.HasWaiters() }, 5*time.Second, time.Millisecond,
		"want %d probe calls, have %d", n, rw.runner.callCount())
	assert.Equal(t, n, rw.runner.callCount())
}

func TestRunProbesEveryPeriod(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	rw.waitCalls(t, 1) // at once: the agent did not start recently
	wt.clock.Step(9 * time.Second)
	rw.waitCalls(t, 1)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 2)
	wt.clock.Step(10 * time.Second)
	rw.waitCalls(t, 3)
}

func TestRunJittersFirstProbeAfterAgentStart(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	rw := startWorker(t, wt, wt.clock.Now(), 0.5) // agent started just now
	require.Eventually(t, wt.clock.HasWaiters, 5*time.Second, time.Millisecond)
	wt.clock.Step(4 * time.Second)
	rw.waitCalls(t, 0)
	wt.clock.Step(time.Second) // half a period
	rw.waitCalls(t, 1)
}

// With a startInterval, the first probe after the agent's start is spread
// over that interval, not over the period.
func TestRunJittersOverTheStartInterval(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	wt.w.container.Extensions = map[results.ProbeType]*spec.Extensions{
		results.Readiness: {StartInterval: &metav1.Duration{Duration: time.Second}},
	}
	rw := startWorker(t, wt, wt.clock.Now(), 0.5)
	require.Eventually(t, wt.clock.HasWaiters, 5*time.Second, time.Millisecond)
	wt.clock.Step(400 * time.Millisecond)
	rw.waitCalls(t, 0)
	wt.clock.Step(100 * time.Millisecond) // half the start interval
	rw.waitCalls(t, 1)
}

func TestRunManualTriggerResetsTheTicker(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	rw.waitCalls(t, 1)
	wt.clock.Step(6 * time.Second)
	rw.sched.trigger(rw.task)
	rw.waitCalls(t, 2)
	wt.clock.Step(4 * time.Second) // the old schedule would probe now
	rw.waitCalls(t, 2)
	wt.clock.Step(6 * time.Second) // a full period after the manual probe
	rw.waitCalls(t, 3)
}

// startInterval (Docker's --start-interval): a fast pace until the
// container's probe first succeeds, periodSeconds after; a new container
// starts fast again.
func TestRunStartInterval(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	wt.w.container.Extensions = map[results.ProbeType]*spec.Extensions{
		results.Readiness: {StartInterval: &metav1.Duration{Duration: time.Second}},
	}
	wt.runner.answer(results.Failure)
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	rw.waitCalls(t, 1)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 2)
	wt.runner.answer(results.Success)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 3) // ready now
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 3)
	wt.clock.Step(8 * time.Second)
	rw.waitCalls(t, 3)
	wt.clock.Step(time.Second) // a full period after the success
	rw.waitCalls(t, 4)

	// Failures once ready do not bring the fast pace back…
	wt.runner.answer(results.Failure)
	wt.clock.Step(10 * time.Second)
	rw.waitCalls(t, 5)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 5)
	// …a new container does.
	wt.setPod(func(s *podStatus) {
		s.containers = map[string]containerStatus{testContainer: {id: "other", state: cri.StateRunning, startedAt: wt.clock.Now()}}
	})
	wt.clock.Step(9 * time.Second)
	rw.waitCalls(t, 6)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 7)
}

func TestRunEndsWhenStepSaysSo(t *testing.T) {
	wt := newWorkerTest(t, liveness, nil)
	wt.setPod(func(s *podStatus) { s.phase = corev1.PodSucceeded })
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	select {
	case <-rw.done:
	case <-time.After(5 * time.Second):
		t.Fatal("worker did not stop")
	}
}

func TestStopAbortsAProbeInFlight(t *testing.T) {
	wt := newWorkerTest(t, liveness, nil)
	wt.runner.block = true
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	require.Eventually(t, func() bool { return wt.runner.callCount() == 1 }, 5*time.Second, time.Millisecond)
	rw.sched.stop(rw.task)
	select {
	case <-rw.done:
	case <-time.After(5 * time.Second):
		t.Fatal("worker did not stop while probing")
	}
	assert.Empty(t, wt.events.messages(), "an aborted probe is not reported as an error")
}

// kubelet's counting: every probe that ran is counted by result; its
// duration is observed for successful (and unknown) ones only. Probes that
// could not run count as unknown (kubelet drops them uncounted).
func TestProbeMetrics(t *testing.T) {
	wt := newWorkerTest(t, liveness, func(p *corev1.Probe) { p.FailureThreshold = 5 })
	wt.step(t) // success
	wt.runner.answer(results.Failure)
	wt.step(t)
	wt.step(t)
	wt.runner.next = outcome{err: errors.New("no"), raw: results.OutcomeUnknown}
	wt.step(t)

	count := func(result string) float64 {
		return testutil.ToFloat64(wt.metrics.probes.WithLabelValues("Liveness", result, testContainer, "web", "ns", testPod))
	}
	assert.Equal(t, 1.0, count("successful"))
	assert.Equal(t, 2.0, count("failed"))
	assert.Equal(t, 1.0, count("unknown"))
	assert.Equal(t, 1, testutil.CollectAndCount(wt.metrics.duration), "one series")
	h := &dto.Metric{}
	require.NoError(t, wt.metrics.duration.WithLabelValues("Liveness", testContainer, "web", "ns").(prometheus.Histogram).Write(h))
	assert.Equal(t, uint64(2), h.GetHistogram().GetSampleCount(), "failures are not timed")

	wt.w.metrics.delete()
	assert.Zero(t, testutil.CollectAndCount(wt.metrics.probes))
	assert.Zero(t, testutil.CollectAndCount(wt.metrics.duration))
}

// Probe failures carry where they stand against the threshold (kubernetes
// #115823): in the event beside kubelet's message, and in the history, with
// the run that changed the result marked.
func TestFailuresCarryTheirCount(t *testing.T) {
	wt := newWorkerTest(t, liveness, func(p *corev1.Probe) { p.FailureThreshold = 3 })
	wt.w.history = results.NewHistory()
	wt.step(t) // success
	wt.runner.answer(results.Failure)
	for range 3 {
		wt.step(t)
	}
	var counted []string
	for _, e := range wt.events.all() {
		if e.Reason == ReasonUnhealthy {
			counted = append(counted, fmt.Sprintf("%s [%d/%d]", e.Message, e.Count, e.Threshold))
		}
	}
	assert.Equal(t, []string{
		"Liveness probe failed: boom [1/3]",
		"Liveness probe failed: boom [2/3]",
		"Liveness probe failed: boom [3/3]",
	}, counted, "kubelet's message, the count beside it")
	recent, failures := wt.w.history.Snapshot()
	require.Len(t, recent, 4)
	assert.Len(t, failures, 3)
	for i, o := range recent {
		assert.Equal(t, i == 3, o.Changed, "only the third failure changed the result (run %d)", i)
		assert.Equal(t, testID, o.ContainerID)
	}
	assert.Equal(t, 3, recent[3].Consecutive)
	assert.Equal(t, 3, recent[3].Threshold)
}

// Two pods with one name (re-created with a new UID) share kubelet's
// duration series, which has no pod_uid: it goes with the last worker.
func TestDurationSeriesSharedByTwoPodsOfOneName(t *testing.T) {
	m := newMetrics()
	old := m.forWorker(readiness, "app", "web", "ns", "uid-old")
	newer := m.forWorker(readiness, "app", "web", "ns", "uid-new")
	newer.observe(outcome{result: results.Success, raw: results.OutcomeSuccess}, 0.1)
	old.delete()
	assert.Equal(t, 1, testutil.CollectAndCount(m.duration), "still in use by the new pod's worker")
	newer.delete()
	assert.Zero(t, testutil.CollectAndCount(m.duration))
}
