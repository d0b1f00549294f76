package prober

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// scriptedRunner answers probes by the first exec argument (or the handler
// kind), so each probe of a test can be told apart and scripted.
type scriptedRunner struct {
	mu      sync.Mutex
	answers map[string]results.Result // by probe name; default success
	calls   map[string]int
}

func probeName(p *corev1.Probe) string {
	switch {
	case p.Exec != nil:
		return p.Exec.Command[0]
	case p.HTTPGet != nil:
		return "http"
	case p.TCPSocket != nil:
		return "tcp"
	default:
		return "grpc"
	}
}

func (s *scriptedRunner) probe(_ context.Context, p *corev1.Probe, _ Target) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := probeName(p)
	s.calls[name]++
	if r, ok := s.answers[name]; ok && r == results.Failure {
		return outcome{result: results.Failure, raw: results.OutcomeFailure, output: name + " failed"}
	}
	return outcome{result: results.Success, raw: results.OutcomeSuccess}
}

func (s *scriptedRunner) set(name string, r results.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[name] = r
}

func (s *scriptedRunner) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// fakeManifests is a ManifestSource the test sets.
type fakeManifests struct {
	mu      sync.Mutex
	pods    []*spec.Pod
	errs    []*spec.Error
	changed chan struct{}
}

func (f *fakeManifests) Pods() ([]*spec.Pod, []*spec.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods, f.errs
}

func (f *fakeManifests) setErrors(errs ...*spec.Error) {
	f.mu.Lock()
	f.errs = errs
	f.mu.Unlock()
	f.changed <- struct{}{}
}

func (f *fakeManifests) Changed() <-chan struct{} { return f.changed }

func (f *fakeManifests) set(pods ...*spec.Pod) {
	f.mu.Lock()
	f.pods = pods
	f.mu.Unlock()
	f.changed <- struct{}{}
}

type managerTest struct {
	rt        *fakeruntime.Runtime
	poller    *cri.Poller
	resolver  *pods.Resolver
	m         *Manager
	store     *results.Store
	runner    *scriptedRunner
	clock     *testingclock.FakeClock
	manifests *fakeManifests
	events    *eventList
}

func newManagerTest(t *testing.T) *managerTest {
	t.Helper()
	return newManagerTestConfig(t, Config{})
}

func newManagerTestConfig(t *testing.T, cfg Config) *managerTest {
	t.Helper()
	mt := &managerTest{
		rt:        fakeruntime.NewForTest(t),
		store:     results.NewStore(),
		runner:    &scriptedRunner{answers: map[string]results.Result{}, calls: map[string]int{}},
		clock:     testingclock.NewFakeClock(time.Now()),
		manifests: &fakeManifests{changed: make(chan struct{}, 1)},
		events:    &eventList{},
	}
	mt.rt.SetClock(mt.clock.Now)
	client, err := cri.Dial(context.Background(), mt.rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	mt.poller, err = cri.NewPoller(client, cri.PollerConfig{})
	require.NoError(t, err)
	mt.m, err = NewManager(nil, mt.store, cfg, withRunner(mt.runner), withJitter(func() float64 { return 0 }),
		WithClock(mt.clock), WithRecorder(mt.events))
	require.NoError(t, err)
	mt.resolver = pods.NewResolver(pods.ResolverConfig{}, pods.WithManifests(mt.manifests), pods.WithRecorder(mt.events), pods.WithClock(mt.clock))
	// The agent has been up for a while: no start-up jitter.
	mt.clock.Step(time.Hour)

	criSub := mt.poller.Watch()
	sub := mt.resolver.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { mt.resolver.Run(ctx, criSub) })
	wg.Go(func() { mt.m.Run(ctx, sub) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		sub.Close()
		criSub.Close()
	})
	return mt
}

func (mt *managerTest) relist(t *testing.T) {
	t.Helper()
	_, err := mt.poller.Relist(context.Background())
	require.NoError(t, err)
}

