package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// pageServer is the test server of api_test.go, its clock five minutes
// after t0, with a Warning and a Normal event.
func pageServer(t *testing.T) *Server {
	t.Helper()
	s, ring := newServer(healthy)
	s.clock = testingclock.NewFakePassiveClock(t0.Add(5 * time.Minute))
	ring.Record(events.Event{Time: t0.Add(time.Second), Type: events.Warning, Reason: "Unhealthy", Namespace: "shop", Pod: "web", Container: "app",
		Message: "Liveness probe failed: HTTP probe failed with statuscode: 500", Count: 1, Threshold: 3})
	ring.Record(events.Event{Time: t0.Add(2 * time.Second), Type: events.Normal, Reason: "Killing", Namespace: "shop", Pod: "web", Container: "app",
		Message: "Container app failed liveness probe, will be restarted"})
	return s
}

// getPage GETs path and returns the response, its body read.
func getPage(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// from returns the text of body from the element with id on, to the
// end of the page, failing the test if there is none.
func from(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	require.GreaterOrEqual(t, i, 0, "no element with id %q", id)
	return body[i:]
}

func TestStatusPageShowsTheState(t *testing.T) {
	resp, body := getPage(t, pageServer(t).Handler(), "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	for _, tt := range []struct{ what, want string }{
		{"the summary", "<strong>2</strong> pods, <strong>1</strong> ready · <strong>3</strong> containers · <strong>5</strong> restarts"},
		{"a pod, its readiness, status, restarts and age", `<h3><span class="ns">shop/</span>web</h3>`},
		{"Ready x/y, kubectl's STATUS and RESTARTS", `<span class="badge bad">Ready 0/2</span> CrashLoopBackOff · phase Running · restarts 5 (1m0s ago) · age <time datetime="2026-11-21T09:00:00Z">5m0s</time> · 10.0.0.5 · specs from pods.yaml:1`},
		{"its conditions, with why not", `<p class="conditions"><span class="cond ok" title="since 2026-11-21T09:00:00Z">PodReadyToStartContainers True</span> · ` +
			`<span class="cond ok" title="since 2026-11-21T09:00:00Z">Initialized True</span> · ` +
			`<span class="cond bad" title="since 2026-11-21T09:00:00Z">Ready False (ContainersNotReady: containers with unready status: [app worker])</span> · ` +
			`<span class="cond bad" title="since 2026-11-21T09:00:00Z">ContainersReady False (ContainersNotReady: containers with unready status: [app worker])</span> · ` +
			`<span class="cond ok" title="since 2026-11-21T09:00:00Z">PodScheduled True</span></p>`},
		{"a container's last termination", `<tr class="more"><td></td><td colspan="4"><div>last state: Error (exit code 137), finished 09:00:50</div></td></tr>`},
		{"why it waits, and its last termination with the termination message's first line",
			`<tr class="more"><td></td><td colspan="4"><div class="msg" title="back-off 40s restarting failed container=worker pod=web_shop(uid-web)">back-off 40s restarting failed container=worker pod=web_shop(uid-web)</div>` +
				`<div>last state: Error (exit code 1), finished 09:04:00: <span class="msg" title="cannot open /data: permission denied bye">cannot open /data: permission denied</span></div></td></tr>`},
		{"a ready pod", `<span class="badge ok">Ready 1/1</span>`},
		{"a container: state, ready, restarts", `<td class="cname">app</td>
<td>Running</td>
<td class="bad">not ready</td>
<td class="num">2</td>`},
		{"a container waiting in back-off", "<td>CrashLoopBackOff, back-off until 10:00:00</td>"},
		{"a probe's last result", `<span class="verdict success">success</span> <span class="when">3m0s ago</span>`},
		{"a probe not run yet", `<span class="ptype">readiness</span>`},
		{"its recent runs as a chart", `aria-label="liveness: last 1 runs, 1 succeeded, 0 failed"`},
		{"a run as a bar, as tall as it took", `<rect class="run success" x="114" y="21" width="5" height="3"><title>09:01:00 success in 0.00 ms</title></rect>`},
		{"a restart and why", `<a href="#pod-shop%2fweb">shop/web/app</a></td><td><span class="cause">liveness</span> its liveness probe failed 1 time(s) in a row (failureThreshold 1): ` +
			strings.Repeat("x", 200)},
		{"what came of it", "<td>restarted as attempt 1 after 0s of back-off</td>"},
		{"a Warning event, marked", `class="warning"><td class="nowrap"><time datetime="2026-11-21T09:00:01Z">09:00:01</time></td><td class="nowrap">⚠ Warning</td><td>Unhealthy</td><td>shop/web/app</td><td>1/3</td>`},
		{"a Normal event", `<td class="nowrap">Normal</td><td>Killing</td>`},
		{"where live updates start from", `data-since="2026-11-21T09:05:00Z"`},
	} {
		assert.Contains(t, body, tt.want, tt.what)
	}
	events := from(t, body, "events-body")
	assert.Less(t, strings.Index(events, "Killing"), strings.Index(events, "Unhealthy"), "newest event first")
	assert.Contains(t, body, `<p id="no-events" class="none" hidden>`, "events: no placeholder")
	assert.Contains(t, body, `<script src="ui/status.js" defer></script>`)
}

// The restart's output is a workload's: the page shows a line of it, not
// the whole.
func TestStatusPageBoundsWhatWorkloadsPrint(t *testing.T) {
	_, body := getPage(t, pageServer(t).Handler(), "/")
	restarts := from(t, body, "restarts")
	assert.Contains(t, restarts, strings.Repeat("x", 200)+"… (")
	assert.NotContains(t, restarts, strings.Repeat("x", 201))
}

// Everything a workload controls is text on the page, never markup: probe
// output, the error, names, event messages, restart failures.
func TestStatusPageEscapesHostileText(t *testing.T) {
	const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&` + "\x1b[2J\u202e"
	for _, tt := range []struct {
		name string
		pods fakePods
		ev   events.Event
		want []string // as the page shows it
	}{
		{name: "probe output", pods: fakePods{{Key: "k", Namespace: "ns", Name: "p", Containers: []pods.ContainerReport{{Name: "c", ID: "c1", State: cri.StateRunning,
			Probes: []pods.ProbeReport{{Type: results.Readiness, Last: &results.Observation{Time: t0, Outcome: results.OutcomeFailure, Output: hostile + "\nsecond line"}}}}}}},
			want: []string{`&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&#34;&#39;&amp;\x1b[2J\u202e`}},
		{name: "probe error", pods: fakePods{{Key: "k", Namespace: "ns", Name: "p", Containers: []pods.ContainerReport{{Name: "c", ID: "c1", State: cri.StateRunning,
			Probes: []pods.ProbeReport{{Type: results.Liveness, Last: &results.Observation{Time: t0, Outcome: results.OutcomeUnknown, Err: hostile}}}}}}},
			want: []string{`&lt;script&gt;alert(1)`}},
		{name: "names", pods: fakePods{{Key: "k", Namespace: hostile, Name: hostile, Containers: []pods.ContainerReport{{Name: hostile, State: cri.StateRunning}}}},
			want: []string{`<h3><span class="ns">&lt;script&gt;alert(1)`, `<td class="cname">&lt;script&gt;`}},
		{name: "event message", ev: events.Event{Time: t0, Type: events.Warning, Reason: "Unhealthy", Namespace: "ns", Pod: "p", Message: hostile},
			want: []string{`<td class="message">&lt;script&gt;alert(1)&lt;/script&gt;`}},
		{name: "pod source and problems", pods: fakePods{{Key: "k", Namespace: "ns", Name: "p", Source: hostile, Problems: []string{hostile}}},
			want: []string{`specs from &lt;script&gt;`, `<p class="problem">&lt;script&gt;`}},
		{name: "termination and waiting messages", pods: fakePods{{Key: "k", Namespace: "ns", Name: "p", Reason: "DeadlineExceeded", Message: hostile,
			Conditions: []pods.Condition{{Type: "Ready", Status: "False", Reason: "ContainersNotReady", Message: hostile}},
			Containers: []pods.ContainerReport{
				{Name: "c", Status: pods.ContainerStatus{State: pods.ContainerState{Waiting: &pods.StateWaiting{Reason: "CrashLoopBackOff", Message: hostile}},
					LastState: pods.ContainerState{Terminated: &pods.StateTerminated{ExitCode: 1, Reason: "Error", Message: hostile + "\nsecond line"}}}},
				{Name: "d", Status: pods.ContainerStatus{State: pods.ContainerState{Terminated: &pods.StateTerminated{ExitCode: 1, Reason: "Error", Message: hostile}}}},
			}}},
			want: []string{`<p class="problem">DeadlineExceeded: &lt;script&gt;`, `Ready False (ContainersNotReady: &lt;script&gt;alert(1)`,
				`<div class="msg" title="&lt;script&gt;alert(1)`, `: <span class="msg" title="&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&#34;&#39;&amp;\x1b[2J\u202e second line">&lt;script&gt;`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ring := events.NewRing(10)
			if tt.ev.Reason != "" {
				ring.Record(tt.ev)
			}
			s := New(Config{Pods: tt.pods, History: hostileHistory{}, Ledger: fakeLedger{}, Events: ring, Health: healthy})
			_, body := getPage(t, s.Handler(), "/")
			for _, want := range tt.want {
				assert.Contains(t, body, want)
			}
			assert.NotContains(t, body, "<script>alert")
			assert.NotContains(t, body, "<img")
			assert.NotContains(t, body, "onerror=alert(2)>", "no tag is closed by what a workload printed")
			assert.NotContains(t, body, "\x1b", "control characters shown as \\xNN")
			assert.NotContains(t, body, "\u202e", "nor any that reorders text")
			checkMarkup(t, body)
		})
	}
}

