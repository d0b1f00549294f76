package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/bounded"
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
	delivered := func(n int) func() bool { return func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n } }
	// Each after the one before is delivered: a waiting ready would be
	// superseded by the not-ready.
	h.Record(event("ContainerReady", "Container app is ready"))
	require.Eventually(t, delivered(1), 5*time.Second, time.Millisecond)
	h.Record(event("Unhealthy", "Liveness probe failed: boom")) // not a transition
	h.Record(event("ContainerNotReady", "Container app is not ready: readiness probe failed 3 times in a row"))
	require.Eventually(t, delivered(2), 5*time.Second, time.Millisecond)
	h.Record(event("Started", "Container started"))
	require.Eventually(t, delivered(3), 5*time.Second, time.Millisecond)
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

// Record never blocks: waiting transitions are coalesced and counted.
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
	for range 2 * maxWaiting {
		h.Record(event("ContainerReady", "ready")) // returns at once, the webhook stuck
	}
	assert.GreaterOrEqual(t, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "coalesced")), float64(2*maxWaiting-2))
}

// logs keeps what the hooks log.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// runLogged runs h with a logger that keeps its lines; stop ends Run and
// returns when it has returned.
func runLogged(t *testing.T, h *Hooks) (l *logs, stop func()) {
	t.Helper()
	l = &logs{}
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	var wg sync.WaitGroup
	wg.Go(func() { h.Run(ctx) })
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return l, stop
}

// value returns the value of a gauge or counter of reg with the given
// hook label (0 when there is none).
func value(t *testing.T, reg prometheus.Gatherer, name, hook string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hook" && l.GetValue() == hook {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func containerEvent(pod, message string) events.Event {
	e := event("ContainerReady", message)
	e.Pod = pod
	return e
}

// stat returns a process's state and process group from /proc; ok is
// false when it is gone or a zombie (dead, not yet reaped).
func stat(pid int) (pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid pgrp …
	if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	pgrp, _ = strconv.Atoi(fields[2])
	return pgrp, true
}

func alive(pid int) bool { _, ok := stat(pid); return ok }

// group returns the live processes of process group pgid.
func group(t *testing.T, pgid int) []int {
	t.Helper()
	dir, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, d := range dir {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if g, ok := stat(pid); ok && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// pids waits for the pids a hook command wrote to path and kills them
// when the test ends, whatever happens.
func pids(t *testing.T, path string) []int {
	t.Helper()
	var out []int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		out = nil
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			out = append(out, pid)
		}
		return true
	}, 10*time.Second, time.Millisecond)
	t.Cleanup(func() {
		for _, pid := range out {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return out
}

// At its timeout the command's whole process group is killed, a child in
// the background included, and the delivery ends at once although that
// child held the command's standard error.
func TestCommandTimeoutKillsItsGroup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pids")
	h := New(WithCommand([]string{"sh", "-c", `sleep 300 & a=$!; sleep 300 & b=$!; echo $$ $a $b >` + file + `.tmp && mv ` + file + `.tmp ` + file + `; wait`}), withCommandTimeout(2*time.Second))
	l, _ := runLogged(t, h)
	h.Record(event("ContainerReady", "ready"))
	ps := pids(t, file)
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "error")) == 1 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return !slices.ContainsFunc(ps, alive) && len(group(t, ps[0])) == 0 }, 10*time.Second, time.Millisecond)
	assert.Contains(t, l.String(), "still running after 2s: its process group was killed")
}

// When the agent stops, a command in flight is killed with its group, and
// Run returns.
func TestShutdownKillsCommandGroup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pids")
	h := New(WithCommand([]string{"sh", "-c", `sleep 300 & a=$!; sleep 300 & b=$!; echo $$ $a $b >` + file + `.tmp && mv ` + file + `.tmp ` + file + `; wait`}))
	_, stop := runLogged(t, h)
	h.Record(event("ContainerReady", "ready"))
	ps := pids(t, file)
	assert.Subset(t, group(t, ps[0]), ps, "the command leads a process group of its own, its children in it")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	require.Eventually(t, func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond, "Run returns")
	require.Eventually(t, func() bool { return !slices.ContainsFunc(ps, alive) && len(group(t, ps[0])) == 0 }, 10*time.Second, time.Millisecond)
}

// What a command leaves running in its group is killed when it exits: the
// delivery does not wait for it, nor does it outlive the hook.
func TestCommandLeavesNothingBehind(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pids")
	h := New(WithCommand([]string{"sh", "-c", `sleep 300 & echo $$ $! >` + file + `.tmp && mv ` + file + `.tmp ` + file}))
	run(t, h)
	h.Record(event("ContainerReady", "ready"))
	ps := pids(t, file)
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "ok")) == 1 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return !alive(ps[1]) && len(group(t, ps[0])) == 0 }, 10*time.Second, time.Millisecond)
}