func (mt *managerTest) report(name string) (pods.PodReport, bool) {
	for _, p := range mt.resolver.View().Pods() {
		if p.Name == name {
			return pods.ReportPod(p, pods.PodStatus{}, mt.store, pods.GateSet{}), true
		}
	}
	return pods.PodReport{}, false
}

func (mt *managerTest) container(t *testing.T, pod, name string) pods.ContainerReport {
	t.Helper()
	p, ok := mt.report(pod)
	require.True(t, ok, "pod %s not reported", pod)
	for _, c := range p.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("container %s/%s not reported", pod, name)
	return pods.ContainerReport{}
}

// lookup finds a container's report without failing: for conditions.
func (mt *managerTest) lookup(pod, name string) (pods.ContainerReport, bool) {
	p, ok := mt.report(pod)
	if !ok {
		return pods.ContainerReport{}, false
	}
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return pods.ContainerReport{}, false
}

func (mt *managerTest) ready(pod, name string) bool {
	c, ok := mt.lookup(pod, name)
	return ok && c.Ready
}

func (mt *managerTest) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

func probeJSON(command string, period int) string {
	return fmt.Sprintf(`{"exec":{"command":[%q]},"periodSeconds":%d}`, command, period)
}

func TestManagerProbesAnnotatedContainers(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 10)}))
	mt.rt.AddContainer(sb, "sidekick", runtimeapi.ContainerState_CONTAINER_RUNNING)
	mt.relist(t)

	mt.eventually(t, "app ready", func() bool { return mt.ready("web", "app") })
	app := mt.container(t, "web", "app")
	assert.True(t, app.Probed)
	assert.True(t, app.Started)
	require.Len(t, app.Probes, 1)
	assert.Equal(t, results.Readiness, app.Probes[0].Type)
	assert.Equal(t, results.Success, app.Probes[0].Result)
	require.NotNil(t, app.Probes[0].Last)
	assert.Equal(t, results.OutcomeSuccess, app.Probes[0].Last.Outcome)

	side := mt.container(t, "web", "sidekick")
	assert.False(t, side.Probed, "a container nothing covers is observed, never probed")
	assert.True(t, side.Ready, "no readiness probe: ready while running, as in kubelet")
	p, _ := mt.report("web")
	assert.Equal(t, "annotations", p.Source)
	assert.True(t, p.Ready)
}

// A probe's history outlives its container's restarts and goes with the
// pod.
func TestManagerHistory(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	first := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 10)}))
	mt.relist(t)
	mt.eventually(t, "probed", func() bool { return mt.ready("web", "app") })
	require.NoError(t, mt.rt.SetContainerState(first, runtimeapi.ContainerState_CONTAINER_EXITED, 1))
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 10)}))
	mt.relist(t)
	mt.eventually(t, "the new instance probed", func() bool {
		h := mt.m.Histories().For("uid-web")
		return len(h) == 1 && len(h[0].Recent) > 0 && h[0].Recent[len(h[0].Recent)-1].ContainerID != first
	})
	h := mt.m.Histories().For("uid-web")
	assert.Equal(t, "app", h[0].Container)
	assert.Equal(t, results.Readiness, h[0].Type)
	assert.Equal(t, first, h[0].Recent[0].ContainerID, "the first instance's runs are kept")

	mt.rt.DeleteSandbox(sb)
	mt.relist(t)
	mt.eventually(t, "gone with the pod", func() bool { return len(mt.m.Histories().For("uid-web")) == 0 })
}

func TestManagerReadinessFlips(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 1)}))
	mt.relist(t)
	mt.eventually(t, "ready", func() bool { return mt.ready("web", "app") })

	mt.runner.set("ready", results.Failure)
	// Failure threshold 3 (default): three periods.
	for i := 0; i < 3 && mt.ready("web", "app"); i++ {
		calls := mt.runner.count("ready")
		mt.clock.Step(time.Second)
		mt.eventually(t, "probed again", func() bool { return mt.runner.count("ready") > calls })
	}
	mt.eventually(t, "not ready", func() bool { return !mt.ready("web", "app") })
	p, _ := mt.report("web")
	assert.False(t, p.Ready)

	mt.runner.set("ready", results.Success)
	// Not ready: the failure's own pod sync already re-ran the probe, or the
	// next tick does.
	mt.clock.Step(time.Second)
	mt.eventually(t, "ready again", func() bool { return mt.ready("web", "app") })
}

