package pods

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

type manifestsSource struct {
	mu      sync.Mutex
	pods    []*spec.Pod
	changed chan struct{}
}

func (m *manifestsSource) Pods() ([]*spec.Pod, []*spec.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pods, nil
}

func (m *manifestsSource) Changed() <-chan struct{} { return m.changed }

func (m *manifestsSource) set(p ...*spec.Pod) {
	m.mu.Lock()
	m.pods = p
	m.mu.Unlock()
	m.changed <- struct{}{}
}

type eventRecorder struct {
	mu   sync.Mutex
	list []events.Event
}

func (r *eventRecorder) Record(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, e)
}

func (r *eventRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list)
}

// fakePoller returns a fake runtime and a poller of it.
func fakePoller(t *testing.T) (*fakeruntime.Runtime, *cri.Poller) {
	t.Helper()
	rt := fakeruntime.NewForTest(t)
	client, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	poller, err := cri.NewPoller(client)
	require.NoError(t, err)
	return rt, poller
}

// The resolver publishes a view when the runtime, the manifests or the
// instances being started change, naming the pods that changed; what
// changes nothing is not published; a configuration problem is told once.
func TestResolverPublishesChanges(t *testing.T) {
	rt, poller := fakePoller(t)
	manifests := &manifestsSource{changed: make(chan struct{}, 1)}
	recorder := &eventRecorder{}
	r := NewResolver(WithManifests(manifests), WithRecorder(recorder))
	criSub := poller.Watch()
	sub := r.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx, criSub) })
	t.Cleanup(func() { cancel(); wg.Wait(); sub.Close(); criSub.Close() })

	next := func(what string) Batch {
		t.Helper()
		select {
		case <-sub.Ready():
			return sub.Next()
		case <-time.After(5 * time.Second):
			t.Fatalf("no view: %s", what)
			return Batch{}
		}
	}
	relist := func() {
		_, err := poller.Relist(context.Background())
		require.NoError(t, err)
	}

	sb := rt.AddSandbox("ns", "web", "uid-web")
	id := rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	relist()
	b := next("the first relist")
	assert.Equal(t, []string{"uid-web"}, b.Changed)
	p, ok := b.View.Pod("uid-web")
	require.True(t, ok)
	assert.False(t, p.Managed())

	manifests.set(&spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Warnings: []*spec.Error{{Source: "pods.yaml:9", Namespace: "ns", Pod: "web", Container: "app", Detail: "inert"}}}}})
	b = next("the manifest")
	assert.Equal(t, []string{"uid-web"}, b.Changed)
	p, _ = b.View.Pod("uid-web")
	assert.True(t, p.Managed())
	require.Eventually(t, func() bool { return recorder.count() == 1 }, 5*time.Second, time.Millisecond, "the warning told")

	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAttempt(1))
	relist()
	b = next("a new instance")
	c, _ := mustPod(t, b.View, "uid-web").Container("app")
	assert.NotEqual(t, id, c.Current.ID, "the newest instance is current")

	// The same manifests again change nothing: the next batch names only
	// the pod that did change (batches coalesce, so a view published for
	// the manifests would name uid-web too).
	manifests.set(manifests.pods...)
	require.Eventually(t, func() bool { return len(manifests.changed) == 0 }, 5*time.Second, time.Millisecond, "the manifests read")
	rt.AddSandbox("ns", "db", "uid-db")
	relist()
	b = next("another pod")
	assert.Equal(t, []string{"uid-db"}, b.Changed)
	assert.Equal(t, 1, recorder.count(), "told once while it lasts")
}

// A UID conflict is told on both pods, as a PodUIDConflict event each, and
// a manifest's warning (a credential sent to any sandbox of its name) as
// an event of its pod, whether or not a sandbox runs: each once while it
// lasts.
func TestConflictsAndManifestWarningsAreTold(t *testing.T) {
	unpinned := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app"}},
		Warnings:   []*spec.Error{{Source: "web.yaml:9", Namespace: "ns", Pod: "db", Container: "app", Field: "spec.containers[0].readinessProbe.httpGet.httpHeaders[0].name", Detail: "credential header"}}}
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0), sandbox("sb2", "evil", "u", true, 10)}, nil)
	recorder := &eventRecorder{}
	r := NewResolver(WithRecorder(recorder))
	v := Resolve(snap, Inputs{Manifests: []*spec.Pod{unpinned}})
	r.reportProblems(context.Background(), v)

	var told []string
	for _, e := range recorder.list {
		assert.Equal(t, events.Warning, e.Type)
		told = append(told, e.Reason+" "+e.Namespace+"/"+e.Pod+"/"+e.Container)
	}
	assert.ElementsMatch(t, []string{"InvalidProbeConfig ns/db/app", "PodUIDConflict ns/web/", "PodUIDConflict ns/evil/"}, told)
	r.reportProblems(context.Background(), Resolve(snap, Inputs{Manifests: []*spec.Pod{unpinned}}))
	assert.Equal(t, 3, recorder.count(), "told once while it lasts")
}

// The pods' phase depends on the startup probes' results, which the
// report reads where they meet the view (ReportPod): a startup result
// moves the report's phase with no relist and no view resolved again (the
// resolver takes no results), so the one wake-up it causes is pod sync's
// own.
func TestAStartupResultMovesTheReportsPhase(t *testing.T) {
	rt, poller := fakePoller(t)
	startup := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"up"}}}}
	spec.DefaultProbe(startup)
	manifests := &manifestsSource{changed: make(chan struct{}, 1), pods: []*spec.Pod{{Source: "pods.yaml:1", Namespace: "ns", Name: "web",
		RestartPolicy: corev1.RestartPolicyAlways, Containers: []spec.Container{{Name: "proxy", Kind: spec.Sidecar, Startup: startup}, {Name: "app"}}}}}
	store := results.NewStore()
	r := NewResolver(WithManifests(manifests), WithRecorder(&eventRecorder{}))
	criSub, sub := poller.Watch(), r.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx, criSub) })
	t.Cleanup(func() { cancel(); wg.Wait(); sub.Close(); criSub.Close() })

	// The pod made again: its app exited in the old sandbox, its sidecar
	// runs in the new one.
	old := rt.AddSandbox("ns", "web", "uid-web")
	app := rt.AddContainer(old, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	require.NoError(t, rt.SetContainerState(app, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	_, err := rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: old})
	require.NoError(t, err)
	proxy := rt.AddContainer(rt.AddSandbox("ns", "web", "uid-web"), "proxy", runtimeapi.ContainerState_CONTAINER_RUNNING)
	_, err = poller.Relist(context.Background())
	require.NoError(t, err)

	require.Eventually(t, func() bool { _, ok := r.View().Pod("uid-web"); return ok }, 5*time.Second, time.Millisecond, "the pod resolved")
	p, _ := r.View().Pod("uid-web")
	assert.Equal(t, corev1.PodPending, ReportPod(p, PodStatus{}, store, GateSet{}).Phase, "the sidecar not started: Pending")
	store.Set(results.Key{ContainerID: proxy, Type: results.Startup}, results.Success, "uid-web")
	assert.Equal(t, corev1.PodRunning, ReportPod(p, PodStatus{}, store, GateSet{}).Phase, "started, with no relist and the same view: Running")
	assert.Equal(t, corev1.PodRunning, p.Phase, "the view's phase, every running sidecar taken as started, agrees")
}
