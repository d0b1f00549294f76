package restart

import (
	"context"
	"errors"
	"strconv"
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

// fakeMaker makes static pods' configs without a host: the sandbox and
// container configs name what they are for; fail makes a container's
// config fail with it.
type fakeMaker struct {
	fail     map[string]error
	tornDown []string
	calls    []string
}

func (m *fakeMaker) Sandbox(_ context.Context, p *pods.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	m.calls = append(m.calls, "sandbox "+strconv.Itoa(int(attempt)))
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Namespace: p.Namespace, Name: p.Name, Uid: p.UID, Attempt: attempt},
		Annotations: agentsAnnotations(p.UID)}, nil
}

// agentsAnnotations are what the agent writes into the config of every
// sandbox it makes (spec.StaticPod): they make the sandbox its pod's.
func agentsAnnotations(uid string) map[string]string {
	return map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: uid}
}

func (m *fakeMaker) Container(_ context.Context, p *pods.Pod, sandbox *cri.Sandbox, c *pods.Container, attempt int64) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	m.calls = append(m.calls, "container "+c.Name+" "+strconv.Itoa(int(attempt)))
	if err := m.fail[c.Name]; err != nil {
		return nil, nil, err
	}
	if attempt < 0 {
		attempt = 0
	}
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(attempt)}},
		&runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Namespace: p.Namespace, Name: p.Name, Uid: p.UID, Attempt: sandbox.Attempt}}, nil
}

func (m *fakeMaker) TearDown(_ context.Context, p *pods.Pod) error {
	m.tornDown = append(m.tornDown, p.UID)
	return nil
}

// syncTest is one pod's sync on an in-memory runtime, called
// synchronously as its worker calls it (syncPod): no poller, no gRPC, no
// goroutine, no waiting.
type syncTest struct {
	rt     *fakeruntime.Runtime
	r      *Restarter
	w      *podWorker
	maker  *fakeMaker
	events *recorded
	hooks  *fakeHooks
	clock  *testingclock.FakeClock
	store  *results.Store
	calls  *callLog // the runtime's mutating calls, in order
	// listed publishes the views of the runtime the syncs read, as the
	// resolver does; seq numbers the listings view makes.
	listed pods.Publisher
	seq    uint64
	last   *pods.View // the view of the last listing
}

// newSyncTest readies a sync test; opts are the restarter's, after the
// test's own.
func newSyncTest(t *testing.T, opts ...Option) *syncTest {
	t.Helper()
	st := &syncTest{rt: fakeruntime.New(), maker: &fakeMaker{}, events: &recorded{}, hooks: &fakeHooks{release: make(chan struct{})},
		clock: testingclock.NewFakeClock(planNow), store: results.NewStore()}
	st.rt.SetClock(st.clock.Now)
	st.calls = &callLog{Runtime: st.rt.Direct()}
	var err error
	st.r, err = New(st.calls, st.hooks, st.store, Config{}, append([]Option{WithClock(st.clock), WithRecorder(st.events), WithMaker(st.maker)}, opts...)...)
	require.NoError(t, err)
	st.r.jitter = func() float64 { return 0 } // a back-off's retry at its expiry
	st.w = &podWorker{key: "uid", state: newPodState(), gone: make(chan struct{})}
	sub := st.listed.Subscribe()
	t.Cleanup(sub.Close)
	st.r.latest.Store(sub)
	return st
}

// view lists the in-memory runtime and returns the pod, resolved with
// manifest m: a static pod (made from spec) or someone else's.
func (st *syncTest) view(t *testing.T, m *spec.Pod, owned bool) *pods.Pod {
	t.Helper()
	in := pods.Inputs{Manifests: []*spec.Pod{m}}
	if owned {
		in = pods.Inputs{StaticPods: []*spec.Pod{m}}
	}
	p, ok := st.list(t, in).Pod("uid")
	require.True(t, ok)
	return p
}

// orphanView lists the in-memory runtime and returns static pod m as an
// orphan: the agent made it (its pod record is left) and its manifest m
// was removed.
func (st *syncTest) orphanView(t *testing.T, m *spec.Pod) *pods.Pod {
	t.Helper()
	p, ok := st.list(t, pods.Inputs{Records: map[string]pods.Record{m.UID: {Namespace: m.Namespace, Name: m.Name}},
		Removed: map[string]*spec.Pod{m.UID: m}}).Pod("uid")
	require.True(t, ok)
	require.True(t, p.Orphaned)
	return p
}