// tag is a tag as the template writes them: a name, and attributes each
// with a quoted value or none.
var tag = regexp.MustCompile(`^<(/?)([a-z][a-z0-9]*)((?:\s+[a-zA-Z-]+(?:="[^"<>]*")?)*)\s*>`)

var attrName = regexp.MustCompile(`\s([a-zA-Z-]+)`)

// tagsOf returns the tags (name, then name and attribute names) in html.
func tagsOf(html string) (map[string]bool, error) {
	tags := map[string]bool{}
	for i := strings.IndexByte(html, '<'); i >= 0; i = next(html, i) {
		if strings.HasPrefix(html[i:], "<!DOCTYPE html>") || strings.HasPrefix(html[i:], "{{") {
			continue
		}
		m := tag.FindStringSubmatch(html[i:])
		if m == nil {
			return nil, fmt.Errorf("markup that is not a tag at %d: %.80q", i, html[i:])
		}
		tags[m[2]] = true
		for _, a := range attrName.FindAllStringSubmatch(strings.Join(regexp.MustCompile(`="[^"]*"`).Split(m[3], -1), " "), -1) {
			tags[m[2]+" "+a[1]] = true
		}
	}
	return tags, nil
}

func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '<')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// checkMarkup fails t unless every tag in body, and each of its
// attributes, is one the page's template writes (markupProblems).
func checkMarkup(t *testing.T, body string) {
	t.Helper()
	for _, p := range markupProblems(t, body) {
		t.Error(p)
	}
}