// A process that left the command's group (setsid) escapes the kill, but
// its hold on the command's standard error does not hold the delivery.
func TestEscapedChildDoesNotHoldDelivery(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	file := filepath.Join(t.TempDir(), "pids")
	h := New(WithCommand([]string{"sh", "-c", `setsid sleep 300 & echo $! >` + file + `.tmp && mv ` + file + `.tmp ` + file}))
	run(t, h)
	h.Record(event("ContainerReady", "ready"))
	pids(t, file) // killed at the end
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "ok")) == 1 }, 10*time.Second, time.Millisecond)
}

// A command that hangs for one container does not delay another's
// transition: it is delivered while the first still runs.
func TestSlowCommandDoesNotDelayOthers(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	reg := prometheus.NewRegistry()
	h := New(WithCommand([]string{"sh", "-c", `[ "$CRI_PROBER_POD" = slow ] && exec sleep 300; echo "$CRI_PROBER_POD" >>` + out}), WithRegisterer(reg))
	run(t, h)
	h.Record(containerEvent("slow", "ready"))
	h.Record(containerEvent("fast", "ready"))
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "ok")) == 1 }, 5*time.Second, time.Millisecond,
		"the fast one is delivered before the slow one's 10s timeout")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "fast\n", string(b))
}

// Deliveries of different containers run in parallel, at most
// maxInFlight at once; the rest wait.
func TestWebhookParallelBounded(t *testing.T) {
	var mu sync.Mutex
	now, most, seen := 0, 0, 0
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		now++
		seen++
		most = max(most, now)
		mu.Unlock()
		<-gate
		mu.Lock()
		now--
		mu.Unlock()
	}))
	defer srv.Close()
	defer release() // before the server closes, whatever happens
	reg := prometheus.NewRegistry()
	h := New(WithWebhook(srv.URL), WithRegisterer(reg))
	run(t, h)
	for i := range 2 * maxInFlight {
		h.Record(containerEvent(fmt.Sprintf("web-%d", i), "ready"))
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return now == maxInFlight && value(t, reg, "cri_prober_hook_in_flight", "webhook") == maxInFlight &&
			value(t, reg, "cri_prober_hook_waiting", "webhook") == maxInFlight
	}, 5*time.Second, time.Millisecond, "4 in flight, 4 waiting")
	release()
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok")) == 2*maxInFlight }, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, maxInFlight, most)
	assert.Equal(t, 2*maxInFlight, seen)
}

// gatedWebhook is a webhook server that records what each delivered
// transition is (by name), holding the delivery of any transition hold
// picks until release is called (at the latest when the test ends).
func gatedWebhook(t *testing.T, name func(Transition) string, hold func(Transition) bool) (url string, seen func() []string, release func()) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr Transition
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&tr))
		mu.Lock()
		got = append(got, name(tr))
		mu.Unlock()
		if hold(tr) {
			<-gate
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(release) // before the server closes, whatever happens
	seen = func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
	return srv.URL, seen, release
}

// The transitions of one container are delivered one at a time, in order,
// while another container's go past them.
func TestWebhookOrderPerContainer(t *testing.T) {
	url, seen, release := gatedWebhook(t, func(tr Transition) string { return tr.Pod + " " + tr.Transition },
		func(tr Transition) bool { return tr.Pod == "a" && tr.Transition == NotReady })
	reg := prometheus.NewRegistry()
	h := New(WithWebhook(url), WithRegisterer(reg))
	run(t, h)
	notReady := event("ContainerNotReady", "not ready")
	notReady.Pod = "a"
	h.Record(notReady)
	require.Eventually(t, func() bool { return len(seen()) == 1 }, 5*time.Second, time.Millisecond)
	h.Record(containerEvent("a", "ready again"))
	h.Record(containerEvent("b", "ready"))
	require.Eventually(t, func() bool {
		return len(seen()) == 2 && value(t, reg, "cri_prober_hook_in_flight", "webhook") == 1 && value(t, reg, "cri_prober_hook_waiting", "webhook") == 1
	}, 5*time.Second, time.Millisecond, "b delivered, a's ready held behind its not-ready")
	assert.Equal(t, []string{"a not-ready", "b ready"}, seen())
	release()
	require.Eventually(t, func() bool { return len(seen()) == 3 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"a not-ready", "b ready", "a ready"}, seen())
}

