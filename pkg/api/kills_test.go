package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

// fakeKills records who paused and resumed.
type fakeKills struct {
	status killbudget.Status
	calls  []string
}

func (f *fakeKills) Kills() killbudget.Status { return f.status }

func (f *fakeKills) PauseKills(_ context.Context, by, reason string) (killbudget.Status, error) {
	f.calls = append(f.calls, "pause by "+by+": "+reason)
	f.status.Paused = &killbudget.Pause{By: by, Reason: reason, Since: t0}
	return f.status, nil
}

func (f *fakeKills) ResumeKills(_ context.Context, by string) (killbudget.Status, error) {
	f.calls = append(f.calls, "resume by "+by)
	f.status.Paused = nil
	return f.status, nil
}

func post(h http.Handler, path, contentType, body string, user string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.SetBasicAuth(user, "secret")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Pause and resume change what the agent does: served only where every
// client is vetted (a unix socket, a web configuration), only to a JSON
// POST (no web page can send one across origins), audited with who asked.
func TestPauseAndResumeKills(t *testing.T) {
	kills := &fakeKills{status: killbudget.Status{NodeBudget: 3, Interval: "20s", Deferred: []killbudget.DeferredKill{}}}
	s := New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Kills: kills})

	code, body := get(t, s.Handler(), "/api/v1/kills")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"nodeBudget":3,"interval":"20s","killsInWindow":0,"deferred":[]}`, body)

	rec := post(s.Handler(), "/api/v1/kills/pause", "application/json", `{}`, "")
	assert.Equal(t, http.StatusForbidden, rec.Code, "a loopback port is any local user's")
	assert.Contains(t, rec.Body.String(), "unix socket")
	assert.Empty(t, kills.calls)

	// Behind a web configuration that checks basic auth: its users are
	// named clients (mutating).
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(webConfig, fmt.Appendf(nil, "basic_auth_users:\n  alice: %s\n", daveHash), 0o600))
	vetted := s.routes(webConfig)
	rec = post(vetted, "/api/v1/kills/pause", "application/json", `{}`, "")
	assert.Equal(t, http.StatusForbidden, rec.Code, "no user named")
	rec = post(vetted, "/api/v1/kills/pause", "", `{}`, "alice")
	assert.Equal(t, http.StatusUnsupportedMediaType, rec.Code, "a form a web page posts")
	rec = post(vetted, "/api/v1/kills/pause", "text/plain", `{}`, "alice")
	assert.Equal(t, http.StatusUnsupportedMediaType, rec.Code)
	rec = post(vetted, "/api/v1/kills/pause", "application/json", `{"reason": 1}`, "alice")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	rec = post(vetted, "/api/v1/kills/pause", "application/json", `{"reason":"`+strings.Repeat("x", MaxPauseReason+1)+`"}`, "alice")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Empty(t, kills.calls)

	rec = post(vetted, "/api/v1/kills/pause", "application/json", `{"reason":"db maintenance"}`, "alice")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), `"by": "user \"alice\" from 192.0.2.1:1234"`)
	rec = post(vetted, "/api/v1/kills/resume", "application/json; charset=utf-8", ``, "alice")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, []string{`pause by user "alice" from 192.0.2.1:1234: db maintenance`, `resume by user "alice" from 192.0.2.1:1234`}, kills.calls)

	rec = httptest.NewRecorder()
	vetted.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/kills/pause", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// The status page says that kills are paused, the budget, and which
// kills wait and why.
func TestStatusPageShowsKillsThatWait(t *testing.T) {
	now := t0.Add(time.Minute)
	kills := &fakeKills{status: killbudget.Status{NodeBudget: 3, Interval: "20s", KillsInWindow: 3,
		Paused: &killbudget.Pause{By: "uid 0 (unix socket)", Reason: "upgrade", Since: t0},
		Deferred: []killbudget.DeferredKill{
			{Namespace: "shop", Pod: "web", Container: "app", Probe: "Liveness", Reason: killbudget.DeferNode, Since: t0, Until: now.Add(12 * time.Second)},
			{Namespace: "shop", Pod: "db", Container: "pg", Probe: "Startup", Reason: killbudget.DeferPaused, Since: t0},
		}}}
	v := killsViewOf(kills.status, "", now)
	require.NotNil(t, v)
	assert.Equal(t, "by uid 0 (unix socket), 1m0s ago (upgrade)", v.Paused)
	assert.Equal(t, "3 kills per 20s on the node (3 in the window)", v.Budget)
	assert.Equal(t, []deferredView{
		{Object: "shop/web app", Probe: "Liveness", Why: "node restart budget spent, frees in 12s"},
		{Object: "shop/db pg", Probe: "Startup", Why: "kills paused (waiting 1m0s)"},
	}, v.Deferred)
	assert.Nil(t, killsViewOf(killbudget.Status{}, "", now), "no budget, not paused: nothing shown")

	s := New(Config{Pods: testPods(), Events: events.NewRing(1), Health: healthy, Kills: kills})
	code, body := get(t, s.Handler(), "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "Probe-triggered kills are paused on this node")
	assert.Contains(t, body, "shop/web app")
}