// list lists the in-memory runtime as the poller would, at the clock's
// time, and resolves its pods from in.
func (st *syncTest) list(t *testing.T, in pods.Inputs) *pods.View {
	t.Helper()
	ctx := context.Background()
	sbs, err := st.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	var podList []*cri.Sandbox
	for _, sb := range sbs.GetItems() {
		resp, err := st.rt.Direct().PodSandboxStatus(ctx, sb.GetId(), false)
		require.NoError(t, err)
		podList = append(podList, cri.SandboxFromStatus(resp.GetStatus()))
	}
	list, err := st.rt.Direct().ListContainers(ctx, nil)
	require.NoError(t, err)
	var ctrs []*cri.Container
	for _, c := range list {
		resp, err := st.rt.Direct().ContainerStatus(ctx, c.GetId(), false)
		require.NoError(t, err)
		cc := cri.ContainerFromList(c)
		cc.State = cri.ContainerFromList(&runtimeapi.Container{State: resp.GetStatus().GetState()}).State
		cc.StartedAt, cc.FinishedAt, cc.ExitCode = nanoTime(resp.GetStatus().GetStartedAt()), nanoTime(resp.GetStatus().GetFinishedAt()), resp.GetStatus().GetExitCode()
		ctrs = append(ctrs, cc)
	}
	snap := cri.NewSnapshot(st.clock.Now(), podList, ctrs)
	st.seq++
	snap.Seq = st.seq
	st.last = pods.Resolve(snap, in)
	return st.last
}

func nanoTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// sync hands the last listing, which pod p is of, on as Run does, and
// runs one sync of the pod's worker. It returns when the worker would
// sync again of its own accord (its timer: a back-off's retry, an exit's
// settle time; 0: at the next change). A sync on a listing no newer than
// the one the last sync acted on does nothing.
func (st *syncTest) sync(t *testing.T, p *pods.Pod) time.Duration {
	t.Helper()
	listed, ok := st.last.Pod(p.Key)
	require.True(t, ok && listed == p, "the pod of the last listing")
	st.publish(st.last)
	return st.r.syncPod(context.Background(), st.w)
}

// publish hands view v on as Run does, the pod changed: its status
// published, the pod forgotten if v no longer has it.
func (st *syncTest) publish(v *pods.View) {
	st.listed.Publish(v, []string{st.w.key})
	st.r.publishStatus(v, []string{st.w.key})
	if _, ok := v.Pod(st.w.key); !ok {
		st.r.forget(st.w.key)
	}
}

// podGone lists the runtime, which no longer has the pod, and hands the
// listing on: the pod is forgotten and its worker ends; the pod made
// again gets a new worker, as Run makes one.
func (st *syncTest) podGone(t *testing.T, m *spec.Pod) {
	t.Helper()
	v := st.list(t, pods.Inputs{Manifests: []*spec.Pod{m}})
	_, ok := v.Pod(st.w.key)
	require.False(t, ok, "the pod is gone")
	st.publish(v)
	st.w = &podWorker{key: st.w.key, state: newPodState(), gone: make(chan struct{})}
}

// states renders the runtime's containers as "name#attempt:STATE".
func (st *syncTest) states(sandbox string) []string {
	var out []string
	for _, c := range st.rt.Containers(sandbox) {
		out = append(out, c.Name+"#"+strconv.Itoa(int(c.Attempt))+":"+c.State.String())
	}
	return out
}

func ownedPod(containers ...spec.Container) *spec.Pod {
	return &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web-node", UID: "uid", RestartPolicy: corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: 30, Containers: containers, Object: &corev1.Pod{}}
}

// A static pod from nothing, sync by sync as kubelet's SyncPod: the
// sandbox and the first init container, the next init container once it
// completed, then the containers; postStart after each start.
func TestSyncOwnedPodFromNothing(t *testing.T) {
	st := newSyncTest(t)
	m := ownedPod(spec.Container{Name: "a", Kind: spec.Init}, spec.Container{Name: "b", Kind: spec.Init},
		spec.Container{Name: "app", Kind: spec.Regular, Lifecycle: &corev1.Lifecycle{PostStart: hook("postStart", "ok")}})

	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"sandbox 0", "container a -1"}, st.maker.calls)
	sb := st.view(t, m, true).Sandbox.ID
	assert.Equal(t, []string{"a#0:CONTAINER_RUNNING"}, st.states(sb))

	st.sync(t, st.view(t, m, true))
	assert.Len(t, st.maker.calls, 2, "a runs: nothing to do")

	a := st.rt.Containers(sb)[0].ID
	require.NoError(t, st.rt.SetContainerState(a, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	st.sync(t, st.view(t, m, true))
	assert.Equal(t, "container b -1", st.maker.calls[2], "the next init container once a completed")

	b := st.rt.Containers(sb)[2-1].ID
	require.NoError(t, st.rt.SetContainerState(b, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"a#0:CONTAINER_EXITED", "app#0:CONTAINER_RUNNING", "b#0:CONTAINER_EXITED"}, st.states(sb))
	assert.Equal(t, "postStart", st.hooks.called()[0].kind, "postStart after the first start too")
	assert.Contains(t, st.events.messages(), "Started: Container started")
}

// A dead sandbox: the old one's containers killed, a new sandbox, init
// containers removed and run again (kubelet's purgeInitContainers).
func TestSyncOwnedPodNewSandbox(t *testing.T) {
	logs := &fakeLogs{}
	st := newSyncTest(t, WithContainerLogs(logs))
	m := ownedPod(spec.Container{Name: "init", Kind: spec.Init}, spec.Container{Name: "app", Kind: spec.Regular})
	old := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	initID := st.rt.AddContainer(old, "init", runtimeapi.ContainerState_CONTAINER_EXITED)
	st.rt.AddContainer(old, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	_, err := st.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: old})
	require.NoError(t, err)

	st.sync(t, st.view(t, m, true))
	require.NotEmpty(t, st.maker.calls)
	assert.Equal(t, "sandbox 1", st.maker.calls[0], "a new sandbox, its attempt 1")
	assert.Contains(t, st.events.messages(), "SandboxChanged: Pod sandbox changed, it will be killed and re-created.")
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, st.states(old), "its init container removed, to run again")
	assert.Equal(t, []string{"ns/web-node/init/" + initID}, logs.removed, "with its log files")
	p := st.view(t, m, true)
	require.Len(t, p.Sandboxes, 2)
	assert.Equal(t, []string{"init#1:CONTAINER_RUNNING"}, st.states(p.Sandbox.ID), "its restart count goes on, as kubelet counts from the status the sync began with")
}

