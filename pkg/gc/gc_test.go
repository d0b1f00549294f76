package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// fakeRuntime records the calls the collection makes; fail makes the
// call of that ID fail.
type fakeRuntime struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]error
}

func (f *fakeRuntime) call(op, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+id)
	return f.fail[op+" "+id]
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, grace int64) error {
	return f.call("stop", id)
}
func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error { return f.call("rm", id) }
func (f *fakeRuntime) StopPodSandbox(_ context.Context, id string) error  { return f.call("stopp", id) }
func (f *fakeRuntime) RemovePodSandbox(_ context.Context, id string) error {
	return f.call("rmp", id)
}

// fakeLogs records whose log files are removed, and, with rt, when among
// the runtime's calls.
type fakeLogs struct {
	removed []string
	rt      *fakeRuntime
}

func (l *fakeLogs) Remove(namespace, podName string, inst *cri.Container) error {
	l.removed = append(l.removed, namespace+"/"+podName+"/"+inst.ID)
	if l.rt != nil {
		_ = l.rt.call("logs", inst.ID)
	}
	return nil
}

// fakeTerminator records the pods torn down; fail makes the first
// teardowns fail.
type fakeTerminator struct {
	tornDown []string
	fail     int
}

func (f *fakeTerminator) TearDownTerminated(_ context.Context, p *pods.Pod) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("device busy")
	}
	f.tornDown = append(f.tornDown, p.UID)
	return nil
}

// A collection: the oldest dead instances removed with their log files (one
// in an unknown state stopped first), a dead sandbox stopped and removed;
// a failed removal is logged and skipped; the series count what went.
func TestCollect(t *testing.T) {
	rt := &fakeRuntime{fail: map[string]error{"rm foo/bar#1": errors.New("busy")}}
	logs := &fakeLogs{rt: rt}
	reg := prometheus.NewPedanticRegistry()
	g := New(rt, Config{}, WithClock(testingclock.NewFakeClock(now)), WithContainerLogs(logs), WithRegisterer(reg))
	all := gcPods([]gcContainer{makeGCContainer("foo", "bar", 3, 3, cri.StateExited), makeGCContainer("foo", "bar", 2, 2, cri.StateUnknown),
		makeGCContainer("foo", "bar", 1, 1, cri.StateExited), makeGCContainer("foo", "bar", 0, 0, cri.StateExited)})
	all[0].Sandboxes = []*cri.Sandbox{{ID: "new", State: cri.SandboxNotReady, CreatedAt: now}, {ID: "foo-sb", State: cri.SandboxNotReady},
		{ID: "old", State: cri.SandboxNotReady}}

	g.collect(t.Context(), all, Periodic)
	assert.Equal(t, []string{"logs foo/bar#0", "rm foo/bar#0", "logs foo/bar#1", "rm foo/bar#1", "stop foo/bar#2", "logs foo/bar#2", "rm foo/bar#2", "stopp old", "rmp old"}, rt.calls,
		"oldest first; the unknown one stopped first; each one's log files before it, as kubelet's removeContainer; the sandbox with containers and the newest kept")
	assert.Equal(t, []string{"ns/foo/foo/bar#0", "ns/foo/foo/bar#1", "ns/foo/foo/bar#2"}, logs.removed, "log files go before each removal, as kubelet's")
	assert.Equal(t, 2.0, testutil.ToFloat64(g.metrics.containers))
	assert.Equal(t, 1.0, testutil.ToFloat64(g.metrics.sandboxes))
	containers, sandboxes := g.Removed()
	assert.Equal(t, []uint64{2, 1}, []uint64{containers, sandboxes}, "what the state API reports")
}