// markupProblems lists what in body the template does not write: text that
// escaped html/template would show as a tag it has not (<img>), a tag that
// is not well formed, an attribute it never writes (onerror=), or a second
// script.
func markupProblems(t *testing.T, body string) []string {
	t.Helper()
	// The template's own tags, its actions ({{…}}) left out.
	own, err := tagsOf(regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(pageSource, ""))
	require.NoError(t, err)
	got, err := tagsOf(body)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for k := range got {
		if !own[k] {
			problems = append(problems, fmt.Sprintf("the page has %q, which its template does not write", k))
		}
	}
	if n := strings.Count(body, "<script"); n != 1 {
		problems = append(problems, fmt.Sprintf("%d scripts on the page", n))
	}
	return problems
}

// markupProblems sees what an escape that failed would leave.
func TestMarkupProblemsSeesInjections(t *testing.T) {
	_, body := getPage(t, pageServer(t).Handler(), "/")
	require.Empty(t, markupProblems(t, body))
	for name, injected := range map[string]string{
		"a tag":               strings.Replace(body, "<td>Killing</td>", "<td><img src=x>Killing</td>", 1),
		"out of an attribute": strings.Replace(body, `data-part="summary"`, `data-part="" onmouseover="alert(1)"`, 1),
		"a broken attribute":  strings.Replace(body, `data-part="summary"`, `data-part="a"b"`, 1),
		"a script":            strings.Replace(body, "<td>Killing</td>", "<td><script>alert(1)</script></td>", 1),
	} {
		assert.NotEmpty(t, markupProblems(t, injected), name)
	}
}

