package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
)

func dialFake(t testing.TB, rt *fakeruntime.Runtime) *cri.Client {
	t.Helper()
	c, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newPoller(t testing.TB, rt *fakeruntime.Runtime) *cri.Poller {
	t.Helper()
	return newPollerWith(t, rt, cri.PollerConfig{})
}

func newPollerWith(t testing.TB, rt *fakeruntime.Runtime, cfg cri.PollerConfig, opts ...cri.PollerOption) *cri.Poller {
	t.Helper()
	p, err := cri.NewPoller(dialFake(t, rt), cfg, opts...)
	require.NoError(t, err)
	return p
}

func relist(t testing.TB, p *cri.Poller) *cri.Snapshot {
	t.Helper()
	snap, err := p.Relist(context.Background())
	require.NoError(t, err)
	return snap
}

// eventTypes renders a batch compactly for comparisons: "Type pod/container".
func eventTypes(events []cri.Event) []string {
	var out []string
	for _, e := range events {
		s := string(e.Type) + " " + e.Sandbox.Name
		if e.Container != nil {
			s += "/" + e.Container.Name
		}
		out = append(out, s)
	}
	return out
}

func TestRelistCallBudget(t *testing.T) {
	const pods, perPod = 100, 10 // 1,000 containers
	rt := fakeruntime.NewForTest(t)
	var ids []string
	for i := range pods {
		sb := rt.AddSandbox("default", fmt.Sprintf("pod-%03d", i), fmt.Sprintf("uid-%03d", i))
		for j := range perPod {
			ids = append(ids, rt.AddContainer(sb, fmt.Sprintf("c%d", j), running))
		}
	}
	p := newPoller(t, rt)

	snap := relist(t, p)
	require.Len(t, snap.Containers(), pods*perPod)
	assert.Equal(t, map[string]int{
		"Version": 1, "ListContainers": 1, "ListPodSandbox": 1,
		"ContainerStatus": pods * perPod, "PodSandboxStatus": pods,
	}, rt.CallCounts(), "first relist reads every status once")

	rt.ResetCalls()
	for range 5 {
		relist(t, p)
	}
	assert.Equal(t, map[string]int{"ListContainers": 5, "ListPodSandbox": 5}, rt.CallCounts(),
		"steady state: two list calls per relist, no status calls")

	rt.ResetCalls()
	for _, id := range ids[:3] {
		require.NoError(t, rt.SetContainerState(id, exited, 1))
	}
	rt.AddSandbox("default", "newcomer", "uid-new")
	relist(t, p)
	assert.Equal(t, map[string]int{
		"ListContainers": 1, "ListPodSandbox": 1, "ContainerStatus": 3, "PodSandboxStatus": 1,
	}, rt.CallCounts(), "status only for the changed containers and the new sandbox")
}

func TestRelistSnapshotContents(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns1", "web", "uid-1", fakeruntime.WithIP("10.0.0.7"), fakeruntime.WithNetNS("/var/run/netns/cni-1"),
		fakeruntime.WithSandboxAnnotations(map[string]string{"a": "b"}))
	id := rt.AddContainer(sb, "app", running, fakeruntime.WithAttempt(2),
		fakeruntime.WithAnnotations(map[string]string{"x": "y"}))
	p := newPoller(t, rt)

	snap := relist(t, p)
	pod, ok := snap.Sandbox(sb)
	require.True(t, ok)
	assert.Equal(t, "ns1", pod.Namespace)
	assert.Equal(t, "web", pod.Name)
	assert.Equal(t, "uid-1", pod.UID)
	assert.Equal(t, "10.0.0.7", pod.IP(""))
	assert.Equal(t, cri.SandboxReady, pod.State)
	assert.Equal(t, map[string]string{"a": "b"}, pod.Annotations)
	assert.Equal(t, "/var/run/netns/cni-1", pod.NetNS, "from the runtime's verbose info")

	ctr, ok := snap.Container(id)
	require.True(t, ok)
	assert.Equal(t, "app", ctr.Name)
	assert.Equal(t, uint32(2), ctr.Attempt)
	assert.Equal(t, cri.StateRunning, ctr.State)
	assert.False(t, ctr.StartedAt.IsZero(), "started time comes from ContainerStatus")
	assert.Equal(t, map[string]string{"x": "y"}, ctr.Annotations)
	assert.Equal(t, []*cri.Container{ctr}, snap.PodContainers(sb))

	require.NoError(t, rt.SetContainerState(id, exited, 3))
	snap = relist(t, p)
	ctr, _ = snap.Container(id)
	assert.Equal(t, cri.StateExited, ctr.State)
	assert.Equal(t, int32(3), ctr.ExitCode)
	assert.Equal(t, "Error", ctr.Reason)
	assert.False(t, ctr.FinishedAt.IsZero())
}