// Contract (kubelet e2e "ready immediately after startupProbe succeeds"):
// with a long readiness period, readiness follows startup success at once.
func TestManagerReadinessRunsAsSoonAsStartupSucceeds(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	mt.runner.set("started", results.Failure)
	id := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{
			spec.StartupAnnotation:   `{"exec":{"command":["started"]},"periodSeconds":5,"failureThreshold":100}`,
			spec.ReadinessAnnotation: probeJSON("ready", 30),
		}))
	mt.relist(t)
	mt.eventually(t, "startup probed and readiness waiting", func() bool {
		_, readinessStepped := mt.store.Get(results.Key{ContainerID: id, Type: results.Readiness})
		return mt.runner.count("started") == 1 && readinessStepped
	})
	// The readiness worker's first tick ran while not started: no probe.
	assert.Zero(t, mt.runner.count("ready"))
	assert.False(t, mt.container(t, "web", "app").Started)

	mt.runner.set("started", results.Success)
	mt.clock.Step(5 * time.Second) // the next startup probe succeeds
	// Only 5 s of (fake) time pass: the 30 s readiness tick never comes,
	// so being ready proves the trigger. (How many readiness probes ran
	// depends on whether the readiness worker's first step saw Started.)
	mt.eventually(t, "ready without waiting for the 30 s readiness period", func() bool { return mt.ready("web", "app") })
}