// A terminated pod is torn down once; a failed teardown is retried at the
// next collection, not at every view.
func TestTearDownTerminated(t *testing.T) {
	term := &fakeTerminator{fail: 1}
	g := New(&fakeRuntime{}, Config{}, WithTerminator(term))
	done := []*pods.Pod{{UID: "job", Namespace: "ns", Name: "job", Static: true, Phase: corev1.PodSucceeded}}

	g.tearDownTerminated(t.Context(), done, false)
	assert.Empty(t, term.tornDown, "failed")
	g.tearDownTerminated(t.Context(), done, false)
	assert.Empty(t, term.tornDown, "not retried at a view")
	g.tearDownTerminated(t.Context(), done, true)
	assert.Equal(t, []string{"job"}, term.tornDown, "retried at the collection")
	g.tearDownTerminated(t.Context(), done, true)
	assert.Equal(t, []string{"job"}, term.tornDown, "once")
	assert.Equal(t, 1.0, testutil.ToFloat64(g.metrics.terminated))
	assert.Equal(t, 1.0, testutil.ToFloat64(g.metrics.terminatedErrors))

	g.tearDownTerminated(t.Context(), nil, true)
	g.tearDownTerminated(t.Context(), done, true)
	assert.Equal(t, []string{"job", "job"}, term.tornDown, "a pod gone from the view and back (its UID reused) is torn down again")
}

// At each view the exited instances beyond the newest are removed with
// their log files, once each: a view listed before the removal ended,
// still showing them, removes nothing again.
func TestDeleteExited(t *testing.T) {
	rt := &fakeRuntime{}
	logs := &fakeLogs{}
	g := New(rt, Config{}, WithClock(testingclock.NewFakeClock(now)), WithContainerLogs(logs))
	all := gcPods([]gcContainer{makeGCContainer("foo", "bar", 2, 2, cri.StateRunning), makeGCContainer("foo", "bar", 1, 1, cri.StateExited),
		makeGCContainer("foo", "bar", 0, 0, cri.StateExited)})
	g.deleteExited(t.Context(), all)
	g.deleteExited(t.Context(), all)
	assert.Equal(t, []string{"rm foo/bar#0"}, rt.calls, "the older exited instance, once")
	assert.Equal(t, []string{"ns/foo/foo/bar#0"}, logs.removed)
	assert.Equal(t, 1.0, testutil.ToFloat64(g.metrics.containers))
	containers, _ := g.Removed()
	assert.Equal(t, uint64(1), containers, "counted for the state API as the collection's")
}

func (f *fakeRuntime) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// fakePodLogs records whose pod log directory is removed.
type fakePodLogs struct{ removed []string }

func (l *fakePodLogs) RemovePodLogs(_ context.Context, p *pods.Pod) error {
	l.removed = append(l.removed, p.UID)
	return nil
}

// terminatedView is a view of one static pod "job" (restartPolicy Never)
// whose container exited 0 in each of its three sandboxes, none ready:
// Succeeded, terminated.
func terminatedView() *pods.View {
	m := &spec.Pod{Source: "job.yaml:1", Namespace: "ns", Name: "job", UID: "job", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}}
	var sbs []*cri.Sandbox
	var ctrs []*cri.Container
	for i, id := range []string{"sb0", "sb1", "sb2"} {
		created := now.Add(-time.Hour + time.Duration(i)*time.Minute)
		sbs = append(sbs, &cri.Sandbox{ID: id, Namespace: "ns", Name: "job", UID: "job", Attempt: uint32(i), State: cri.SandboxNotReady, CreatedAt: created,
			Annotations: map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: "job"}})
		ctrs = append(ctrs, &cri.Container{ID: "app" + id, SandboxID: id, Name: "app", Attempt: uint32(i), State: cri.StateExited, CreatedAt: created})
	}
	return pods.Resolve(cri.NewSnapshot(now, sbs, ctrs), pods.Inputs{StaticPods: []*spec.Pod{m}})
}

// The first collection is at the first view, not a period later
// (kubelet's wait.Until runs StartGarbageCollection's at once).
func TestRunCollectsAtTheFirstView(t *testing.T) {
	rt := &fakeRuntime{}
	g := New(rt, Config{}, WithClock(testingclock.NewFakeClock(now)))
	var pub pods.Publisher
	pub.Publish(terminatedView(), []string{"job"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, pub.Subscribe()) }()
	defer func() { cancel(); <-done }()
	assert.Eventually(t, func() bool { return slices.Contains(rt.recorded(), "rmp sb1") }, 10*time.Second, 10*time.Millisecond,
		"the older dead sandboxes removed at the first view, without a tick")
}