// An exited container's message is kubelet's: its termination message,
// read from the file mounted at its annotated terminationMessagePath,
// once, when the poller sees it exit (a running one's is not read).
func TestRelistReadsTheTerminationMessage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "5e1f0a2b")
	require.NoError(t, os.WriteFile(file, []byte("disk full"), 0o666))
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "job", "uid-1")
	id := rt.AddContainer(sb, "app", running,
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationTerminationMessagePath: "/dev/termination-log", cri.AnnotationTerminationMessagePolicy: "File"}),
		fakeruntime.WithMounts(&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: file}))
	other := rt.AddContainer(sb, "observed", running, fakeruntime.WithMounts(&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: file}))
	p := newPoller(t, rt)
	ctr, _ := relist(t, p).Container(id)
	assert.Empty(t, ctr.Message, "running: nothing read")

	require.NoError(t, rt.SetContainerState(id, exited, 1))
	require.NoError(t, rt.SetContainerState(other, exited, 1))
	snap := relist(t, p)
	ctr, _ = snap.Container(id)
	assert.Equal(t, "Error", ctr.Reason)
	assert.Equal(t, "disk full", ctr.Message)
	ctr, _ = snap.Container(other)
	assert.Empty(t, ctr.Message, "without kubelet's annotations: the runtime's message only")
}

func TestRelistEvents(t *testing.T) {
	type step struct {
		name   string
		script func(rt *fakeruntime.Runtime, ids map[string]string)
		want   []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "container lifecycle",
			steps: []step{
				{"pod with created container", func(rt *fakeruntime.Runtime, ids map[string]string) {
					ids["sb"] = rt.AddSandbox("ns", "p", "u")
					ids["app"] = rt.AddContainer(ids["sb"], "app", created)
				}, []string{"SandboxAdded p", "ContainerCreated p/app"}},
				{"started", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.SetContainerState(ids["app"], running, 0)
				}, []string{"ContainerStarted p/app"}},
				{"nothing changed", func(*fakeruntime.Runtime, map[string]string) {}, nil},
				{"exited", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.SetContainerState(ids["app"], exited, 2)
				}, []string{"ContainerExited p/app"}},
				{"removed", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.DeleteContainer(ids["app"])
				}, []string{"ContainerRemoved p/app"}},
			},
		},
		{
			name: "first seen late in life gets the events it missed",
			steps: []step{
				{"running and exited at once", func(rt *fakeruntime.Runtime, ids map[string]string) {
					sb := rt.AddSandbox("ns", "p", "u")
					rt.AddContainer(sb, "a", running)
					rt.AddContainer(sb, "b", exited)
				}, []string{
					"SandboxAdded p",
					"ContainerCreated p/a", "ContainerStarted p/a",
					"ContainerCreated p/b", "ContainerStarted p/b", "ContainerExited p/b",
				}},
			},
		},
		{
			name: "created straight to exited",
			steps: []step{
				{"created", func(rt *fakeruntime.Runtime, ids map[string]string) {
					ids["app"] = rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", created)
				}, []string{"SandboxAdded p", "ContainerCreated p/app"}},
				{"ran and exited between relists", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.SetContainerState(ids["app"], exited, 0)
				}, []string{"ContainerStarted p/app", "ContainerExited p/app"}},
			},
		},
		{
			name: "sandbox stop and removal",
			steps: []step{
				{"pod", func(rt *fakeruntime.Runtime, ids map[string]string) {
					ids["sb"] = rt.AddSandbox("ns", "p", "u")
					rt.AddContainer(ids["sb"], "app", running)
				}, []string{"SandboxAdded p", "ContainerCreated p/app", "ContainerStarted p/app"}},
				{"stopped", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: ids["sb"]})
				}, []string{"ContainerExited p/app", "SandboxStopped p"}},
				{"removed", func(rt *fakeruntime.Runtime, ids map[string]string) {
					rt.DeleteSandbox(ids["sb"])
				}, []string{"ContainerRemoved p/app", "SandboxRemoved p"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakeruntime.NewForTest(t)
			p := newPoller(t, rt)
			sub := p.Subscribe()
			defer sub.Close()
			ids := map[string]string{}
			for _, st := range tt.steps {
				st.script(rt, ids)
				relist(t, p)
				assert.Equal(t, st.want, eventTypes(sub.Next().Events), st.name)
			}
		})
	}
}