// A container flapping 1,000 times against a stuck receiver does not push
// out another container's single not-ready: each container keeps its
// latest waiting transition, so both final states are delivered, the
// flapping one's after the one it had in flight.
func TestFlappingDoesNotPushOutOthers(t *testing.T) {
	url, seen, release := gatedWebhook(t, func(tr Transition) string { return tr.Pod + " " + tr.Transition + " " + tr.Message },
		func(Transition) bool { return true })
	reg := prometheus.NewRegistry()
	h := New(WithWebhook(url), WithRegisterer(reg))
	run(t, h)
	h.Record(containerEvent("flapping", "m0"))
	for i := 1; i < maxInFlight; i++ {
		h.Record(containerEvent(fmt.Sprintf("held-%d", i), "held"))
	}
	require.Eventually(t, func() bool { return len(seen()) == maxInFlight }, 5*time.Second, time.Millisecond, "every worker held")
	notReady := event("ContainerNotReady", "the only one")
	notReady.Pod = "other"
	h.Record(notReady)
	for i := 1; i <= 1000; i++ {
		e := event("ContainerReady", fmt.Sprintf("m%d", i))
		if i%2 == 0 {
			e = event("ContainerNotReady", fmt.Sprintf("m%d", i))
		}
		e.Pod = "flapping"
		h.Record(e)
	}
	assert.Equal(t, 999.0, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "coalesced")))
	assert.Equal(t, 2.0, value(t, reg, "cri_prober_hook_waiting", "webhook"), "one transition per container waits")
	release()
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok")) == maxInFlight+2 }, 10*time.Second, time.Millisecond)
	of := func(pod string) []string {
		return slices.DeleteFunc(seen(), func(s string) bool { return !strings.HasPrefix(s, pod+" ") })
	}
	assert.Equal(t, []string{"other not-ready the only one"}, of("other"))
	assert.Equal(t, []string{"flapping ready m0", "flapping not-ready m1000"}, of("flapping"))
	assert.Zero(t, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "dropped")))
}

// Waiting transitions coalesce by kind: a readiness result supersedes the
// waiting readiness result, a restart the waiting restart, never one the
// other; what is delivered keeps the order they happened in and ends at
// the container's latest readiness.
func TestCoalescingKeepsRestarts(t *testing.T) {
	url, seen, release := gatedWebhook(t, func(tr Transition) string { return tr.Transition + " " + tr.Message },
		func(tr Transition) bool { return tr.Message == "m0" })
	h := New(WithWebhook(url))
	run(t, h)
	h.Record(event("ContainerReady", "m0"))
	require.Eventually(t, func() bool { return len(seen()) == 1 }, 5*time.Second, time.Millisecond)
	for i, reason := range []string{"ContainerNotReady", "Started", "ContainerReady", "ContainerNotReady", "Started", "ContainerReady", "Started", "ContainerNotReady"} {
		h.Record(event(reason, fmt.Sprintf("m%d", i+1)))
	}
	// m1 by m3, m2 by m5, m3 by m4, m4 by m6, m5 by m7, m6 by m8.
	assert.Equal(t, 6.0, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "coalesced")))
	release()
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok")) == 3 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"ready m0", "restarted m7", "not-ready m8"}, seen())
}

// A container whose next transition waits after its turn goes behind the
// others: containers flapping on every worker do not starve one that
// waits.
func TestContainersTakeTurns(t *testing.T) {
	h := New(WithWebhook("http://127.0.0.1:1/unused")) // not run: the test takes the turns
	q := h.queues[0]
	restarted := func(pod string) events.Event { e := event("Started", "restarted"); e.Pod = pod; return e }
	for i := range maxInFlight {
		h.Record(restarted(fmt.Sprintf("flapping-%d", i)))
		h.Record(containerEvent(fmt.Sprintf("flapping-%d", i), "ready"))
	}
	notReady := event("ContainerNotReady", "not ready")
	notReady.Pod = "other"
	h.Record(notReady)
	var inFlight []Transition
	for range maxInFlight {
		tr, _, ok := q.next()
		require.True(t, ok)
		inFlight = append(inFlight, tr)
	}
	for i := range maxInFlight {
		h.Record(restarted(fmt.Sprintf("flapping-%d", i))) // each keeps two waiting
	}
	q.done(inFlight[0])
	tr, _, ok := q.next()
	require.True(t, ok)
	assert.Equal(t, "other", tr.Pod)
}