// hostileHistory's runs printed markup.
type hostileHistory struct{}

func (hostileHistory) For(string) []results.ProbeHistory {
	run := results.Observation{Time: t0, Duration: time.Millisecond, Outcome: results.OutcomeFailure, Output: "<script>alert(3)</script>"}
	return []results.ProbeHistory{{Container: "c", Type: results.Readiness, Recent: []results.Observation{run}}}
}

// The page and its files carry a strict Content-Security-Policy: no inline
// script or style, nothing from elsewhere, no framing, Trusted Types.
func TestStatusPageSecurityHeaders(t *testing.T) {
	h := pageServer(t).Handler()
	for _, path := range []string{"/", "/ui/status.js", "/ui/status.css", "/ui/favicon.svg"} {
		t.Run(path, func(t *testing.T) {
			resp, _ := getPage(t, h, path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'",
				"base-uri 'none'", "require-trusted-types-for 'script'"} {
				assert.Contains(t, csp, want)
			}
			assert.NotContains(t, csp, "unsafe")
			assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
		})
	}
}

// What the CSP forbids, the page does not need: every script is a file,
// no element has an event handler or a style attribute, and no URL is
// javascript:.
func TestStatusPageNeedsNothingInline(t *testing.T) {
	_, body := getPage(t, pageServer(t).Handler(), "/")
	for _, script := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
		assert.Contains(t, script, `src="ui/`, "a script from the agent's own files")
	}
	assert.NotRegexp(t, `(?i)<[^>]+\son[a-z]+=`, body, "no event handler attributes")
	assert.NotRegexp(t, `(?i)<[^>]+\sstyle=`, body, "no style attributes")
	assert.NotContains(t, body, "<style")
	assert.NotContains(t, body, "javascript:")
	_, js := getPage(t, pageServer(t).Handler(), "/ui/status.js")
	assert.NotContains(t, js, "innerHTML", "the script builds no HTML from strings")
	assert.NotContains(t, js, "insertAdjacentHTML")
	assert.NotContains(t, js, "document.write")
}

func TestStatusPageStaticFiles(t *testing.T) {
	h := pageServer(t).Handler()
	for _, tt := range []struct{ path, contentType, contains string }{
		{"/ui/status.js", "text/javascript; charset=utf-8", "new EventSource("},
		{"/ui/status.css", "text/css; charset=utf-8", ".pod"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := getPage(t, h, tt.path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tt.contentType, resp.Header.Get("Content-Type"))
			assert.Contains(t, body, tt.contains)
			etag := resp.Header.Get("ETag")
			require.NotEmpty(t, etag)
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req.Header.Set("If-None-Match", etag)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusNotModified, rec.Code, "revalidated, not sent again")
		})
	}
}