func TestRelistEventCarriesExitDetails(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	id := rt.AddContainer(rt.AddSandbox("ns", "p", "u", fakeruntime.WithIP("10.1.1.1")), "app", running)
	p := newPoller(t, rt)
	relist(t, p)
	sub := p.Subscribe()
	defer sub.Close()
	sub.Next() // the current state

	require.NoError(t, rt.SetContainerState(id, exited, 42))
	relist(t, p)
	events := sub.Next().Events
	require.Len(t, events, 1)
	assert.Equal(t, cri.ContainerExited, events[0].Type)
	assert.Equal(t, int32(42), events[0].Container.ExitCode)
	assert.Equal(t, "10.1.1.1", events[0].Sandbox.IP(""))
}

func TestSubscriberCoalescesAndNeverBlocksThePoller(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "p", "u")
	p := newPoller(t, rt)
	sub := p.Subscribe()
	defer sub.Close()

	// Three relists while the subscriber does not read.
	relist(t, p)
	id := rt.AddContainer(sb, "app", running)
	relist(t, p)
	require.NoError(t, rt.SetContainerState(id, exited, 0))
	last := relist(t, p)

	select {
	case <-sub.Ready():
	default:
		t.Fatal("subscriber was not signalled")
	}
	b := sub.Next()
	assert.Same(t, last, b.Snapshot, "the batch carries the latest snapshot")
	assert.False(t, b.Resync)
	assert.Equal(t, []string{
		"SandboxAdded p", "ContainerCreated p/app", "ContainerStarted p/app", "ContainerExited p/app",
	}, eventTypes(b.Events))
	assert.Empty(t, sub.Next().Events, "Next drains")
}

func TestSubscribeAfterStartGetsCurrentState(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)
	p := newPoller(t, rt)
	relist(t, p)

	sub := p.Subscribe()
	defer sub.Close()
	assert.Equal(t, []string{"SandboxAdded p", "ContainerCreated p/app", "ContainerStarted p/app"},
		eventTypes(sub.Next().Events))

	sub.Close()
	relist(t, p)
	assert.Empty(t, sub.Next().Events, "a closed subscription receives nothing")
}

func TestRelistErrorKeepsLastSnapshot(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)
	p := newPoller(t, rt)
	good := relist(t, p)

	rt.SetError("ListPodSandbox", status.Error(codes.Unavailable, "runtime down"))
	_, err := p.Relist(context.Background())
	require.Error(t, err)
	assert.True(t, cri.IsUnavailable(err), "error class survives wrapping: %v", err)
	assert.Same(t, good, p.Snapshot())
	_, lastErr := p.LastError()
	assert.ErrorContains(t, lastErr, "list pod sandboxes")

	rt.SetError("ListPodSandbox", nil)
	relist(t, p)
	_, lastErr = p.LastError()
	assert.NoError(t, lastErr)
}

func TestStatusErrorIsRetriedNextRelist(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "p", "u", fakeruntime.WithIP("10.2.2.2"))
	id := rt.AddContainer(sb, "app", running)
	p := newPoller(t, rt)

	rt.SetError("ContainerStatus", status.Error(codes.Internal, "boom"))
	rt.SetError("PodSandboxStatus", status.Error(codes.Internal, "boom"))
	snap := relist(t, p)
	ctr, ok := snap.Container(id)
	require.True(t, ok, "the listing alone still publishes the container")
	assert.Equal(t, cri.StateRunning, ctr.State)
	assert.True(t, ctr.StartedAt.IsZero())
	pod, _ := snap.Sandbox(sb)
	assert.Empty(t, pod.IPs)

	rt.SetError("ContainerStatus", nil)
	rt.SetError("PodSandboxStatus", nil)
	rt.ResetCalls()
	snap = relist(t, p)
	assert.Equal(t, 1, rt.Calls("ContainerStatus"))
	assert.Equal(t, 1, rt.Calls("PodSandboxStatus"))
	ctr, _ = snap.Container(id)
	assert.False(t, ctr.StartedAt.IsZero())
	pod, _ = snap.Sandbox(sb)
	assert.Equal(t, "10.2.2.2", pod.IP(""))
}

func TestContainerOfVanishedSandboxIsSkipped(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "p", "u")
	rt.AddContainer(sb, "app", running)
	// A container listed whose sandbox is gone by the time sandboxes are
	// listed: simulate by failing the sandbox's status with NotFound.
	rt.SetError("PodSandboxStatus", status.Error(codes.NotFound, "gone"))
	p := newPoller(t, rt)
	snap := relist(t, p)
	assert.Empty(t, snap.Sandboxes())
	assert.Empty(t, snap.Containers())
}

// waitBatch waits for the subscription's next batch with a deadline.
func waitBatch(t *testing.T, sub *cri.Subscription) cri.Batch {
	t.Helper()
	select {
	case <-sub.Ready():
		return sub.Next()
	case <-time.After(5 * time.Second):
		t.Fatal("no batch within 5s")
		return cri.Batch{}
	}
}