// A container whose config cannot be made waits with kubelet's reason
// (CreateContainerConfigError…); a regular init container that cannot
// start holds up the ones after it.
func TestSyncStartFailures(t *testing.T) {
	st := newSyncTest(t)
	st.maker.fail = map[string]error{"a": &StartError{Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}}
	m := ownedPod(spec.Container{Name: "a", Kind: spec.Init}, spec.Container{Name: "app", Kind: spec.Regular})
	retry := st.sync(t, st.view(t, m, true))
	assert.Equal(t, failedActionBackoff, retry, "tried again after the failed call's back-off")
	assert.Equal(t, pods.Waiting{Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}, st.w.state.failed["a"])
	sb := st.view(t, m, true).Sandbox.ID
	assert.Empty(t, st.states(sb))
	w, ok := waitingOf(st.r, "uid", "a")
	require.True(t, ok)
	assert.Equal(t, "CreateContainerConfigError", w.Reason, "shown as the container's waiting reason")
}

// A liveness kill and its restart, in one sync: preStop, the stop with the
// probe's grace, then the next attempt (kill, then create).
func TestSyncKillThenCreate(t *testing.T) {
	st := newSyncTest(t)
	grace := int64(7)
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular, Liveness: &corev1.Probe{TerminationGracePeriodSeconds: &grace},
		Lifecycle: &corev1.Lifecycle{PreStop: hook("preStop", "ok")}})
	sb := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	app := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{
		"io.kubernetes.container.restartCount": "3"}))
	st.store.Set(results.Key{ContainerID: app, Type: results.Liveness}, results.Failure, "uid")

	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#4:CONTAINER_RUNNING"}, st.states(sb), "the next attempt after the restart count")
	g, ok := st.rt.StopTimeout(app)
	require.True(t, ok)
	assert.Equal(t, int64(7), g, "the probe's grace period")
	assert.Equal(t, hookCall{kind: "preStop", containerID: app}, st.hooks.called()[0])
	assert.Equal(t, []string{"Killing: Container app failed liveness probe, will be restarted", "Created: Container created", "Started: Container started"},
		st.events.messages())
}

// Issue 22: a liveness kill after a long healthy run starts the back-off
// over, as kubelet's housekeeping collects a back-off 600 s after its
// last update; the kill is decided from the exit before it (older than
// the entry), so without the collection the delay doubled from a stale
// value: 40 s where kubelet waits 10 s.
func TestSyncBackoffAfterALongHealthyRun(t *testing.T) {
	st := newSyncTest(t)
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular, Liveness: &corev1.Probe{}})
	exit := func() {
		t.Helper()
		p := st.view(t, m, true)
		c, _ := p.Container("app")
		require.NoError(t, st.rt.SetContainerState(c.Current.ID, runtimeapi.ContainerState_CONTAINER_EXITED, 1))
		st.clock.Step(time.Second) // past the exit's settle
	}
	waiting := func() string { w, _ := waitingOf(st.r, "uid", "app"); return w.Message }
	st.sync(t, st.view(t, m, true)) // the first start
	exit()
	st.sync(t, st.view(t, m, true)) // restarted at once
	exit()
	st.sync(t, st.view(t, m, true))
	assert.Contains(t, waiting(), "back-off 10s")
	st.clock.Step(10 * time.Second)
	st.sync(t, st.view(t, m, true)) // attempt 2, after 10 s; 20 s next
	sb := st.view(t, m, true).Sandbox.ID
	require.Contains(t, st.states(sb), "app#2:CONTAINER_RUNNING")

	// It runs 11 minutes, then fails its liveness probe.
	st.clock.Step(11 * time.Minute)
	c, _ := st.view(t, m, true).Container("app")
	st.store.Set(results.Key{ContainerID: c.Current.ID, Type: results.Liveness}, results.Failure, "uid")
	st.sync(t, st.view(t, m, true))
	require.Contains(t, st.states(sb), "app#3:CONTAINER_RUNNING", "killed and restarted at once")

	// The replacement fails at once: kubelet's back-off starts over.
	exit()
	st.sync(t, st.view(t, m, true))
	assert.Contains(t, waiting(), "back-off 10s restarting failed container=app")
}