func TestManagerInvalidAnnotationFailsClosed(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["x"]},"successThreshold":2}`}))
	for range 3 {
		mt.relist(t)
	}
	mt.eventually(t, "reported", func() bool { _, ok := mt.report("web"); return ok })
	app := mt.container(t, "web", "app")
	assert.False(t, app.Probed)
	assert.False(t, app.Ready, "what was asked to be checked is not checked: never ready")
	require.Len(t, app.Problems, 1)
	assert.Contains(t, app.Problems[0], "annotations: pod ns/web: container app: cri-prober.io/liveness-probe.successThreshold: Invalid value: 2: must be 1")
	assert.Zero(t, mt.runner.count("x"))
	invalid := func() int {
		n := 0
		for _, e := range mt.events.messages() {
			if strings.HasPrefix(e, ReasonInvalidProbeConfig) {
				n++
			}
		}
		return n
	}
	// The event follows the view's publication.
	mt.eventually(t, "the problem evented", func() bool { return invalid() > 0 })
	// Another change makes the resolver look at the pod again.
	mt.rt.AddSandbox("ns", "other", "uid-other")
	mt.relist(t)
	mt.eventually(t, "the next change resolved", func() bool { _, ok := mt.report("other"); return ok })
	assert.Equal(t, 1, invalid(), "reported once, not at every resolution")
}

func TestManagerManifestWinsOverAnnotations(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("shop", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("from-annotation", 10)}))
	mt.rt.AddContainer(sb, "extra", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("extra-annotation", 10)}))
	readiness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"from-manifest"}}}}
	spec.DefaultProbe(readiness)
	mt.manifests.set(&spec.Pod{Source: "pods.yaml:1", Namespace: "shop", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Readiness: readiness}}})
	mt.relist(t)

	// At least once: as in kubelet, the initial not-ready result triggers a
	// pod sync that runs the readiness probe once more.
	mt.eventually(t, "probed", func() bool { return mt.runner.count("from-manifest") >= 1 && mt.runner.count("extra-annotation") >= 1 })
	assert.Zero(t, mt.runner.count("from-annotation"), "the manifest wins for the containers it lists")
	p, _ := mt.report("web")
	assert.Equal(t, "pods.yaml:1", p.Source)
}

func TestManagerManifestForOtherUIDDoesNotApply(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("shop", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	readiness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"m"}}}}
	spec.DefaultProbe(readiness)
	mt.manifests.set(&spec.Pod{Source: "pods.yaml:1", Namespace: "shop", Name: "web", UID: "another-uid",
		Containers: []spec.Container{{Name: "app", Readiness: readiness}}})
	mt.relist(t)
	mt.eventually(t, "reported", func() bool { _, ok := mt.report("web"); return ok })
	assert.False(t, mt.container(t, "web", "app").Probed)
}

func TestManagerSpecChangeReplacesTheWorker(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("shop", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	probe := func(cmd string) *spec.Pod {
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}
		spec.DefaultProbe(p)
		return &spec.Pod{Source: "pods.yaml:1", Namespace: "shop", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []spec.Container{{Name: "app", Liveness: p}}}
	}
	mt.manifests.set(probe("v1"))
	mt.relist(t)
	mt.eventually(t, "v1 probed", func() bool { return mt.runner.count("v1") == 1 })

	mt.manifests.set(probe("v2"))
	mt.eventually(t, "v2 probed by a new worker", func() bool { return mt.runner.count("v2") == 1 })
	mt.clock.Step(10 * time.Second)
	mt.eventually(t, "v2 probed again", func() bool { return mt.runner.count("v2") == 2 })
	assert.Equal(t, 1, mt.runner.count("v1"), "the old worker is gone")
}

func TestManagerWorkersLeaveWithThePod(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	id := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.LivenessAnnotation: probeJSON("alive", 10)}))
	mt.relist(t)
	mt.eventually(t, "probed", func() bool { return mt.runner.count("alive") == 1 })
	_, ok := mt.store.Get(results.Key{ContainerID: id, Type: results.Liveness})
	require.True(t, ok)

	mt.rt.DeleteSandbox(sb)
	mt.relist(t)
	mt.eventually(t, "result removed with the worker", func() bool {
		_, ok := mt.store.Get(results.Key{ContainerID: id, Type: results.Liveness})
		return !ok
	})
	_, reported := mt.report("web")
	assert.False(t, reported)
}

func TestManagerRestartedContainerStartsOver(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	annotations := fakeruntime.WithAnnotations(map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["alive"]},"failureThreshold":1}`})
	first := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, annotations)
	mt.runner.set("alive", results.Failure)
	mt.relist(t)
	mt.eventually(t, "liveness failed", func() bool {
		r, _ := mt.store.Get(results.Key{ContainerID: first, Type: results.Liveness})
		return r == results.Failure
	})
	assert.Contains(t, mt.events.messages(), "LivenessProbeFailed: Container app failed liveness probe")

	// What a restarter does: stop it and start attempt 1.
	mt.clock.Step(time.Second)
	require.NoError(t, mt.rt.SetContainerState(first, runtimeapi.ContainerState_CONTAINER_EXITED, 137))
	second := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, annotations, fakeruntime.WithAttempt(1))
	mt.runner.set("alive", results.Success)
	mt.relist(t)
	mt.eventually(t, "the manager saw the new container", func() bool { c, _ := mt.lookup("web", "app"); return c.ID == second })
	// The worker sees the new container at a tick after its own view of
	// the pod changed, which may come after the manager's report: tick
	// until it has.
	mt.eventually(t, "the new container has its own result and is probed", func() bool {
		r, ok := mt.store.Get(results.Key{ContainerID: second, Type: results.Liveness})
		if ok && r == results.Success && mt.runner.count("alive") >= 2 {
			return true
		}
		mt.clock.Step(10 * time.Second)
		return false
	})
	_, ok := mt.store.Get(results.Key{ContainerID: first, Type: results.Liveness})
	assert.False(t, ok, "the old container's result is gone")
	c := mt.container(t, "web", "app")
	assert.Equal(t, second, c.ID)
	assert.Equal(t, uint32(1), c.Attempt)
}

