package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
)

type fakePods []pods.PodReport

func (f fakePods) Report() []pods.PodReport { return f }

// ReportPod answers the last pod of that name: as pods.View.ByName, one
// rule for every per-name endpoint.
func (f fakePods) ReportPod(namespace, name string) (pods.PodReport, bool) {
	for i := len(f) - 1; i >= 0; i-- {
		if f[i].Namespace == namespace && f[i].Name == name {
			return f[i], true
		}
	}
	return pods.PodReport{}, false
}

var (
	t0      = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	healthy = func() error { return nil }
)

// condition is a pod condition of the reports.
func condition(t corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) pods.Condition {
	return pods.Condition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: t0}
}

func testPods() fakePods {
	notReady := "containers with unready status: [app worker]"
	return fakePods{
		{Key: "uid-web", Namespace: "shop", Name: "web", UID: "uid-web", SandboxID: "sb1", IP: "10.0.0.5", CreatedAt: t0, StartTime: t0, Ready: false,
			Phase: corev1.PodRunning, Source: "pods.yaml:1", Conditions: []pods.Condition{
				condition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""),
				condition(corev1.PodInitialized, corev1.ConditionTrue, "", ""),
				condition(corev1.PodReady, corev1.ConditionFalse, pods.ReasonContainersNotReady, notReady),
				condition(corev1.ContainersReady, corev1.ConditionFalse, pods.ReasonContainersNotReady, notReady),
				condition(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
			}, Containers: []pods.ContainerReport{
				{Name: "app", ID: "c1", Attempt: 2, RestartCount: 2, State: cri.StateRunning, StartedAt: t0.Add(time.Minute), Probed: true, Started: true, Ready: false,
					Status: pods.ContainerStatus{State: pods.ContainerState{Running: &pods.StateRunning{StartedAt: t0.Add(time.Minute)}},
						LastState: pods.ContainerState{Terminated: &pods.StateTerminated{ExitCode: 137, Reason: "Error", StartedAt: t0, FinishedAt: t0.Add(50 * time.Second), ContainerID: "c0"}}},
					Probes: []pods.ProbeReport{
						{Type: results.Liveness, Result: results.Success, Last: &results.Observation{Time: t0.Add(2 * time.Minute), Outcome: results.OutcomeSuccess, Output: "ok", Consecutive: 4, Threshold: 1}},
						{Type: results.Readiness, Result: results.Failure},
					}},
				{Name: "worker", ID: "c2", RestartCount: 3, State: cri.StateExited, Waiting: &pods.Waiting{Reason: "CrashLoopBackOff", Until: t0.Add(time.Hour)},
					Status: pods.ContainerStatus{State: pods.ContainerState{Waiting: &pods.StateWaiting{Reason: "CrashLoopBackOff",
						Message: "back-off 40s restarting failed container=worker pod=web_shop(uid-web)"}},
						LastState: pods.ContainerState{Terminated: &pods.StateTerminated{ExitCode: 1, Reason: "Error", Message: "cannot open /data: permission denied\nbye",
							StartedAt: t0.Add(3 * time.Minute), FinishedAt: t0.Add(4 * time.Minute), ContainerID: "c2"}}}},
			}},
		{Key: "uid-db", Namespace: "shop", Name: "db", Ready: true, Phase: corev1.PodRunning, Conditions: []pods.Condition{
			condition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""), condition(corev1.PodInitialized, corev1.ConditionTrue, "", ""),
			condition(corev1.PodReady, corev1.ConditionTrue, "", ""), condition(corev1.ContainersReady, corev1.ConditionTrue, "", ""),
			condition(corev1.PodScheduled, corev1.ConditionTrue, "", "")},
			Containers: []pods.ContainerReport{{Name: "db", ID: "c3", State: cri.StateRunning, Started: true, Ready: true,
				Status: pods.ContainerStatus{State: pods.ContainerState{Running: &pods.StateRunning{StartedAt: t0}}}}}},
	}
}

// fakeHistory answers for uid-web.
type fakeHistory struct{}

