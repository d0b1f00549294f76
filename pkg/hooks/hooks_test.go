package hooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/events"
)

func run(t *testing.T, h *Hooks) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { h.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// event is an event as the prober and the restarter record it: the ones
// that are transitions say so (events.Event.Transition); the hooks never
// look at reasons.
func event(reason, message string) events.Event {
	transitions := map[string]events.Transition{"ContainerReady": events.TransitionReady, "ContainerNotReady": events.TransitionNotReady, "Started": events.TransitionRestarted}
	return events.Event{Time: t0, Type: events.Normal, Reason: reason, Namespace: "shop", Pod: "web", Container: "app", Message: message,
		Transition: transitions[reason]}
}

func TestNoHookNoHooks(t *testing.T) {
	assert.Nil(t, New())
}

// Ready, not ready and restarted reach the webhook, in order, as JSON with
// the pod's IP; other events do not; a 5xx is tried again.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []Transition
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var tr Transition
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&tr))
		got = append(got, tr)
	}))
	defer srv.Close()
	h := New(WithWebhook(srv.URL), withRetryBackoff(time.Millisecond), WithPodIP(func(ns, pod string) string { return "10.0.0.5" }))
	run(t, h)
	h.Record(event("ContainerReady", "Container app is ready"))
	h.Record(event("Unhealthy", "Liveness probe failed: boom")) // not a transition
	h.Record(event("ContainerNotReady", "Container app is not ready: readiness probe failed 3 times in a row"))
	h.Record(event("Started", "Container started"))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []Transition{
		{Transition: Ready, Time: t0, Namespace: "shop", Pod: "web", Container: "app", PodIP: "10.0.0.5", Reason: "ContainerReady", Message: "Container app is ready"},
		{Transition: NotReady, Time: t0, Namespace: "shop", Pod: "web", Container: "app", PodIP: "10.0.0.5", Reason: "ContainerNotReady", Message: "Container app is not ready: readiness probe failed 3 times in a row"},
		{Transition: Restarted, Time: t0, Namespace: "shop", Pod: "web", Container: "app", PodIP: "10.0.0.5", Reason: "Started", Message: "Container started"},
	}, got)
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok")) == 3 }, 5*time.Second, time.Millisecond)
}

// A 4xx is not tried again; a dead webhook costs an error per transition.
func TestWebhookErrors(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	h := New(WithWebhook(srv.URL), withRetryBackoff(time.Millisecond))
	run(t, h)
	h.Record(event("ContainerReady", "ready"))
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "error")) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, calls)
}

// The command gets the JSON on stdin and the transition in its
// environment.
func TestCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	h := New(WithCommand([]string{"sh", "-c", `{ echo "$CRI_PROBER_TRANSITION $CRI_PROBER_NAMESPACE/$CRI_PROBER_POD/$CRI_PROBER_CONTAINER"; cat; echo; } >>` + out}))
	run(t, h)
	h.Record(event("ContainerReady", "Container app is ready"))
	h.Record(event("Started", "Container started"))
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "ok")) == 2 }, 5*time.Second, time.Millisecond)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, "ready shop/web/app", lines[0])
	assert.JSONEq(t, `{"transition":"ready","time":"2026-11-21T09:00:00Z","namespace":"shop","pod":"web","container":"app","reason":"ContainerReady","message":"Container app is ready"}`, lines[1])
	assert.Equal(t, "restarted shop/web/app", lines[2])

	failing := New(WithCommand([]string{"sh", "-c", "echo nope >&2; exit 3"}))
	run(t, failing)
	failing.Record(event("ContainerReady", "ready"))
	require.Eventually(t, func() bool { return testutil.ToFloat64(failing.deliveries.WithLabelValues("command", "error")) == 1 }, 5*time.Second, time.Millisecond)
}

// Record never blocks: past the queue, transitions are dropped and counted.
func TestRecordNeverBlocks(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-block
	}))
	defer srv.Close()
	defer close(block)
	h := New(WithWebhook(srv.URL))
	run(t, h)
	for range queueSize + 10 {
		h.Record(event("ContainerReady", "ready")) // returns at once, the webhook stuck
	}
	assert.GreaterOrEqual(t, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "dropped")), 9.0)
}