// restartPolicy Never: a terminated container's workers stop and are not
// started again for the same container.
func TestManagerNeverPolicyStopsWorkersOfTerminatedContainers(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("ns", "job", "uid-job", fakeruntime.WithSandboxAnnotations(map[string]string{spec.RestartPolicyAnnotation: "Never"}))
	id := mt.rt.AddContainer(sb, "main", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 1)}))
	mt.rt.AddContainer(sb, "other", runtimeapi.ContainerState_CONTAINER_RUNNING)
	mt.relist(t)
	mt.eventually(t, "ready", func() bool { return mt.ready("job", "main") })

	require.NoError(t, mt.rt.SetContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED, 1))
	mt.relist(t)
	mt.eventually(t, "the manager saw the exit", func() bool { c, _ := mt.lookup("job", "main"); return c.State == cri.StateExited })
	// A tick after the worker's own view has the exit (which may come
	// after the manager's report) stops it.
	mt.eventually(t, "result removed when the worker stopped", func() bool {
		if _, ok := mt.store.Get(results.Key{ContainerID: id, Type: results.Readiness}); !ok {
			return true
		}
		mt.clock.Step(time.Second)
		return false
	})
	calls := mt.runner.count("ready")
	for range 3 {
		mt.relist(t)
		mt.clock.Step(time.Second)
	}
	_, ok := mt.store.Get(results.Key{ContainerID: id, Type: results.Readiness})
	assert.False(t, ok, "not restarted for the same container")
	assert.Equal(t, calls, mt.runner.count("ready"))
}

func TestNewManagerNeedsAnExecRunner(t *testing.T) {
	_, err := NewManager(nil, results.NewStore(), Config{})
	assert.ErrorContains(t, err, "exec runner is required")
}

// A pod whose manifest is invalid is not "unprobed": it is never ready.
func TestManagerInvalidManifestFailsClosed(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("shop", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	mt.rt.AddContainer(mt.rt.AddSandbox("shop", "other", "uid-other"), "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	bad := &spec.Error{Source: "pods.yaml:1", Namespace: "shop", Pod: "web", Container: "app", Field: "spec.containers[0].livenessProbe", Detail: "Required value: must specify a handler type"}
	mt.manifests.setErrors(bad)
	mt.relist(t)
	mt.eventually(t, "reported", func() bool { _, ok := mt.lookup("web", "app"); return ok })
	p, _ := mt.report("web")
	assert.False(t, p.Ready)
	assert.Equal(t, []string{bad.Error()}, p.Problems)
	assert.False(t, mt.container(t, "web", "app").Ready)
	assert.True(t, mt.ready("other", "app"), "other pods are not affected")
}

// Restartable init containers (sidecars) are probed like containers. As in
// kubelet 1.36, a running sidecar keeps a Never pod whose main container
// finished Running (the restarter then stops the pod); once the sidecar is
// stopped too the pod is over and its workers stop.
func TestManagerProbesSidecars(t *testing.T) {
	mt := newManagerTest(t)
	sb := mt.rt.AddSandbox("shop", "web", "uid-web")
	main := mt.rt.AddContainer(sb, "main", runtimeapi.ContainerState_CONTAINER_RUNNING)
	proxy := mt.rt.AddContainer(sb, "proxy", runtimeapi.ContainerState_CONTAINER_RUNNING)
	readiness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"proxy-ready"}}}}
	spec.DefaultProbe(readiness)
	mt.manifests.set(&spec.Pod{Source: "pods.yaml:1", Namespace: "shop", Name: "web", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []spec.Container{{Name: "proxy", Kind: spec.Sidecar, Readiness: readiness}, {Name: "main"}}})
	mt.relist(t)
	mt.eventually(t, "sidecar probed and ready", func() bool { return mt.runner.count("proxy-ready") >= 1 && mt.ready("web", "proxy") })

	require.NoError(t, mt.rt.SetContainerState(main, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	mt.relist(t)
	mt.eventually(t, "the main container's exit seen", func() bool {
		p, ok := mt.m.pod("uid-web")
		c, _ := p.Container("main")
		return ok && c.Current.State == cri.StateExited
	})
	p, _ := mt.m.pod("uid-web")
	assert.Equal(t, corev1.PodRunning, p.Phase, "the sidecar still runs")

	require.NoError(t, mt.rt.SetContainerState(proxy, runtimeapi.ContainerState_CONTAINER_EXITED, 137))
	_, err := mt.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	mt.relist(t)
	mt.eventually(t, "pod over once stopped", func() bool {
		p, ok := mt.m.pod("uid-web")
		return ok && p.Phase == corev1.PodSucceeded
	})
}

func TestRestartOfAnnotationIsTheOneCRIUses(t *testing.T) {
	assert.Equal(t, cri.AnnotationRestartOf, spec.RestartOfAnnotation)
}

// samples records what a lateness observer is given.
type samples struct {
	mu sync.Mutex
	vs []float64
}

func (s *samples) Observe(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vs = append(s.vs, v)
}

func (s *samples) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.vs)
}

