package cri_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// fakeEvents serves containerd's events API and sends what the test queues.
type fakeEvents struct {
	eventsapi.UnimplementedEventsServer
	queue   chan *eventsapi.Envelope
	filters chan []string
}

func (f *fakeEvents) Subscribe(req *eventsapi.SubscribeRequest, stream eventsapi.Events_SubscribeServer) error {
	f.filters <- req.GetFilters()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case env := <-f.queue:
			if err := stream.Send(env); err != nil {
				return err
			}
		}
	}
}

func startFakeEvents(t *testing.T) (*fakeEvents, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakectrd")
	require.NoError(t, err)
	socket := filepath.Join(dir, "containerd.sock")
	lis, err := net.Listen("unix", socket)
	require.NoError(t, err)
	f := &fakeEvents{queue: make(chan *eventsapi.Envelope, 16), filters: make(chan []string, 16)}
	srv := grpc.NewServer()
	eventsapi.RegisterEventsServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Stop()
		os.RemoveAll(dir)
	})
	return f, socket
}

func envelope(t *testing.T, topic string, event proto.Message) *eventsapi.Envelope {
	t.Helper()
	payload, err := anypb.New(event)
	require.NoError(t, err)
	return &eventsapi.Envelope{Namespace: "k8s.io", Topic: topic, Event: payload}
}

// startAgentLoop runs the poller (with a fake clock whose period never
// elapses unless stepped) and the event watcher until the test ends.
func startAgentLoop(t *testing.T, rt *fakeruntime.Runtime, eventsSocket string) (*cri.Poller, *cri.EventWatcher, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	p := newPollerWith(t, rt, cri.PollerConfig{RelistPeriod: time.Hour}, cri.WithClock(clk))
	w, err := cri.NewEventWatcher(eventsSocket, p)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { p.Run(ctx); done <- struct{}{} }()
	go func() { w.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	return p, w, clk
}

func TestEventWatcherRelistsOnExit(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	id := rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)
	events, socket := startFakeEvents(t)
	p, w, _ := startAgentLoop(t, rt, socket)
	sub := p.Subscribe()
	defer sub.Close()

	waitBatch(t, sub)
	filters := <-events.filters
	assert.Contains(t, filters, `namespace=="k8s.io",topic=="/tasks/exit"`)
	require.Eventually(t, w.Connected, 5*time.Second, time.Millisecond)

	require.NoError(t, rt.SetContainerState(id, exited, 9))
	events.queue <- envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: id, ID: id, ExitStatus: 9})

	// No clock step: only the event can have caused this relist.
	b := waitBatch(t, sub)
	assert.Equal(t, []string{"ContainerExited p/app"}, eventTypes(b.Events))
}

func TestEventBeforeTheListingShowsItIsRetried(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	id := rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)
	events, socket := startFakeEvents(t)
	p, w, clk := startAgentLoop(t, rt, socket)
	sub := p.Subscribe()
	defer sub.Close()
	waitBatch(t, sub)
	require.Eventually(t, w.Connected, 5*time.Second, time.Millisecond)

	// containerd's CRI plugin updates its store from the same event, a
	// little after us: the first relist still shows the container running.
	lists := rt.Calls("ListContainers")
	events.queue <- envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: id, ID: id})
	require.Eventually(t, func() bool {
		return rt.Calls("ListContainers") > lists && clk.Waiters() >= 2
	}, 5*time.Second, time.Millisecond, "expected a relist and then a short retry timer beside the ticker")

	require.NoError(t, rt.SetContainerState(id, exited, 0))
	var stepped time.Duration
	require.Eventually(t, func() bool {
		clk.Step(10 * time.Millisecond)
		stepped += 10 * time.Millisecond
		select {
		case <-sub.Ready():
			return true
		default:
			return false
		}
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"ContainerExited p/app"}, eventTypes(sub.Next().Events))
	assert.Less(t, stepped, time.Second, "published by the quick retries, far before the relist period")
}

func TestEventWatcherWithoutContainerdKeepsTrying(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	_, w, clk := startAgentLoop(t, rt, filepath.Join(t.TempDir(), "missing.sock"))
	// The watcher backs off on the (fake) clock: a ticker plus its timer.
	require.Eventually(t, func() bool { return clk.Waiters() == 2 }, 5*time.Second, time.Millisecond)
	assert.False(t, w.Connected())
}