// RestartAllContainers: every running container killed at once, every
// instance removed, the pod started over in its sandbox.
func TestSyncRestartAll(t *testing.T) {
	logs := &fakeLogs{}
	st := newSyncTest(t, WithContainerLogs(logs))
	never := corev1.ContainerRestartPolicyNever
	rules := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	m := ownedPod(spec.Container{Name: "init", Kind: spec.Init}, spec.Container{Name: "app", Kind: spec.Regular, RestartPolicy: &never, RestartPolicyRules: rules},
		spec.Container{Name: "side", Kind: spec.Regular})
	sb := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	st.rt.AddContainer(sb, "init", runtimeapi.ContainerState_CONTAINER_EXITED)
	app := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	side := st.rt.AddContainer(sb, "side", runtimeapi.ContainerState_CONTAINER_RUNNING)
	require.NoError(t, st.rt.SetContainerState(app, runtimeapi.ContainerState_CONTAINER_EXITED, 42))

	st.sync(t, st.view(t, m, true))
	assert.Empty(t, st.states(sb), "every instance removed")
	assert.Empty(t, logs.removed, "their logs kept until the pod goes, as kubelet's removeContainer(keepLogs) on a reset")
	g, _ := st.rt.StopTimeout(side)
	assert.Zero(t, g, "killed with no grace period")
	assert.Equal(t, map[string]pods.Reset{"init": {RestartCount: 1}, "app": {RestartCount: 1}, "side": {RestartCount: 1}}, st.r.resetsOf("uid"),
		"what kubelet's status keeps of them: one more restart each")

	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"init#0:CONTAINER_RUNNING"}, st.states(sb), "the pod starts over from its first init container, in its sandbox")
}

// An orphan: killed (preStop, grace), its containers and sandboxes
// removed, then what it left on the host.
func TestSyncOrphanTeardown(t *testing.T) {
	logs := &fakeLogs{}
	st := newSyncTest(t, WithContainerLogs(logs))
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular})
	sb := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	app := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	p := st.orphanView(t, m)
	logs.removals = func() int { return st.rt.Calls("RemoveContainer") }

	st.sync(t, p)
	assert.Equal(t, []int{0}, logs.removedAfter, "the log files removed before the instance, as kubelet's removeContainer")
	_, ok := st.rt.SandboxState(sb)
	assert.False(t, ok, "the sandbox removed")
	assert.Equal(t, []string{"uid"}, st.maker.tornDown)
	assert.Equal(t, []string{"ns/web-node/app/" + app}, logs.removed, "each instance's log files removed with it")
	assert.Equal(t, "StoppingPod: Stopping pod ns/web-node: its manifest was removed, edited or no longer loads", st.events.messages()[0])
}

// A sandbox someone else made with a static pod's UID and name is not the
// pod's: tearing the pod down removes the agent's sandbox and never stops
// or removes that one, nor its containers.
func TestSyncOwnedPodSparesOthersSandbox(t *testing.T) {
	st := newSyncTest(t)
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular})
	mine := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	st.rt.AddContainer(mine, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	theirs := st.rt.AddSandbox("ns", "web-node", "uid")
	st.rt.AddContainer(theirs, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	p := st.view(t, m, true)
	require.Len(t, p.Sandboxes, 1, "the agent's sandbox only")
	assert.Equal(t, mine, p.Sandbox.ID)
	p = st.orphanView(t, m)
	require.Len(t, p.Sandboxes, 1, "the agent's sandbox only")
	assert.Equal(t, mine, p.Sandbox.ID)

	st.sync(t, p)
	_, ok := st.rt.SandboxState(mine)
	assert.False(t, ok, "the agent's sandbox removed")
	state, ok := st.rt.SandboxState(theirs)
	require.True(t, ok, "the other sandbox is left")
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, state)
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, st.states(theirs), "its container untouched")
}

// A failing runtime call ends the sync and says so; nothing after it is
// done.
func TestSyncRuntimeError(t *testing.T) {
	st := newSyncTest(t)
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular})
	st.rt.SetError("RunPodSandbox", errors.New("no network"))
	retry := st.r.execute(context.Background(), st.w, st.view(t, m, true), makePlan(planInput{pod: st.view(t, m, true), viewTime: planNow,
		results: readResults(st.store, st.view(t, m, true)), backoff: readBackoff(st.r.backoff, st.view(t, m, true)), memory: st.w.state.memory,
		now: planNow, mode: Recreate}))
	assert.Equal(t, failedActionBackoff, retry)
	assert.Contains(t, st.events.messages(), "FailedCreatePodSandBox: Failed to create pod sandbox: no network")
	assert.Equal(t, []string{"sandbox 0"}, st.maker.calls, "no container without a sandbox")
}

// theirPod is the manifest of pod ns/web (uid), which someone else made:
// its containers with the given restart policy and a 30 s grace period.
// Its sandbox is added with theirSandbox.
func theirPod(policy corev1.RestartPolicy, containers ...spec.Container) *spec.Pod {
	return &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: policy, TerminationGracePeriodSeconds: 30,
		Containers: containers}
}

func (st *syncTest) theirSandbox() string { return st.rt.AddSandbox("ns", "web", "uid") }