// The load harness reads exact lateness through Config.Lateness: one
// sample per periodic tick, alongside the histogram.
func TestManagerLatenessObserverSeesEveryTick(t *testing.T) {
	late := &samples{}
	mt := newManagerTestConfig(t, Config{Lateness: late})
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
		fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 1)}))
	mt.relist(t)
	mt.eventually(t, "ready", func() bool { return mt.ready("web", "app") })
	require.Zero(t, late.count(), "the first probe runs at once, not on a tick")

	for tick := 1; tick <= 3; tick++ {
		calls := mt.runner.count("ready")
		mt.clock.Step(time.Second)
		mt.eventually(t, "probed on the tick", func() bool { return mt.runner.count("ready") > calls })
		mt.eventually(t, "one sample per tick", func() bool { return late.count() == tick })
	}
	late.mu.Lock()
	defer late.mu.Unlock()
	for _, v := range late.vs {
		assert.GreaterOrEqual(t, v, 0.0)
	}
}

// A harness that creates a container and starts it later (crictl create,
// then start) must not find a liveness or startup Failure waiting for it:
// the restarter would kill it for a probe that never ran.
func TestManagerCreatedContainerIsNotFailedBeforeItRuns(t *testing.T) {
	mt := newManagerTest(t)
	mt.runner.set("live", results.Success)
	sb := mt.rt.AddSandbox("ns", "web", "uid-web")
	id := mt.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_CREATED,
		fakeruntime.WithAnnotations(map[string]string{
			spec.LivenessAnnotation: probeJSON("live", 1),
			spec.StartupAnnotation:  `{"exec":{"command":["started"]},"periodSeconds":1,"failureThreshold":60}`,
		}))
	mt.relist(t)
	mt.eventually(t, "the manager saw the created container", func() bool {
		c, ok := mt.lookup("web", "app")
		return ok && c.State == cri.StateCreated
	})
	mt.eventually(t, "the workers stepped", func() bool {
		_, live := mt.store.Get(results.Key{ContainerID: id, Type: results.Liveness})
		_, start := mt.store.Get(results.Key{ContainerID: id, Type: results.Startup})
		return live && start
	})
	for range 3 { // several ticks while it waits to be started
		mt.clock.Step(time.Second)
		mt.relist(t)
	}
	for _, tt := range []struct {
		probe results.ProbeType
		bad   results.Result
	}{{results.Liveness, results.Failure}, {results.Startup, results.Failure}} {
		got, _ := mt.store.Get(results.Key{ContainerID: id, Type: tt.probe})
		assert.NotEqual(t, tt.bad, got, "%s result of a container that never ran", tt.probe)
	}
	assert.False(t, mt.ready("web", "app"), "not ready before it runs")
}