// waitForWaiters waits until Run blocks on the fake clock.
func waitForWaiters(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "Run never waited on the clock")
}

func TestRunRelistsOnPeriodAndTrigger(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.AddSandbox("ns", "at-start", "u0")
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	p := newPollerWith(t, rt, cri.PollerConfig{RelistPeriod: time.Second}, cri.WithClock(clk))
	sub := p.Subscribe()
	defer sub.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	assert.Equal(t, []string{"SandboxAdded at-start"}, eventTypes(waitBatch(t, sub).Events), "the first relist runs at once")
	waitForWaiters(t, clk)

	rt.AddSandbox("ns", "by-tick", "u1")
	clk.Step(time.Second)
	assert.Equal(t, []string{"SandboxAdded by-tick"}, eventTypes(waitBatch(t, sub).Events))

	waitForWaiters(t, clk)
	rt.AddSandbox("ns", "by-trigger", "u2")
	p.Trigger()
	assert.Equal(t, []string{"SandboxAdded by-trigger"}, eventTypes(waitBatch(t, sub).Events))
}

func TestRunStopsWithContext(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	p := newPoller(t, rt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// The steady state (nothing changed) keeps the previous snapshot's contents;
// anything that changed must not be taken from it.
func TestRelistReusesOnlyWhatDidNotChange(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.CacheListings() // the cache must follow every change too
	sb1 := rt.AddSandbox("ns", "one", "uid-1")
	sb2 := rt.AddSandbox("ns", "two", "uid-2") // no containers: stoppable alone
	a := rt.AddContainer(sb1, "a", running)
	b := rt.AddContainer(sb1, "b", running)
	p := newPoller(t, rt)
	sub := p.Subscribe()
	defer sub.Close()
	first := relist(t, p)
	sub.Next()
	ctrA, _ := first.Container(a)
	ctrB, _ := first.Container(b)

	names := func(s *cri.Snapshot) []string {
		var out []string
		for _, c := range s.Containers() {
			out = append(out, c.Name+"="+string(c.State))
		}
		return out
	}

	t.Run("nothing changed", func(t *testing.T) {
		rt.ResetCalls()
		snap := relist(t, p)
		assert.NotSame(t, first, snap, "a new snapshot for each relist")
		assert.Same(t, &first.Containers()[0], &snap.Containers()[0], "contents shared")
		got, _ := snap.Container(a)
		assert.Same(t, ctrA, got)
		assert.Equal(t, map[string]int{"ListContainers": 1, "ListPodSandbox": 1}, rt.CallCounts())
		assert.Empty(t, sub.Next().Events)
	})

	t.Run("a container's state changed", func(t *testing.T) {
		require.NoError(t, rt.SetContainerState(a, exited, 2))
		snap := relist(t, p)
		got, _ := snap.Container(a)
		assert.NotSame(t, ctrA, got)
		assert.Equal(t, cri.StateExited, got.State)
		assert.Equal(t, int32(2), got.ExitCode)
		other, _ := snap.Container(b)
		assert.Same(t, ctrB, other, "the unchanged container is kept")
		assert.Equal(t, []string{"ContainerExited one/a"}, eventTypes(sub.Next().Events))
	})

	t.Run("a sandbox's state changed", func(t *testing.T) {
		client := dialFake(t, rt)
		require.NoError(t, client.StopPodSandbox(context.Background(), sb2))
		snap := relist(t, p)
		pod, _ := snap.Sandbox(sb2)
		assert.Equal(t, cri.SandboxNotReady, pod.State)
		assert.Equal(t, []string{"SandboxStopped two"}, eventTypes(sub.Next().Events))
	})

	t.Run("one container replaced by another: same count, other ID", func(t *testing.T) {
		rt.DeleteContainer(b)
		c := rt.AddContainer(sb1, "c", running)
		snap := relist(t, p)
		_, hasB := snap.Container(b)
		assert.False(t, hasB)
		_, hasC := snap.Container(c)
		assert.True(t, hasC)
		assert.Equal(t, []string{"a=Exited", "c=Running"}, names(snap))
		assert.Equal(t, []string{"ContainerCreated one/c", "ContainerStarted one/c", "ContainerRemoved one/b"}, eventTypes(sub.Next().Events))
	})

	t.Run("a sandbox replaced by another", func(t *testing.T) {
		rt.DeleteSandbox(sb2)
		sb3 := rt.AddSandbox("ns", "three", "uid-3")
		snap := relist(t, p)
		_, has2 := snap.Sandbox(sb2)
		_, has3 := snap.Sandbox(sb3)
		assert.False(t, has2)
		assert.True(t, has3)
		assert.Equal(t, []string{"SandboxAdded three", "SandboxRemoved two"}, eventTypes(sub.Next().Events))
	})
}