// A startup kill gets the probe's grace period.
func TestSyncStartupFailureUsesTheProbeGracePeriod(t *testing.T) {
	st := newSyncTest(t)
	five := int64(5)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app", Startup: &corev1.Probe{TerminationGracePeriodSeconds: &five}})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.store.Set(results.Key{ContainerID: id, Type: results.Startup}, results.Failure, "uid")
	st.sync(t, st.view(t, m, false))
	assert.Contains(t, st.events.messages(), "Killing: Container app failed startup probe, will be restarted")
	g, _ := st.rt.StopTimeout(id)
	assert.Equal(t, int64(5), g, "stopped with the probe's grace period")
}

// restartPolicy Never, and the failed container is the last one running:
// kubelet kills the whole pod, with the pod's grace period (not the
// probe's) and "Stopping container", then its sandbox.
func TestSyncNeverPolicyKillsThePod(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyNever, spec.Container{Name: "app", Liveness: &corev1.Probe{TerminationGracePeriodSeconds: new(int64(1))}})
	m.TerminationGracePeriodSeconds = 4
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.store.Set(results.Key{ContainerID: id, Type: results.Liveness}, results.Failure, "uid")
	st.sync(t, st.view(t, m, false))
	s, _ := st.rt.SandboxState(sb)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, s, "sandbox stopped")
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, st.states(sb))
	grace, _ := st.rt.StopTimeout(id)
	assert.Equal(t, int64(4), grace, "the pod's grace period, not the probe's")
	assert.Equal(t, []string{
		"StoppingPod: Stopping pod ns/web: no container is left running or to be restarted (restartPolicy Never)",
		"Killing: Stopping container app",
	}, st.events.messages())
	assert.Equal(t, []string{"stop " + id, "stopp"}, st.calls.list())
}

func TestSyncNeverPolicyKeepsTheSandboxWhileOthersRun(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyNever, spec.Container{Name: "app"}, spec.Container{Name: "other"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.rt.AddContainer(sb, "other", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.store.Set(results.Key{ContainerID: id, Type: results.Liveness}, results.Failure, "uid")
	st.sync(t, st.view(t, m, false))
	assert.Contains(t, st.events.messages(), "Killing: Container app failed liveness probe")
	s, _ := st.rt.SandboxState(sb)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, s)
}

func TestSyncModes(t *testing.T) {
	t.Run("stop only", func(t *testing.T) {
		st := newSyncTest(t)
		st.r.mode = StopOnly
		m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
		sb := st.theirSandbox()
		id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
		st.store.Set(results.Key{ContainerID: id, Type: results.Liveness}, results.Failure, "uid")
		st.sync(t, st.view(t, m, false))
		assert.Equal(t, "app#0:CONTAINER_EXITED", st.states(sb)[0], "stopped")
		st.sync(t, st.view(t, m, false))
		assert.Len(t, st.states(sb), 1, "never re-created")
		assert.Equal(t, "Killing: Container app failed liveness probe, will be restarted", st.events.messages()[0])
	})
	t.Run("none observes", func(t *testing.T) {
		st := newSyncTest(t)
		st.r.mode = Observe
		m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
		sb := st.theirSandbox()
		id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
		st.store.Set(results.Key{ContainerID: id, Type: results.Liveness}, results.Failure, "uid")
		st.sync(t, st.view(t, m, false))
		assert.Contains(t, st.events.messages(), "WouldKill: Container app failed liveness probe, will be restarted (--restart=none: nothing done)")
		assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, st.states(sb))
		_, stopped := st.rt.StopTimeout(id)
		assert.False(t, stopped)
	})
}