func (fakeHistory) For(podKey string) []results.ProbeHistory {
	if podKey != "uid-web" {
		return nil
	}
	fail := results.Observation{Time: t0, Duration: 1500 * time.Microsecond, Outcome: results.OutcomeFailure, Output: "HTTP probe failed with statuscode: 500",
		Consecutive: 3, Threshold: 3, Changed: true, ContainerID: "c0"}
	ok := results.Observation{Time: t0.Add(time.Minute), Outcome: results.OutcomeSuccess, Consecutive: 1, Threshold: 1, ContainerID: "c1"}
	return []results.ProbeHistory{{Container: "app", Type: results.Liveness, Recent: []results.Observation{ok}, Failures: []results.Observation{fail}}}
}

type fakeLedger []ledger.Entry

func (l fakeLedger) For(ns, pod string) []ledger.Entry {
	var out []ledger.Entry
	for _, e := range l {
		if e.Namespace == ns && e.Pod == pod {
			out = append(out, e)
		}
	}
	return out
}

func (l fakeLedger) Newest(n int, keep func(namespace, pod string) bool) []ledger.Entry {
	var out []ledger.Entry
	for i := len(l) - 1; i >= 0 && len(out) < n; i-- {
		if keep(l[i].Namespace, l[i].Pod) {
			out = append(out, l[i])
		}
	}
	return out
}