// When maxWaiting containers wait, the waiting transitions of those whose
// pod is gone are dropped and counted; a container whose pod exists keeps
// its latest state however many wait.
func TestGonePodsDropped(t *testing.T) {
	var mu sync.Mutex
	gone := map[string]bool{}
	h := New(WithWebhook("http://127.0.0.1:1/unused"), WithPodExists(func(namespace, pod string) bool { // not run: nothing is delivered
		mu.Lock()
		defer mu.Unlock()
		return !gone[pod]
	}))
	waiting := func() float64 { return testutil.ToFloat64(h.waiting.WithLabelValues("webhook")) }
	dropped := func() float64 { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "dropped")) }
	for i := range maxWaiting + 10 {
		h.Record(containerEvent(fmt.Sprintf("live-%d", i), "ready"))
	}
	assert.Equal(t, float64(maxWaiting+10), waiting(), "every live container waits")
	assert.Zero(t, dropped())

	mu.Lock()
	for i := range maxWaiting/2 + 10 {
		gone[fmt.Sprintf("live-%d", i)] = true
	}
	mu.Unlock()
	// The next look is at twice the containers left by the first one.
	for i := range maxWaiting + 10 {
		h.Record(containerEvent(fmt.Sprintf("new-%d", i), "ready"))
	}
	assert.Equal(t, float64(maxWaiting/2+10), dropped())
	assert.Equal(t, float64(maxWaiting/2+maxWaiting+10), waiting())
	q := h.queues[0]
	tr, since, ok := q.next()
	require.True(t, ok)
	assert.Equal(t, fmt.Sprintf("live-%d", maxWaiting/2+10), tr.Pod, "the oldest one left goes first")
	assert.Equal(t, lost{dropped: maxWaiting/2 + 10}, since, "for the log line")
}

// Redirects are not followed, to another host or to the same one.
func TestWebhookDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	defer other.Close()
	for _, tc := range []struct{ name, to string }{
		{"another host", other.URL + "/next?token=s3cr3t"},
		{"the same host", "/next?token=s3cr3t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/next" {
					followed.Add(1)
					return
				}
				http.Redirect(w, r, tc.to, http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			h := New(WithWebhook(srv.URL+"/hook"), withRetryBackoff(time.Millisecond))
			l, _ := runLogged(t, h)
			h.Record(event("ContainerReady", "ready"))
			require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "error")) == 1 }, 5*time.Second, time.Millisecond)
			assert.Zero(t, followed.Load())
			assert.Contains(t, l.String(), "answered 307 Temporary Redirect, to ")
			assert.Contains(t, l.String(), "/next: redirects are not followed")
			assert.NotContains(t, l.String(), "s3cr3t")
		})
	}
}

// The webhook's user, password, query and fragment appear in no log line,
// whether the receiver answers an error or cannot be reached (net/http's
// errors quote the URL).
func TestWebhookURLRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook", http.StatusBadRequest)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, base := range map[string]string{"an answer": srv.URL, "a network error": closed.URL} {
		t.Run(name, func(t *testing.T) {
			secret := strings.Replace(base, "http://", "http://alice:pa55w0rd@", 1) + "/hook?token=tok3n#fr4g"
			h := New(WithWebhook(secret), withRetryBackoff(time.Millisecond))
			l, _ := runLogged(t, h)
			h.Record(event("ContainerReady", "ready"))
			require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "error")) == 1 }, 10*time.Second, time.Millisecond)
			out := l.String()
			assert.Contains(t, out, base+"/hook")
			for _, s := range []string{"alice", "pa55w0rd", "tok3n", "fr4g"} {
				assert.NotContains(t, out, s)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pass@example.com:8443/a/b?token=x#frag": "https://example.com:8443/a/b",
		"http://example.com":                 "http://example.com",
		"http://[::1]:80/p%2Fq?x=1":          "http://[::1]:80/p%2Fq",
		"/relative?token=x":                  "/relative",
		"mailto:secret@example.com":          "mailto:",
		"http://user:p%zz@example.com/?x=1":  "(unparsable URL)",
		"http://example.com/\x7f?token=x":    "(unparsable URL)",
		"http://user@example.com/hook;t=1?x": "http://example.com/hook;t=1",
	} {
		assert.Equal(t, want, RedactURL(raw), raw)
	}
	err := redactError(&url.Error{Op: "Post", URL: "http://u:p@example.com/x?t=1", Err: io.EOF})
	assert.Equal(t, `Post "http://example.com/x": EOF`, err.Error())
}

// At most maxAnswer bytes of an answer are read: an endless one does not
// hold the delivery until its timeout.
func TestWebhookEndlessAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	h := New(WithWebhook(srv.URL))
	run(t, h)
	h.Record(event("ContainerReady", "ready"))
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok"))+testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "error")) == 1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.deliveries.WithLabelValues("webhook", "ok")))
}

// A command's standard error is logged, cut to bounded.Output.
func TestCommandStderrBounded(t *testing.T) {
	h := New(WithCommand([]string{"sh", "-c", `head -c 1000000 /dev/zero | tr '\0' x >&2; exit 3`}))
	l, _ := runLogged(t, h)
	h.Record(event("ContainerReady", "ready"))
	require.Eventually(t, func() bool { return testutil.ToFloat64(h.deliveries.WithLabelValues("command", "error")) == 1 }, 10*time.Second, time.Millisecond)
	out := l.String()
	assert.Contains(t, out, "exit status 3")
	assert.Contains(t, out, "more bytes cut")
	assert.Less(t, len(out), 2*bounded.Output)
}
