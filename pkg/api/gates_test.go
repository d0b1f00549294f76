package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// fakeGater sets gates of shop/web (which declares example.com/lb) and
// shop/db (which declares none); any other pod is not found.
type fakeGater struct {
	mu    sync.Mutex
	calls []string // method namespace/name type status by
	gates []pods.Gate
}

func (f *fakeGater) change(namespace, name string, t corev1.PodConditionType, status corev1.ConditionStatus, by string) (pods.GateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%s %s=%s by %s", namespace, name, t, status, by))
	if namespace != "shop" || (name != "web" && name != "db") {
		return pods.GateResult{}, fmt.Errorf("%w: no pod %s/%s on this node", pods.ErrPodNotFound, namespace, name)
	}
	if err := pods.ValidateGateType(t); err != nil {
		return pods.GateResult{}, err
	}
	g := pods.Gate{PodKey: "uid-" + name, Namespace: namespace, Pod: name, Type: t, Status: status, By: by}
	return pods.GateResult{GateChange: pods.GateChange{Gate: g, Changed: true, Previous: corev1.ConditionFalse},
		Declared: name == "web" && t == "example.com/lb",
		Pod:      pods.PodReport{Namespace: namespace, Name: name, Ready: status == corev1.ConditionTrue}, Persistent: true}, nil
}

func (f *fakeGater) SetGate(_ context.Context, namespace, name string, t corev1.PodConditionType, status corev1.ConditionStatus, by string) (pods.GateResult, error) {
	return f.change(namespace, name, t, status, by)
}

func (f *fakeGater) UnsetGate(_ context.Context, namespace, name string, t corev1.PodConditionType, by string) (pods.GateResult, error) {
	return f.change(namespace, name, t, "", by)
}

func (f *fakeGater) ListGates() ([]pods.Gate, bool) {
	return []pods.Gate{{PodKey: "uid-web", Namespace: "shop", Pod: "web", Type: "example.com/lb", Status: corev1.ConditionTrue, LastTransitionTime: t0, By: "uid 0"}}, true
}

func (f *fakeGater) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// send sends method url with body (JSON) through client.
func send(t *testing.T, client *http.Client, method, url, body string, auth ...string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func unixClient(t *testing.T, path string) *http.Client {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	t.Cleanup(client.CloseIdleConnections)
	return client
}

// Changing a gate changes what a load balancer sees: it is served only
// to clients the agent can name, and the name goes with the change (its
// audit). A loopback port without a web configuration is any local user's
// and any web page's: refused, saying what to do. (Ports of this
// engineer's range, 9660-9679.)
func TestGateChangesNeedANamedClient(t *testing.T) {
	gater := &fakeGater{}
	tcp := serve(t, mustListen(t, "127.0.0.1:9660"), Config{Gates: gater}, ServeConfig{})
	code, body := send(t, http.DefaultClient, http.MethodPut, "http://"+tcp.addr+"/api/v1/pods/shop/web/gates/example.com/lb", `{"status":"True"}`)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "allowed only to clients the agent can name: on a unix socket")
	code, _ = send(t, http.DefaultClient, http.MethodDelete, "http://"+tcp.addr+"/api/v1/pods/shop/web/gates/example.com/lb", "")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Empty(t, gater.called(), "nothing changed")
	code, body = send(t, http.DefaultClient, http.MethodGet, "http://"+tcp.addr+"/api/v1/gates", "")
	assert.Equal(t, http.StatusOK, code, "reading them is reading the state")
	assert.JSONEq(t, `{"persistent":true,"gates":[{"namespace":"shop","name":"web","uid":"uid-web","conditionType":"example.com/lb","status":"True",
		"lastTransitionTime":"2026-11-21T09:00:00Z","by":"uid 0"}]}`, body)

	path := filepath.Join(t.TempDir(), "api.sock")
	serve(t, mustListen(t, "unix://"+path), Config{Gates: gater}, ServeConfig{})
	code, body = send(t, unixClient(t, path), http.MethodPut, "http://agent/api/v1/pods/shop/web/gates/example.com/lb", `{"status":"True"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{fmt.Sprintf("shop/web example.com/lb=True by uid %d (pid %d) on the unix socket", os.Getuid(), os.Getpid())}, gater.called(),
		"the peer's uid and pid (SO_PEERCRED)")

	dir := t.TempDir()
	config := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "basic_auth_users:\n  dave: %s\n", daveHash), 0o600))
	auth := serve(t, mustListen(t, "127.0.0.1:9661"), Config{Gates: gater}, ServeConfig{WebConfigFile: config})
	url := "http://" + auth.addr + "/api/v1/pods/shop/web/gates/example.com/lb"
	code, _ = send(t, http.DefaultClient, http.MethodPut, url, `{"status":"False"}`)
	assert.Equal(t, http.StatusUnauthorized, code, "the web configuration's basic auth first")
	code, body = send(t, http.DefaultClient, http.MethodPut, url, `{"status":"False"}`, "dave", "dave123")
	require.Equal(t, http.StatusOK, code, body)
	calls := gater.called()
	assert.Regexp(t, `^shop/web example.com/lb=False by user "dave" from 127\.0\.0\.1:\d+$`, calls[len(calls)-1])
}

// A web configuration without users checks no password: a basic auth
// header there names no one, and is refused.
func TestGateBasicAuthCountsOnlyWhenChecked(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(config, []byte("http_server_config:\n  http2: false\n"), 0o600))
	gater := &fakeGater{}
	s := serve(t, mustListen(t, "127.0.0.1:9662"), Config{Gates: gater}, ServeConfig{WebConfigFile: config})
	code, body := send(t, http.DefaultClient, http.MethodPut, "http://"+s.addr+"/api/v1/pods/shop/web/gates/example.com/lb", `{"status":"True"}`, "anyone", "x")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Empty(t, gater.called())
}

// What the gate endpoints answer, over the unix socket.
func TestGateEndpoints(t *testing.T) {
	gater := &fakeGater{}
	path := filepath.Join(t.TempDir(), "api.sock")
	serve(t, mustListen(t, "unix://"+path), Config{Gates: gater}, ServeConfig{})
	client := unixClient(t, path)
	tests := []struct {
		name, method, path, body string
		code                     int
		want                     string // in the body
	}{
		{name: "set a declared gate", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/example.com/lb", body: `{"status":"True"}`, code: http.StatusOK,
			want: `"conditionType": "example.com/lb",
  "status": "True",
  "previous": "False",
  "changed": true,
  "declared": true,
  "ready": true,
  "persistent": true`},
		{name: "a status in another letter case", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/example.com/lb", body: `{"status":"false"}`, code: http.StatusOK,
			want: `"status": "False"`},
		{name: "a condition the pod has no gate of: kept, with a warning", method: http.MethodPut, path: "/api/v1/pods/shop/db/gates/example.com/lb", body: `{"status":"True"}`,
			code: http.StatusOK, want: `"warning": "pod shop/db has no readiness gate \"example.com/lb\": the condition is kept and shown, and does not change the pod's readiness (as under kubelet)"`},
		{name: "unset", method: http.MethodDelete, path: "/api/v1/pods/shop/web/gates/example.com/lb", code: http.StatusOK, want: `"status": "",`},
		{name: "an unknown pod", method: http.MethodPut, path: "/api/v1/pods/shop/nope/gates/example.com/lb", body: `{"status":"True"}`, code: http.StatusNotFound,
			want: `no pod shop/nope on this node`},
		{name: "kubelet's own condition", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/Ready", body: `{"status":"True"}`, code: http.StatusBadRequest,
			want: `is kubelet's own`},
		{name: "Unknown is not a gate's status", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/example.com/lb", body: `{"status":"Unknown"}`,
			code: http.StatusBadRequest, want: `status \"Unknown\": want True or False`},
		{name: "no body", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/example.com/lb", code: http.StatusBadRequest, want: `want a JSON body {\"status\":\"True\"}`},
		{name: "an unknown field", method: http.MethodPut, path: "/api/v1/pods/shop/web/gates/example.com/lb", body: `{"status":"True","reason":"x"}`,
			code: http.StatusBadRequest, want: `unknown field`},
		{name: "POST is not a method of it", method: http.MethodPost, path: "/api/v1/pods/shop/web/gates/example.com/lb", body: `{"status":"True"}`,
			code: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := send(t, client, tt.method, "http://agent"+tt.path, tt.body)
			assert.Equal(t, tt.code, code, body)
			assert.Contains(t, body, tt.want)
		})
	}
}