func newServer(health func() error) (*Server, *events.Ring) {
	ring := events.NewRing(10)
	entries := fakeLedger{{Time: t0, Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c0", Cause: "liveness",
		Failures: []ledger.Failure{{Time: t0, Output: strings.Repeat("x", 2000), Consecutive: 1, Threshold: 1}}, ExitCode: 137,
		GracePeriodSeconds: 30, Action: ledger.ActionRestarted, ReplacementID: "c1", Attempt: 1}}
	return New(Config{Pods: testPods(), History: fakeHistory{}, Ledger: entries,
		Events: ring, Health: health}), ring
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestPodsJSONHasTheDocumentedFields(t *testing.T) {
	s, _ := newServer(healthy)
	code, body := get(t, s.Handler(), "/api/v1/pods")
	require.Equal(t, http.StatusOK, code)
	var raw map[string][]map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	web := raw["pods"][0]
	for _, k := range []string{"namespace", "name", "uid", "sandboxId", "ip", "ready", "containers"} {
		assert.Contains(t, web, k)
	}
	app := web["containers"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "id", "attempt", "state", "startedAt", "ready", "started", "restartCount", "probes"} {
		assert.Contains(t, app, k)
	}
	assert.Equal(t, "2026-11-21T09:01:00Z", app["startedAt"], "RFC 3339")
	assert.Equal(t, 2.0, app["restartCount"])
	live := app["probes"].(map[string]any)["liveness"].(map[string]any)
	assert.Equal(t, "success", live["result"])
	assert.Equal(t, "2026-11-21T09:02:00Z", live["lastProbeTime"])
	assert.Equal(t, "ok", live["output"])
	assert.Equal(t, 4.0, live["consecutive"])
	ready := app["probes"].(map[string]any)["readiness"].(map[string]any)
	assert.Equal(t, "unknown", ready["result"], "not run yet")
	assert.Nil(t, ready["lastProbeTime"])

	worker := web["containers"].([]any)[1].(map[string]any)
	assert.Equal(t, "CrashLoopBackOff", worker["state"])
	assert.Equal(t, "2026-11-21T10:00:00Z", worker["waitingUntil"])

	// kubelet's status, kubectl-shaped, beside the older fields.
	assert.Equal(t, "2026-11-21T09:00:00Z", web["startTime"])
	conditions := web["conditions"].([]any)
	require.Len(t, conditions, 5)
	assert.Equal(t, map[string]any{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
		"message": "containers with unready status: [app worker]", "lastTransitionTime": "2026-11-21T09:00:00Z"}, conditions[2])
	assert.Equal(t, map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-21T09:00:00Z"}, conditions[4])
	assert.JSONEq(t, `{"state":{"running":{"startedAt":"2026-11-21T09:01:00Z"}},
		"lastState":{"terminated":{"exitCode":137,"reason":"Error","startedAt":"2026-11-21T09:00:00Z","finishedAt":"2026-11-21T09:00:50Z","containerID":"c0"}}}`,
		mustJSON(t, app["status"]))
	assert.JSONEq(t, `{"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s restarting failed container=worker pod=web_shop(uid-web)"}},
		"lastState":{"terminated":{"exitCode":1,"reason":"Error","message":"cannot open /data: permission denied\nbye",
		"startedAt":"2026-11-21T09:03:00Z","finishedAt":"2026-11-21T09:04:00Z","containerID":"c2"}}}`, mustJSON(t, worker["status"]))
	assert.Equal(t, 3.0, worker["restartCount"], "kubelet's restart count")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// What kubelet's status does not know is null or left out, never a zero
// time: a pod not started, a condition with no known transition.
func TestPodJSONOmitsWhatIsUnknown(t *testing.T) {
	p := PodFromReport(pods.PodReport{Namespace: "ns", Name: "p", Conditions: []pods.Condition{{Type: "PodReadyToStartContainers", Status: "False"}},
		Containers: []pods.ContainerReport{{Name: "app", Status: pods.ContainerStatus{State: pods.ContainerState{Waiting: &pods.StateWaiting{Reason: "ContainerCreating"}}}}}})
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.NotContains(t, raw, "startTime")
	assert.NotContains(t, raw, "reason")
	assert.Equal(t, map[string]any{"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": nil}, raw["conditions"].([]any)[0])
	assert.JSONEq(t, `{"state":{"waiting":{"reason":"ContainerCreating"}},"lastState":{}}`, mustJSON(t, raw["containers"].([]any)[0].(map[string]any)["status"]))
}

func TestReadyEndpoint(t *testing.T) {
	s, _ := newServer(healthy)
	code, body := get(t, s.Handler(), "/api/v1/pods/shop/web/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"namespace":"shop","name":"web","ready":false,"containers":{"app":false,"worker":false}}`, body)
	code, _ = get(t, s.Handler(), "/api/v1/pods/shop/db/ready")
	assert.Equal(t, http.StatusOK, code)
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/nope/ready")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "pod not found")
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/db")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"name": "db"`)
}

// /livez is the agent's own liveness, not the runtime's: ok while
// /healthz is 503 for a runtime that is down.
func TestLivez(t *testing.T) {
	s, _ := newServer(func() error { return errors.New("runtime unreachable") })
	code, body := get(t, s.Handler(), "/livez")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	s = New(Config{Pods: s.pods, Health: s.health, Live: func() error { return errors.New("no relist has finished for 2m0s") }})
	code, body = get(t, s.Handler(), "/livez")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no relist has finished")
}

func TestHealthz(t *testing.T) {
	s, _ := newServer(healthy)
	code, body := get(t, s.Handler(), "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	s, _ = newServer(func() error { return errors.New("runtime unreachable since 09:00: connection refused") })
	code, body = get(t, s.Handler(), "/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "runtime unreachable")

	// The pods are still served, as last seen, with the reason beside them.
	code, body = get(t, s.Handler(), "/api/v1/pods")
	assert.Equal(t, http.StatusOK, code)
	var list PodList
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	assert.Equal(t, "runtime unreachable since 09:00: connection refused", list.RuntimeError)
	assert.NotEmpty(t, list.Pods)
}

func TestEvents(t *testing.T) {
	s, ring := newServer(healthy)
	ring.Record(events.Event{Time: t0, Type: events.Warning, Reason: "Unhealthy", Namespace: "shop", Pod: "web", Container: "app", Message: "Liveness probe failed: boom"})
	ring.Record(events.Event{Time: t0.Add(time.Minute), Type: events.Normal, Reason: "Killing", Namespace: "shop", Pod: "web", Container: "app", Message: "Container app failed liveness probe, will be restarted"})

	code, body := get(t, s.Handler(), "/api/v1/events")
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Events, 2)
	for _, k := range []string{"time", "type", "reason", "namespace", "pod", "container", "message"} {
		assert.Contains(t, list.Events[0], k)
	}
	_, body = get(t, s.Handler(), "/api/v1/events?since=2026-11-21T09:00:30Z")
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Events, 1)
	assert.Equal(t, "Killing", list.Events[0]["reason"])

	code, body = get(t, s.Handler(), "/api/v1/events?since=yesterday")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "RFC 3339")
	_, body = get(t, New(Config{Events: events.NewRing(1)}).Handler(), "/api/v1/events")
	assert.JSONEq(t, `{"events":[]}`, body)
}

func TestEventsWatchStreams(t *testing.T) {
	s, ring := newServer(healthy)
	ring.Record(events.Event{Time: t0, Reason: "Old", Message: "before the watch"})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/events?watch=1&since=2026-11-21T09:00:00Z", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	lines := bufio.NewReader(resp.Body)
	readEvent := func() events.Event {
		t.Helper()
		for {
			line, err := lines.ReadString('\n')
			require.NoError(t, err)
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e events.Event
				require.NoError(t, json.Unmarshal([]byte(data), &e))
				return e
			}
		}
	}
	assert.Equal(t, "Old", readEvent().Reason, "the backlog since `since` first")
	ring.Record(events.Event{Time: t0.Add(time.Second), Reason: "New", Message: "live"})
	assert.Equal(t, "New", readEvent().Reason)
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// The API only reads: nothing in it runs a command, changes a probe or
// restarts a container (the readiness gates' PUT and DELETE, with a
// Gater, are the only writes: gates_test.go).
func TestAPIIsReadOnly(t *testing.T) {
	s, _ := newServer(healthy)
	for _, path := range []string{"/healthz", "/api/v1/pods", "/api/v1/pods/shop/web", "/api/v1/pods/shop/web/ready", "/api/v1/pods/shop/web/history", "/api/v1/pods/shop/web/restarts", "/api/v1/events"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
			assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "%s %s", method, path)
		}
	}
}

func TestHistoryEndpoint(t *testing.T) {
	s, _ := newServer(healthy)
	code, body := get(t, s.Handler(), "/api/v1/pods/shop/web/history")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"namespace":"shop","name":"web","probes":[{"container":"app","type":"liveness",
		"recent":[{"time":"2026-11-21T09:01:00Z","durationMs":0,"result":"success","consecutive":1,"threshold":1,"containerId":"c1"}],
		"failures":[{"time":"2026-11-21T09:00:00Z","durationMs":1.5,"result":"failure","output":"HTTP probe failed with statuscode: 500",
			"consecutive":3,"threshold":3,"changed":true,"containerId":"c0"}]}]}`, body)
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/db/history")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"namespace":"shop","name":"db","probes":[]}`, body)
	code, _ = get(t, s.Handler(), "/api/v1/pods/shop/nope/history")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestRestartsEndpoint(t *testing.T) {
	s, _ := newServer(healthy)
	code, body := get(t, s.Handler(), "/api/v1/pods/shop/web/restarts")
	require.Equal(t, http.StatusOK, code)
	var r Restarts
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.Len(t, r.Restarts, 1)
	assert.Equal(t, restart.CauseLiveness, r.Restarts[0].Cause)
	assert.True(t, strings.HasPrefix(r.Restarts[0].Failures[0].Output, strings.Repeat("x", bounded.Message)+"… ("), "output shown, not trusted")
	assert.Less(t, len(r.Restarts[0].Failures[0].Output), bounded.Message+64)
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/gone/restarts")
	assert.Equal(t, http.StatusOK, code, "a pod that is gone may still have restarts to explain")
	assert.JSONEq(t, `{"namespace":"shop","name":"gone","restarts":[]}`, body)
}