// The page is at / alone: other paths are still not found, and it only
// reads.
func TestStatusPageLeavesOtherPathsNotFound(t *testing.T) {
	h := pageServer(t).Handler()
	for _, path := range []string{"/nope", "/index.html", "/ui/", "/ui/nope.js", "/ui/page.html", "/ui/templates/page.html", "/ui/static/status.js",
		"/api/v1/nope", "/status.js"} {
		resp, _ := getPage(t, h, path)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	for _, path := range []string{"/", "/ui/status.js"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "POST %s", path)
	}
}

// manyPods is n pods of one container with two probes, each with a full
// history, in namespaces ns0 and ns1 by turns.
type manyPods int

func (n manyPods) Report() []pods.PodReport {
	out := make([]pods.PodReport, 0, n)
	for i := range int(n) {
		last := &results.Observation{Time: t0, Outcome: results.OutcomeSuccess, Output: "ok"}
		out = append(out, pods.PodReport{Key: fmt.Sprint("k", i), Namespace: fmt.Sprint("ns", i%2), Name: fmt.Sprintf("pod-%04d", i), SandboxID: "sb", Ready: true,
			Containers: []pods.ContainerReport{{Name: "app", ID: "c", State: cri.StateRunning, Ready: true, Started: true,
				Probes: []pods.ProbeReport{{Type: results.Liveness, Result: results.Success, Last: last}, {Type: results.Readiness, Result: results.Success, Last: last}}}}})
	}
	return out
}

func (n manyPods) ReportPod(string, string) (pods.PodReport, bool) { return pods.PodReport{}, false }

type fullHistory struct{}

func (fullHistory) For(string) []results.ProbeHistory {
	runs := make([]results.Observation, results.HistoryRecent)
	for i := range runs {
		runs[i] = results.Observation{Time: t0.Add(time.Duration(i) * time.Second), Duration: time.Duration(i) * time.Millisecond, Outcome: results.OutcomeSuccess}
	}
	return []results.ProbeHistory{{Container: "app", Type: results.Liveness, Recent: runs}, {Container: "app", Type: results.Readiness, Recent: runs}}
}

// At 1,000 pods the page shows them 50 at a time, with where it is and
// links to the rest, and stays small.
func TestStatusPagePaginates(t *testing.T) {
	ring := events.NewRing(1000)
	for i := range 1000 {
		ring.Record(events.Event{Time: t0.Add(time.Duration(i) * time.Second), Type: events.Warning, Reason: "Unhealthy", Namespace: "ns0",
			Pod: "pod-0000", Message: strings.Repeat("m", 4000)})
	}
	s := New(Config{Pods: manyPods(1000), History: fullHistory{}, Ledger: fakeLedger{}, Events: ring, Health: healthy})
	for _, tt := range []struct {
		query      string
		first      string
		pods       int
		pager      string
		prev, next string
	}{
		{query: "", first: "pod-0000", pods: 50, pager: "pods 1–50 of 1000", next: "?page=2"},
		{query: "?page=2", first: "pod-0050", pods: 50, pager: "pods 51–100 of 1000", prev: "?page=1", next: "?page=3"},
		{query: "?page=20", first: "pod-0950", pods: 50, pager: "pods 951–1000 of 1000", prev: "?page=19"},
		{query: "?page=99", first: "pod-0950", pods: 50, pager: "pods 951–1000 of 1000", prev: "?page=19"},
		{query: "?page=-1", first: "pod-0000", pods: 50, pager: "pods 1–50 of 1000", next: "?page=2"},
		{query: "?namespace=ns1&page=10", first: "pod-0901", pods: 50, pager: "pods 451–500 of 500", prev: "?namespace=ns1&amp;page=9"},
		{query: "?namespace=none", pods: 0, pager: "No pods in this namespace."},
	} {
		t.Run(tt.query, func(t *testing.T) {
			_, body := getPage(t, s.Handler(), "/"+tt.query)
			assert.Equal(t, tt.pods, strings.Count(body, `<article class="pod`))
			if tt.first != "" {
				assert.Regexp(t, `<article[^>]*>\s*<h3><span class="ns">ns\d/</span>`+tt.first+`</h3>`, body, "the page's first pod")
			}
			assert.Contains(t, body, tt.pager)
			if tt.prev != "" {
				assert.Contains(t, body, `<a href="`+tt.prev+`" rel="prev">`)
			}
			if tt.next != "" {
				assert.Contains(t, body, `<a href="`+tt.next+`" rel="next">`)
			}
			assert.LessOrEqual(t, strings.Count(body, `<tr data-key=`), pageEvents, "the newest events only")
			assert.Less(t, len(body), 400<<10, "small at 1,000 pods")
		})
	}
}