// theirsView is a view of one pod others made ("web", its sandbox not
// ready: over) whose container app the agent restarted twice (attempts 1
// and 2 carry its restart-of annotation): every instance is the agent's.
func theirsView() *pods.View {
	sb := &cri.Sandbox{ID: "sb", Namespace: "ns", Name: "web", UID: "web", State: cri.SandboxNotReady, CreatedAt: now.Add(-time.Hour)}
	var ctrs []*cri.Container
	for i := range 3 {
		c := &cri.Container{ID: fmt.Sprintf("app%d", i), SandboxID: "sb", Name: "app", Attempt: uint32(i), State: cri.StateExited,
			CreatedAt: now.Add(-time.Hour + time.Duration(i)*time.Minute)}
		if i > 0 {
			c.Annotations = map[string]string{cri.AnnotationRestartOf: "app0"}
		}
		ctrs = append(ctrs, c)
	}
	return pods.Resolve(cri.NewSnapshot(now, []*cri.Sandbox{sb}, ctrs), pods.Inputs{})
}

// Under disk pressure (DeleteAllUnusedContainers) a terminated pod loses
// every dead instance the agent may remove (kubelet's
// evictNonDeletedPods), where the periodic collection keeps the newest;
// a terminated static pod that keeps its manifest keeps what the
// periodic collection keeps (its dead instances are its only record of
// its phase).
func TestDeleteAllUnusedContainers(t *testing.T) {
	v := theirsView()
	p, ok := v.Pod("web")
	if assert.True(t, ok) {
		assert.True(t, p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed, "terminated: %s", p.Phase)
	}

	periodic := &fakeRuntime{}
	g := New(periodic, Config{}, WithClock(testingclock.NewFakeClock(now)))
	g.collect(t.Context(), v.Pods(), Periodic)
	assert.Equal(t, []string{"rm app0", "rm app1"}, periodic.calls, "the newest kept")

	rt := &fakeRuntime{}
	g = New(rt, Config{}, WithClock(testingclock.NewFakeClock(now)))
	assert.Error(t, g.DeleteAllUnusedContainers(t.Context()), "nothing listed yet")
	g.latest.Store(v)
	assert.NoError(t, g.DeleteAllUnusedContainers(t.Context()))
	assert.Equal(t, []string{"rm app0", "rm app1", "rm app2"}, rt.calls, "all of them, oldest first; a sandbox others made stays")

	job := terminatedView()
	p, ok = job.Pod("job")
	if assert.True(t, ok) {
		assert.Equal(t, corev1.PodSucceeded, p.Phase)
	}
	rt = &fakeRuntime{}
	g = New(rt, Config{}, WithClock(testingclock.NewFakeClock(now)))
	g.latest.Store(job)
	assert.NoError(t, g.DeleteAllUnusedContainers(t.Context()))
	assert.Equal(t, []string{"rm appsb0", "rm appsb1", "stopp sb0", "rmp sb0", "stopp sb1", "rmp sb1"}, rt.calls,
		"a static job keeps its newest instance and sandbox, or it would run again")
}

// An evicted pod's log directory is removed at each collection, through
// the pod logs remover.
func TestCollectRemovesEvictedPodLogs(t *testing.T) {
	l := &fakePodLogs{}
	g := New(&fakeRuntime{}, Config{}, WithClock(testingclock.NewFakeClock(now)), WithPodLogs(l))
	all := gcPods([]gcContainer{makeGCContainer("evicted", "bar", 0, 0, cri.StateExited), makeGCContainer("foo", "bar", 0, 0, cri.StateExited)})
	g.collect(t.Context(), all, Periodic)
	assert.Equal(t, []string{"evicted"}, l.removed)
}

// fakeLinks counts the prunings of dangling links.
type fakeLinks struct{ pruned int }

func (l *fakeLinks) PruneDangling() (int, error) { l.pruned++; return 1, nil }

// Each collection removes the dangling log links, as kubelet's.
func TestCollectPrunesDanglingLinks(t *testing.T) {
	links := &fakeLinks{}
	g := New(&fakeRuntime{}, Config{}, WithClock(testingclock.NewFakeClock(now)), WithDanglingLinks(links))
	g.collect(t.Context(), nil, Periodic)
	g.collect(t.Context(), nil, Periodic)
	assert.Equal(t, 2, links.pruned)
}