// A sidecar is restarted on any exit and on a failed liveness probe,
// whatever the pod's policy, with kubelet's message.
func TestSyncSidecarRestarts(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyNever, spec.Container{Name: "proxy", Kind: spec.Sidecar, Liveness: &corev1.Probe{}}, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	proxy := st.rt.AddContainer(sb, "proxy", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.store.Set(results.Key{ContainerID: proxy, Type: results.Liveness}, results.Failure, "uid")
	st.sync(t, st.view(t, m, false))
	assert.Contains(t, st.events.messages(), "Started: Container started")
	assert.Equal(t, "Killing: Init container proxy failed liveness probe", st.events.messages()[0])
	assert.Contains(t, st.states(sb), "proxy#1:CONTAINER_RUNNING")

	var cur string
	for _, c := range st.rt.Containers(sb) {
		if c.Name == "proxy" && c.Attempt == 1 {
			cur = c.ID
		}
	}
	require.NoError(t, st.rt.SetContainerState(cur, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	st.clock.Step(exitSettle) // listed after the exit's settle time
	st.sync(t, st.view(t, m, false))
	assert.Contains(t, st.states(sb), "proxy#2:CONTAINER_RUNNING", "an exit 0 restarted too")
}

// A Job-style pod (Never): once its main container is done, its sidecars
// are stopped — after the regular containers, later sidecars first — and
// the sandbox with them: a sidecar never outlives the job.
func TestSyncJobSidecarsStopWithThePod(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyNever, spec.Container{Name: "first", Kind: spec.Sidecar}, spec.Container{Name: "second", Kind: spec.Sidecar,
		Lifecycle: &corev1.Lifecycle{PreStop: hook("preStop", "ok")}}, spec.Container{Name: "main"})
	m.TerminationGracePeriodSeconds = 5
	sb := st.theirSandbox()
	first := st.rt.AddContainer(sb, "first", runtimeapi.ContainerState_CONTAINER_RUNNING)
	second := st.rt.AddContainer(sb, "second", runtimeapi.ContainerState_CONTAINER_RUNNING)
	main := st.rt.AddContainer(sb, "main", runtimeapi.ContainerState_CONTAINER_RUNNING)
	require.NoError(t, st.rt.SetContainerState(main, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	st.sync(t, st.view(t, m, false))
	s, _ := st.rt.SandboxState(sb)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, s, "sandbox stopped")
	assert.Equal(t, []string{"stop " + second, "stop " + first, "stopp"}, st.calls.list(), "later sidecars first")
	assert.Equal(t, []hookCall{{kind: "preStop", containerID: second}}, st.hooks.called())
	for _, id := range []string{first, second} {
		g, _ := st.rt.StopTimeout(id)
		assert.Equal(t, int64(5), g, "the pod's grace period")
	}
	assert.Contains(t, st.events.messages(), "Killing: Stopping container first")
	assert.NotContains(t, st.events.messages(), "Started: Container started", "sidecars are not restarted")
}

// fail sets a failure of the probe of the container's instance id.
func (st *syncTest) fail(id string, probe results.ProbeType) {
	st.store.Set(results.Key{ContainerID: id, Type: probe}, results.Failure, "uid")
}

// A liveness kill of a container someone else made: stopped with the
// pod's grace period, then re-created from its config as the next attempt,
// marked as the restart of the killed one.
func TestSyncLivenessFailureRestartsTheContainer(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.fail(id, results.Liveness)
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb))
	grace, ok := st.rt.StopTimeout(id)
	assert.True(t, ok)
	assert.Equal(t, int64(30), grace, "the pod's grace period")
	assert.Equal(t, id, st.rt.Containers(sb)[1].Annotations[cri.AnnotationRestartOf])
	assert.Equal(t, []string{
		"Killing: Container app failed liveness probe, will be restarted",
		"Created: Container created",
		"Started: Container started",
	}, st.events.messages())
	// Kill, then create (kubelet's order): no replacement exists while the
	// old instance stops.
	assert.Equal(t, []string{"stop " + id, "create app"}, st.calls.list())
}

// One failure, one restart, however often the pod is looked at meanwhile:
// again on the listing the restart was decided from (a sync never acts
// twice on one listing), and on the listings after it.
func TestSyncOneFailureOneRestart(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.fail(id, results.Liveness)
	for range 5 {
		st.fail(id, results.Liveness)
		st.fail(id, results.Startup)
	}
	before := st.view(t, m, false)
	st.sync(t, before)
	assert.Contains(t, st.events.messages(), "Started: Container started", "restarted")
	st.sync(t, before)
	for range 3 {
		st.sync(t, st.view(t, m, false))
	}
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb))
}

// exitSettles makes the sync after an exit wait out the settle time (the
// worker's timer), then lets it pass.
func (st *syncTest) exitSettles(t *testing.T, m *spec.Pod, owned bool) {
	t.Helper()
	calls := len(st.calls.list())
	assert.Equal(t, exitSettle, st.sync(t, st.view(t, m, owned)), "the worker waits out the settle time")
	assert.Len(t, st.calls.list(), calls, "nothing done before the exit settled")
	st.clock.Step(exitSettle)
}

func TestSyncExitsRestartPerPolicy(t *testing.T) {
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
			st := newSyncTest(t)
			c := tt.container
			c.Name = "app"
			m := theirPod(tt.policy, c, spec.Container{Name: "keep"}) // keep: the pod is not over
			sb := st.theirSandbox()
			id := st.rt.AddContainer(sb, "app", running)
			st.rt.AddContainer(sb, "keep", running)
			st.sync(t, st.view(t, m, false))
			require.NoError(t, st.rt.SetContainerState(id, exited, tt.exitCode))
			if tt.restart {
				st.exitSettles(t, m, false)
				assert.Zero(t, st.sync(t, st.view(t, m, false)), "no timer: restarted at once")
				assert.Contains(t, st.states(sb), "app#1:CONTAINER_RUNNING", "restarted")
				return
			}
			assert.Zero(t, st.sync(t, st.view(t, m, false)), "no timer: an exit not to restart has nothing to wait for")
			st.clock.Step(exitSettle)
			st.sync(t, st.view(t, m, false))
			assert.NotContains(t, st.states(sb), "app#1:CONTAINER_RUNNING")
			assert.Empty(t, st.calls.list())
		})
	}
}