// The script skips the events the page already shows by a key it computes
// from the stream's JSON as the page does from the event.
func TestStatusPageEventKeyMatchesTheStream(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	for _, e := range []events.Event{
		{Time: time.Date(2026, 11, 21, 9, 0, 0, 123456789, loc), Type: events.Warning, Reason: "Unhealthy", Namespace: "shop", Pod: "web", Container: "app", Count: 2, Threshold: 3},
		{Time: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Type: events.Normal, Reason: "StoppingPod", Namespace: "shop", Pod: "web"},
	} {
		raw, err := json.Marshal(e)
		require.NoError(t, err)
		var j struct {
			Time, Namespace, Pod, Container, Reason string
			Count                                   int
		}
		require.NoError(t, json.Unmarshal(raw, &j))
		// status.js: [e.time, e.namespace, e.pod, e.container || '', e.reason, String(e.count || 0)].join('|')
		assert.Equal(t, strings.Join([]string{j.Time, j.Namespace, j.Pod, j.Container, j.Reason, strconv.Itoa(j.Count)}, "|"), eventKey(e))
	}
}

// The page is the API's: the Host check, and a web configuration's basic
// auth, hold for it and its files as for every route.
func TestStatusPageObeysHostCheckAndAuth(t *testing.T) {
	config := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "basic_auth_users:\n  dave: %s\n", daveHash), 0o600))
	s := serve(t, listenLoopback(t), Config{}, ServeConfig{WebConfigFile: config})
	get := func(path, user, host string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, "dave123")
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/", "/ui/status.js"} {
		assert.Equal(t, http.StatusUnauthorized, get(path, "", s.addr), path)
		assert.Equal(t, http.StatusOK, get(path, "dave", s.addr), path)
		assert.Equal(t, http.StatusMisdirectedRequest, get(path, "dave", "evil.example"), path)
	}
}

func BenchmarkStatusPage1000Pods(b *testing.B) {
	s := New(Config{Pods: manyPods(1000), History: fullHistory{}, Ledger: fakeLedger{}, Events: events.NewRing(1000), Health: healthy})
	h := s.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	}
}

// runsHistory is one liveness probe's runs, for every pod, as a test sets
// them.
type runsHistory struct{ runs *[]results.Observation }

func (h runsHistory) For(string) []results.ProbeHistory {
	return []results.ProbeHistory{{Container: "app", Type: results.Liveness, Recent: slices.Clone(*h.runs)}}
}