// /ready says each readiness gate's condition, beside the containers.
func TestReadyEndpointShowsGates(t *testing.T) {
	r := testPods()[1]
	r.ReadinessGates = []corev1.PodConditionType{"example.com/lb", "example.com/warm"}
	r.Conditions = append([]pods.Condition{condition("example.com/lb", corev1.ConditionTrue, "", "")}, r.Conditions...)
	r.Ready = false
	s := New(Config{Pods: fakePods{r}, Events: events.NewRing(1), Health: healthy})
	code, body := get(t, s.Handler(), "/api/v1/pods/shop/db/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"namespace":"shop","name":"db","ready":false,"containers":{"db":true},"readinessGates":{"example.com/lb":true,"example.com/warm":false}}`, body)
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/db")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"readinessGates": [
    "example.com/lb",
    "example.com/warm"
  ],`)
	assert.Equal(t, "1/2", PodFromReport(r).ReadinessGatesText(), "kubectl's READINESS GATES")
	assert.Equal(t, "<none>", PodFromReport(testPods()[0]).ReadinessGatesText())
}

// The status page says how many of a pod's readiness gates are met, and
// lists their conditions with the others.
func TestStatusPageShowsGates(t *testing.T) {
	r := testPods()[1]
	r.ReadinessGates = []corev1.PodConditionType{"example.com/lb", "example.com/warm"}
	r.Conditions = append([]pods.Condition{condition("example.com/lb", corev1.ConditionTrue, "", "")}, r.Conditions...)
	s := New(Config{Pods: fakePods{r, testPods()[0]}, Events: events.NewRing(1), Health: healthy})
	resp, body := getPage(t, s.Handler(), "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	db := from(t, body, "pod-shop/db")
	assert.Contains(t, db[:strings.Index(db, "</article>")], " · readiness gates 1/2 · restarts")
	assert.Contains(t, db, `<p class="conditions"><span class="cond ok" title="since 2026-11-21T09:00:00Z">example.com/lb True</span> · `)
	web := from(t, body, "pod-shop/web")
	assert.NotContains(t, web[:strings.Index(web, "</article>")], "readiness gates", "a pod without gates")
}