// A crash loop backs off as kubelet's: the first restart at once, then
// 10 s from the exit (a BackOff event, the container shown waiting
// CrashLoopBackOff until then, the worker's timer set for it), then 20 s.
func TestSyncCrashLoopBacksOff(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.sync(t, st.view(t, m, false))

	crash := func(attempt uint32) time.Time {
		t.Helper()
		var cur string
		for _, c := range st.rt.Containers(sb) {
			if c.Attempt == attempt {
				cur = c.ID
			}
		}
		require.NotEmpty(t, cur, "attempt %d", attempt)
		at := st.clock.Now()
		require.NoError(t, st.rt.SetContainerState(cur, exited, 1))
		assert.Equal(t, exitSettle, st.sync(t, st.view(t, m, false)), "the worker waits out the settle time")
		st.clock.Step(exitSettle)
		return at
	}
	crash(0)
	st.sync(t, st.view(t, m, false))
	require.Contains(t, st.states(sb), "app#1:CONTAINER_RUNNING", "first restart at once")
	require.Equal(t, id, st.rt.Containers(sb)[0].ID)

	crashed := crash(1)
	retry := st.sync(t, st.view(t, m, false))
	assert.Equal(t, crashed.Add(10*time.Second).Sub(st.clock.Now()), retry, "the worker's timer: the back-off's end")
	assert.Contains(t, st.events.messages(), "BackOff: Back-off restarting failed container app in pod web_ns(uid)")
	w, ok := waitingOf(st.r, "uid", "app")
	require.True(t, ok, "back-off shown")
	assert.Equal(t, WaitingCrashLoop, w.Reason)
	assert.Equal(t, crashed.Add(10*time.Second), w.Until, "10 s from the exit")

	st.clock.Step(9 * time.Second)
	st.sync(t, st.view(t, m, false))
	assert.Len(t, st.rt.Containers(sb), 2, "still backing off")
	st.clock.Step(time.Second)
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_EXITED", "app#2:CONTAINER_RUNNING"}, st.states(sb),
		"restarted after 10 s; the dead instances are left to the garbage collection (pkg/gc), as kubelet leaves them")
	_, ok = waitingOf(st.r, "uid", "app")
	assert.False(t, ok, "no longer waiting once restarted")

	crashed = crash(2)
	st.sync(t, st.view(t, m, false))
	w, ok = waitingOf(st.r, "uid", "app")
	assert.True(t, ok && w.Until.Equal(crashed.Add(20*time.Second)), "backing off again, 20 s")
	status := st.r.Status()
	_, ok = status.Pod("uid")
	require.True(t, ok)
	assert.True(t, status.For("uid").Initialized, "its syncs saw it initialized: kubelet's Initialized stays True")
}

// A pod removed and made again with the same UID (a static pod's manifest
// put back) backs off where it left off, as kubelet does: its back-off
// is keyed by UID and kept until it expires.
func TestSyncBackoffOutlivesThePod(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.sync(t, st.view(t, m, false))
	require.NoError(t, st.rt.SetContainerState(id, exited, 1))
	st.exitSettles(t, m, false)
	st.sync(t, st.view(t, m, false))
	require.Contains(t, st.states(sb), "app#1:CONTAINER_RUNNING", "first restart at once")

	st.rt.DeleteSandbox(sb)
	st.podGone(t, m)
	again := st.theirSandbox()
	st.rt.AddContainer(again, "app", exited)
	st.exitSettles(t, m, false)
	st.sync(t, st.view(t, m, false))
	w, ok := waitingOf(st.r, "uid", "app")
	assert.True(t, ok && w.Reason == WaitingCrashLoop, "backing off from the first pod's restart")
	assert.Len(t, st.rt.Containers(again), 1, "not restarted at once")
}

// An exit is restarted only if the sandbox is still ready a moment later:
// stopping a pod kills its containers first. The sync after the settle
// time needs a listing made after it: the one from before the stop does
// not do.
func TestSyncExitOfAPodBeingStoppedIsNotRestarted(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.sync(t, st.view(t, m, false))
	require.NoError(t, st.rt.SetContainerState(id, exited, 137))
	exitedListing := st.view(t, m, false)
	assert.Equal(t, exitSettle, st.sync(t, exitedListing), "the worker waits out the settle time")
	_, err := st.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
	require.NoError(t, err)
	st.clock.Step(exitSettle)
	st.sync(t, exitedListing)
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, st.states(sb), "not restarted on the listing from before the settle time")
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED"}, st.states(sb))
	assert.Empty(t, st.calls.list())
}

// The liveness kill sequence observed on kubelet (§11): kills 1–3 restart
// at once, kill 4 waits 20 s.
func TestSyncRepeatedLivenessKillsBackOffLikeKubelet(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	st.rt.AddContainer(sb, "app", running)
	st.sync(t, st.view(t, m, false))
	current := func() (string, uint32) {
		var id string
		var attempt uint32
		for _, c := range st.rt.Containers(sb) {
			if c.State == running && c.Attempt >= attempt {
				id, attempt = c.ID, c.Attempt
			}
		}
		return id, attempt
	}
	for kill := 1; kill <= 3; kill++ {
		st.clock.Step(12 * time.Second)
		id, attempt := current()
		require.NotEmpty(t, id)
		st.fail(id, results.Liveness)
		st.sync(t, st.view(t, m, false))
		_, a := current()
		require.Equal(t, attempt+1, a, "restarted at once")
		st.sync(t, st.view(t, m, false))
		c := currentOf(st.r, "uid", "app")
		require.True(t, c != nil && c.Attempt == attempt+1, "the restart seen")
	}
	st.clock.Step(12 * time.Second)
	id, attempt := current()
	st.fail(id, results.Liveness)
	st.sync(t, st.view(t, m, false))
	w, ok := waitingOf(st.r, "uid", "app")
	assert.True(t, ok && w.Reason == WaitingCrashLoop, "kill 4 backs off")
	_, a := current()
	assert.Equal(t, uint32(0), a, "nothing running while backing off")
	// The kill's own sync measured the back-off from the exit before it;
	// the next, from the kill's exit.
	assert.Equal(t, 20*time.Second, st.sync(t, st.view(t, m, false)), "the worker waits out the back-off")
	st.clock.Step(19 * time.Second)
	st.sync(t, st.view(t, m, false))
	_, a = current()
	assert.Zero(t, a)
	st.clock.Step(time.Second)
	st.sync(t, st.view(t, m, false))
	_, a = current()
	assert.Equal(t, attempt+1, a, "restarted after 20 s")
}