// A page fetched again shows each probe's chart as its runs are now: the
// chart drawn before while the probe has not run since, a new one once it
// has, and each probe its own.
func TestStatusPageChartsFollowTheRuns(t *testing.T) {
	runs := []results.Observation{{Time: t0, Duration: time.Millisecond, Outcome: results.OutcomeSuccess}}
	s := New(Config{Pods: manyPods(2), History: runsHistory{&runs}, Ledger: fakeLedger{}, Events: events.NewRing(10), Health: healthy})
	s.clock = testingclock.NewFakePassiveClock(t0.Add(time.Minute))
	h := s.Handler()
	bars := func(body string) []string {
		return regexp.MustCompile(`<rect class="run (\w+)"`).FindAllString(body, -1)
	}
	_, first := getPage(t, h, "/")
	assert.Len(t, bars(first), 2, "one run of each pod's liveness probe")
	_, again := getPage(t, h, "/")
	assert.Equal(t, first, again, "no run since: the same page")

	runs = append(runs, results.Observation{Time: t0.Add(time.Second), Duration: 2 * time.Millisecond, Outcome: results.OutcomeFailure, Output: "HTTP 500"})
	_, body := getPage(t, h, "/")
	assert.Len(t, bars(body), 4, "the new run on both charts")
	assert.Contains(t, body, `<rect class="run failure" x="114" y="0" width="5" height="24"><title>09:00:01 failure in 2.0 ms: HTTP 500</title></rect>`)
	assert.Contains(t, body, `aria-label="liveness: last 2 runs, 1 succeeded, 1 failed"`)
	assert.Contains(t, body, `<span class="scale">max 2.0 ms</span>`)
	assert.NotContains(t, body, `last 1 runs`)
	checkMarkup(t, body)
}

// ranHistory is fullHistory with every probe run again at each call: no
// chart drawn before can be shown again.
type ranHistory struct{ calls *atomic.Int64 }

func (h ranHistory) For(key string) []results.ProbeHistory {
	out := fullHistory{}.For(key)
	at := time.Duration(h.calls.Add(1)) * time.Second
	for _, p := range out {
		for i := range p.Recent {
			p.Recent[i].Time = p.Recent[i].Time.Add(at)
		}
	}
	return out
}

// BenchmarkStatusPage1000PodsAllRan is BenchmarkStatusPage1000Pods with
// every chart drawn again: the page as fetched after every probe ran.
func BenchmarkStatusPage1000PodsAllRan(b *testing.B) {
	s := New(Config{Pods: manyPods(1000), History: ranHistory{new(atomic.Int64)}, Ledger: fakeLedger{}, Events: events.NewRing(1000), Health: healthy})
	h := s.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	}
}

// The page says why in a line, as `cri-prober why` says it at length.
func TestStatusPageSaysWhyARestartHappened(t *testing.T) {
	for _, tt := range []struct {
		name        string
		entry       ledger.Entry
		why, action string
	}{
		{name: "liveness", entry: ledger.Entry{Cause: "liveness", ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, Action: ledger.ActionRestarted, Attempt: 2,
			BackOffSeconds: 10, Failures: []ledger.Failure{{Output: "first"}, {Output: "HTTP probe failed with statuscode: 500\nbody", Threshold: 2}}},
			why:    "its liveness probe failed 2 time(s) in a row (failureThreshold 2): HTTP probe failed with statuscode: 500; killed with a 30 s grace period, exit code 137 (Error)",
			action: "restarted as attempt 2 after 10s of back-off"},
		{name: "exit", entry: ledger.Entry{Cause: "exit", ExitCode: 3, ExitReason: "Error", Action: ledger.ActionRestarted, Attempt: 1},
			why: "it exited: exit code 3 (Error)", action: "restarted as attempt 1 after 0s of back-off"},
		{name: "postStart", entry: ledger.Entry{Cause: "postStart", ExitCode: 137, Action: ledger.ActionStopped},
			why: "its postStart hook failed; killed, exit code 137", action: "stopped, not restarted"},
		{name: "startup, no failures kept", entry: ledger.Entry{Cause: "startup", GracePeriodSeconds: 2, Action: ledger.ActionRestarted, Attempt: 1, BackOffSeconds: 0.25},
			why: "startup; killed with a 2 s grace period, exit code 0", action: "restarted as attempt 1 after 300ms of back-off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.why, why(restartOf(tt.entry)))
			assert.Equal(t, tt.action, action(restartOf(tt.entry)))
		})
	}
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain <b>text</b>", "plain <b>text</b>"},
		{"two\nlines\tand\rtab", "two lines and tab"},
		{"\x1b[31mred\x07", `\x1b[31mred\x07`},
		{"abc\u202edcba\u2066x\u200f", `abc\u202edcba\u2066x\u200f`},
		{"ünïcödé ✓", "ünïcödé ✓"},
	} {
		assert.Equal(t, tt.want, Printable(tt.in), "%q", tt.in)
	}
}