// Go's profiles are served only when asked for (--profiling), only to
// GET, only to a client the agent can name, as changes are (a unix
// socket's peer, or a user the web configuration checked: a loopback port
// is any local user's and any web page's, and TLS alone names no one),
// and never the command line (it may hold a --webhook token).
func TestProfilingIsOptIn(t *testing.T) {
	off, _ := newServer(healthy)
	code, _ := get(t, off.Handler(), "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "off by default")

	on := New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Profiling: true})
	code, _ = get(t, on.Handler(), "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "not where clients are not vetted")
	tlsOnly := filepath.Join(t.TempDir(), "tls.yml")
	require.NoError(t, os.WriteFile(tlsOnly, []byte("tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\n"), 0o600))
	code, _ = get(t, on.routes(tlsOnly), "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "TLS alone names no client")
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(webConfig, fmt.Appendf(nil, "basic_auth_users:\n  alice: %s\n", daveHash), 0o600))
	vetted := on.routes(webConfig)
	code, _ = get(t, vetted, "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "a web configuration, but no user named")
	asAlice := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		req.SetBasicAuth("alice", "secret")
		rec := httptest.NewRecorder()
		vetted.ServeHTTP(rec, req)
		return rec
	}
	rec := asAlice(http.MethodGet, "/debug/pprof/")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "goroutine")
	rec = asAlice(http.MethodGet, "/debug/pprof/cmdline")
	assert.Equal(t, http.StatusNotFound, rec.Code, "never the command line")
	rec = asAlice(http.MethodPost, "/debug/pprof/symbol")
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