// A container the manifest does not list is never touched, whatever its
// probes' results and however it ends.
func TestSyncUnmanagedContainersAreNeverTouched(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	st.rt.AddContainer(sb, "app", running)
	other := st.rt.AddContainer(sb, "other", running)
	st.sync(t, st.view(t, m, false))
	st.fail(other, results.Liveness)
	require.NoError(t, st.rt.SetContainerState(other, exited, 1))
	st.sync(t, st.view(t, m, false))
	st.clock.Step(exitSettle)
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING", "other#0:CONTAINER_EXITED"}, st.states(sb))
	assert.Empty(t, st.events.messages())
	assert.Empty(t, st.calls.list())
}

// After an agent restart: a replacement found created but not started is
// started; a container whose newer instance runs is left alone.
func TestSyncResumesAfterAgentRestart(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	old := st.rt.AddContainer(sb, "app", exited)
	st.rt.AddContainer(sb, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old}))
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb), "ours: started")
	assert.Equal(t, []string{"Started: Container started"}, st.events.messages(), "and told")
	st.sync(t, st.view(t, m, false))
	assert.Len(t, st.events.messages(), 1)
}

// An agent killed after creating a replacement but before its stop took
// effect: the old instance still runs. Starting the replacement would run
// two; it is removed instead, and the running one is left to its probes.
func TestSyncInterruptedRestartWithTheOldInstanceRunning(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	old := st.rt.AddContainer(sb, "app", running)
	st.rt.AddContainer(sb, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old}))
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"AbandonedRestart: Removed container app (attempt 1) left by an interrupted restart: the instance it was to replace is still running and will be probed again"},
		st.events.messages(), "the replacement removed and told")
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, st.states(sb))

	// If it fails its probe again, it is restarted once, as attempt 1.
	p := st.view(t, m, false)
	c, _ := p.Container("app")
	require.Len(t, c.Instances, 1, "the removal seen")
	st.fail(old, results.Liveness)
	st.sync(t, p)
	assert.Contains(t, st.events.messages(), "Started: Container started", "restarted")
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb))
}

// A container created by someone else (a harness between create and
// start) is theirs to start.
func TestSyncSomeoneElsesCreatedContainerIsNotStarted(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	st.rt.AddContainer(sb, "app", created)
	st.sync(t, st.view(t, m, false))
	st.clock.Step(exitSettle)
	st.sync(t, st.view(t, m, false))
	assert.Equal(t, []string{"app#0:CONTAINER_CREATED"}, st.states(sb))
	assert.Empty(t, st.calls.list())
}

// A failed postStart kills the container (event FailedPostStartHook, kill
// message FailedPostStartHook, the pod's grace period) and it is restarted
// with back-off.
func TestSyncFailedPostStartHook(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PostStart: hook("postStart", "fail")}})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.sync(t, st.view(t, m, false))
	require.NoError(t, st.rt.SetContainerState(id, exited, 1))
	st.exitSettles(t, m, false)
	st.sync(t, st.view(t, m, false))
	require.GreaterOrEqual(t, len(st.events.messages()), 4)
	assert.Equal(t, []string{
		"Created: Container created",
		"Started: Container started",
		"FailedPostStartHook: PostStartHook failed",
		"Killing: FailedPostStartHook",
	}, st.events.messages()[:4], "the hook's output stays out of events")
	replacement := st.hooks.called()[0].containerID
	g, ok := st.rt.StopTimeout(replacement)
	assert.True(t, ok && g == 30, "stopped with the pod's grace period")
	st.sync(t, st.view(t, m, false))
	w, ok := waitingOf(st.r, "uid", "app")
	assert.True(t, ok && w.Reason == WaitingCrashLoop, "restarted with back-off")
}

// fakeLogs records the instances whose log files pod sync removes (and
// links), as "namespace/pod/container/id".
type fakeLogs struct {
	mu              sync.Mutex
	linked, removed []string
	// removals, if set, counts the instances removed through CRI: at each
	// removal of log files it is recorded in removedAfter.
	removals     func() int
	removedAfter []int
}

func (l *fakeLogs) Link(namespace, podName string, inst *cri.Container) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.linked = append(l.linked, namespace+"/"+podName+"/"+inst.Name+"/"+inst.ID)
	return nil
}

func (l *fakeLogs) Remove(namespace, podName string, inst *cri.Container) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removed = append(l.removed, namespace+"/"+podName+"/"+inst.Name+"/"+inst.ID)
	if l.removals != nil {
		l.removedAfter = append(l.removedAfter, l.removals())
	}
	return nil
}