// BenchmarkStatusPageBusyNode renders the page as the agent serves it on a
// busy node: 1,000 pods, every probe's history full (the agent's own
// results.Histories), a full restart ledger and a full event ring, as
// ledger.Ledger and events.Ring keep them.
func BenchmarkStatusPageBusyNode(b *testing.B) {
	const n = 1000
	histories := results.NewHistories()
	restarts, _, err := ledger.Open("")
	require.NoError(b, err)
	ring := events.NewRing(1000)
	for i := range n {
		for _, typ := range []results.ProbeType{results.Liveness, results.Readiness} {
			h := histories.Get(results.HistoryKey{Pod: fmt.Sprint("k", i), Container: "app", Type: typ})
			for r := range results.HistoryRecent {
				h.Add(results.Observation{Time: t0.Add(time.Duration(r) * time.Second), Duration: time.Duration(r) * time.Millisecond,
					Outcome: results.OutcomeSuccess, ContainerID: "c"})
			}
		}
		require.NoError(b, restarts.Add(ledger.Entry{Time: t0.Add(time.Duration(i) * time.Second), Namespace: fmt.Sprint("ns", i%2),
			Pod: fmt.Sprintf("pod-%04d", i), Container: "app", Cause: "liveness", Action: ledger.ActionRestarted, Attempt: 1,
			Failures: []ledger.Failure{{Time: t0, Output: strings.Repeat("x", 1000), Threshold: 3}}}))
		ring.Record(events.Event{Time: t0.Add(time.Duration(i) * time.Second), Type: events.Warning, Reason: "Unhealthy", Namespace: fmt.Sprint("ns", i%2),
			Pod: fmt.Sprintf("pod-%04d", i), Container: "app", Message: strings.Repeat("m", events.MaxMessage)})
	}
	s := New(Config{Pods: manyPods(n), History: histories, Ledger: restarts, Events: ring, Health: healthy})
	h := s.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	}
}

// A failure below its threshold (run --probe-failure-events=threshold) is
// a Normal event: listed with its count, not marked as a warning.
func TestStatusPageShowsIgnoredProbeFailures(t *testing.T) {
	s, ring := newServer(healthy)
	s.clock = testingclock.NewFakePassiveClock(t0.Add(5 * time.Minute))
	ring.Record(events.Event{Time: t0.Add(time.Second), Type: events.Normal, Reason: "ProbeFailureIgnored", Namespace: "shop", Pod: "web", Container: "app",
		Message: "Liveness probe failed (1/3, will be ignored): HTTP probe failed with statuscode: 500", Count: 1, Threshold: 3})
	_, body := getPage(t, s.Handler(), "/")
	assert.Contains(t, body, `<tr data-key="2026-11-21T09:00:01Z|shop|web|app|ProbeFailureIgnored|1" data-time="2026-11-21T09:00:01Z"><td class="nowrap"><time datetime="2026-11-21T09:00:01Z">09:00:01</time></td><td class="nowrap">Normal</td><td>ProbeFailureIgnored</td><td>shop/web/app</td><td>1/3</td><td class="message">Liveness probe failed (1/3, will be ignored): HTTP probe failed with statuscode: 500</td></tr>`)
}
