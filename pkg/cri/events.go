package cri

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// containerdNamespace is where containerd's CRI plugin keeps its objects.
const containerdNamespace = "k8s.io"

// Topics whose events announce a change the CRI listing will show. Exec
// processes raise /tasks/exit too; classify ignores those. /tasks/delete
// matters because containerd's CRI plugin records an exit in its store only
// after deleting the task: that event comes when the listing is about to
// show the exit, where /tasks/exit comes tens of milliseconds before.
var eventFilters = []string{
	`namespace=="` + containerdNamespace + `",topic=="/tasks/start"`,
	`namespace=="` + containerdNamespace + `",topic=="/tasks/exit"`,
	`namespace=="` + containerdNamespace + `",topic=="/tasks/delete"`,
	`namespace=="` + containerdNamespace + `",topic=="/containers/delete"`,
}

const (
	eventsBackoffFirst = 500 * time.Millisecond
	// Reconnecting is one dial on a local socket; a short cap means exits
	// are instant again within seconds of containerd's return.
	eventsBackoffMax = 5 * time.Second
)

// EventWatcher follows containerd's own event stream and makes the poller
// relist as soon as a container starts, exits or is deleted, so an exit is
// published within milliseconds instead of at the next relist period. The
// poller stays the source of truth: events only say when to look, and
// everything works (more slowly) while the stream is down.
type EventWatcher struct {
	socket    string
	poller    *Poller
	clock     clock.Clock
	connected atomic.Bool
}

// NewEventWatcher returns a watcher for the containerd API on socket (a
// path, or a unix:// endpoint) that drives p.
func NewEventWatcher(socket string, p *Poller) (*EventWatcher, error) {
	path, err := SocketPath(socket)
	if err != nil {
		return nil, fmt.Errorf("containerd address: %w", err)
	}
	return &EventWatcher{socket: path, poller: p, clock: p.clock}, nil
}

// Connected reports whether the event stream is currently established.
func (w *EventWatcher) Connected() bool { return w.connected.Load() }

// Run follows the event stream until ctx is done, resubscribing with
// back-off when it breaks.
func (w *EventWatcher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("containerdAddress", w.socket)
	conn, err := grpc.NewClient("unix://"+w.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		logger.Error(err, "Cannot follow containerd events; exits are seen at the next relist")
		return
	}
	defer conn.Close()
	client := eventsapi.NewEventsClient(conn)

	backoff := eventsBackoffFirst
	var lastErr string
	for {
		established, err := w.follow(ctx, client, logger)
		w.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if established {
			backoff = eventsBackoffFirst
		}
		if msg := err.Error(); msg != lastErr {
			logger.Error(err, "Lost containerd event stream; relisting every period until it is back", "retryIn", backoff)
			lastErr = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(backoff):
		}
		backoff = min(2*backoff, eventsBackoffMax)
	}
}

// follow subscribes once and handles events until the stream breaks.
// established says whether the subscription was made (the next attempt then
// starts from the shortest back-off).
func (w *EventWatcher) follow(ctx context.Context, client eventsapi.EventsClient, logger klog.Logger) (established bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Without WaitForReady the call fails at once when containerd is down,
	// so a stream that opens means we are subscribed.
	stream, err := client.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: eventFilters})
	if err != nil {
		return false, fmt.Errorf("subscribe to containerd events: %w", err)
	}
	w.connected.Store(true)
	logger.Info("Following containerd events")
	// Anything that happened while we were not subscribed is only in the
	// listing.
	w.poller.Trigger()
	for {
		env, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("receive containerd events: %w", err)
		}
		id, c, ok, err := classify(env)
		if err != nil {
			logger.V(2).Info("Ignoring undecodable containerd event", "topic", env.GetTopic(), "err", err)
			continue
		}
		if ok {
			logger.V(4).Info("Containerd event", "topic", env.GetTopic(), "id", id)
			w.poller.expect(id, c)
		}
	}
}

// classify decodes an envelope into the object it concerns and the change
// it announces. ok is false for events that need no relist (an exec'd
// process exiting: exec probes would otherwise cause a relist each).
func classify(env *eventsapi.Envelope) (id string, c change, ok bool, err error) {
	payload := env.GetEvent().GetValue()
	switch env.GetTopic() {
	case "/tasks/start":
		var e eventtypes.TaskStart
		if err := proto.Unmarshal(payload, &e); err != nil {
			return "", 0, false, err
		}
		return e.GetContainerID(), changeStarted, true, nil
	case "/tasks/exit":
		var e eventtypes.TaskExit
		if err := proto.Unmarshal(payload, &e); err != nil {
			return "", 0, false, err
		}
		// The init process has the container's ID; exec processes their own.
		if e.GetID() != e.GetContainerID() {
			return "", 0, false, nil
		}
		return e.GetContainerID(), changeExited, true, nil
	case "/tasks/delete":
		var e eventtypes.TaskDelete
		if err := proto.Unmarshal(payload, &e); err != nil {
			return "", 0, false, err
		}
		// runc's shim leaves ID empty for the init process; others set it.
		if e.GetID() != "" && e.GetID() != e.GetContainerID() {
			return "", 0, false, nil
		}
		return e.GetContainerID(), changeExited, true, nil
	case "/containers/delete":
		var e eventtypes.ContainerDelete
		if err := proto.Unmarshal(payload, &e); err != nil {
			return "", 0, false, err
		}
		return e.GetID(), changeRemoved, true, nil
	default:
		return "", 0, false, nil
	}
}
