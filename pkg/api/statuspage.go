package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// The status page: GET / is the state API as a person reads it, rendered
// on the server by html/template (so it works as a snapshot with
// JavaScript off), and kept live by a small script that follows the event
// stream (/api/v1/events?watch=1). When events arrive, the script fetches
// the page again and replaces only the parts that changed (summary,
// restarts, each pod); it adds the events themselves with textContent.
// html/template is the one renderer: the script never builds HTML from
// strings.
//
// Everything a workload controls (names, probe output, event messages) is
// escaped by html/template and cut to a bounded length, and the page
// forbids inline script, plugins and framing (pageCSP).

//go:embed ui/templates/page.html
var pageSource string

//go:embed ui/static
var staticFiles embed.FS

var pageTemplate = template.Must(template.New("page").Parse(pageSource))

// What one render of the page shows at most: a node may run thousands of
// pods, and the page must stay small and fast; the rest is a click away
// (pages, a namespace filter) or in the JSON endpoints.
const (
	pagePods     = 50  // pods per page
	pageEvents   = 100 // the newest events
	pageRestarts = 10  // the newest restarts of the pods filtered

	// Lengths of what workloads control, as shown: a line on the page,
	// and a tooltip with more of it.
	shownName    = 253 // a Kubernetes name's own limit
	shownLine    = 200
	shownMessage = 500 // an event's message (status.js cuts to the same)
	shownTooltip = bounded.Message
)

// pageCSP allows the page its own script, style sheet and icon, and
// requests (fetch, the event stream) to its own origin; nothing inline,
// no plugins, no framing, no form posting elsewhere. Trusted Types make
// every HTML sink (innerHTML and the like) refuse plain strings: the
// script's one sink, parsing the page it fetched from the agent, goes
// through its named policy.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types cri-prober"

// setPageHeaders sets what every response of the status page carries.
func setPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// staticTypes are the static files' content types, by extension: set
// here rather than from the system's MIME table, which varies.
var staticTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

// staticFile is a file of ui/static as served.
type staticFile struct {
	body        []byte
	contentType string
	etag        string
}

// loadStatic reads the embedded static files once.
func loadStatic() map[string]staticFile {
	out := map[string]staticFile{}
	err := fs.WalkDir(staticFiles, "ui/static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFiles.ReadFile(name)
		if err != nil {
			return err
		}
		ct, ok := staticTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("%s: no content type for %q", name, path.Ext(name))
		}
		sum := sha256.Sum256(body)
		out[path.Base(name)] = staticFile{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("the status page's embedded files: %v", err)) // a build mistake
	}
	return out
}

var static = loadStatic()

// serveStatic serves /ui/{file}: the page's script, style sheet and icon.
// They change only with the agent's binary: a browser revalidates them
// (ETag) rather than keeping an old script beside a new page.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	f, ok := static[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// statusPage serves GET /: ?namespace= keeps one namespace's pods,
// ?page= (from 1) pages through them.
func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	// Rendered whole before anything is sent: a template error is a 500,
	// never half a page.
	var buf bytes.Buffer
	data, err := s.pageData(q.Get("namespace"), page)
	if err == nil {
		err = pageTemplate.Execute(&buf, data)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("render the status page: %v", err), http.StatusInternalServerError)
		return
	}
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // live state
	w.Write(buf.Bytes())                        //nolint:errcheck // the client went away
}

// pageData is what the template renders.
type pageData struct {
	// Clock is when the page was made; Since is that time to the second,
	// from which the script follows the events.
	Clock, Since string
	RuntimeError string
	Namespace    string
	Summary      summaryView
	Pager        pagerView
	Pods         []podView
	Restarts     []restartView
	Events       []eventView
	MaxEvents    int
	Kills        *killsView // nil: no restarter, or nothing to say
	// Node is what the agent keeps on the node (NodeReport.Lines; nil:
	// nothing).
	Node []NodeLine
}

// killsView is the restart budget, the pause and the kills that wait.
type killsView struct {
	Paused   string // by whom, since when, why
	Budget   string // "3 kills per 20s on the node (2 in the window)"
	Deferred []deferredView
}

type deferredView struct {
	Object string // namespace/pod container
	Probe  string
	Why    string
}

type summaryView struct {
	Pods, Ready, Containers int
	Restarts                int
}

// pagerView says which pods the page shows, of how many.
type pagerView struct {
	From, To, Total int
	Prev, Next      string // links, "" at either end
}

type podView struct {
	Part      string // what the script matches parts by
	Anchor    string
	Namespace string
	Name      string
	Phase     string // when it says more than Status
	Status    string
	Ready     bool
	ReadyText string // 1/2
	Restarts  string // kubectl's: 3 (5m2s ago)
	Age       string
	Created   string
	IP        string
	Source    string
	Problems  []string
	// Why is the pod's reason and message when it failed as a whole
	// (DeadlineExceeded).
	Why        string
	Conditions []conditionView
	// Gates is how many of its readiness gates are met, of how many
	// (kubectl's READINESS GATES: 1/2); "" for a pod without.
	Gates string

	Containers []containerView
}

// conditionView is a pod condition: its type and status, and for one
// that is not True its reason and message.
type conditionView struct {
	Type   string
	OK     bool
	Text   string // "True", or "False (Reason: message)"
	Detail string // since when, as a tooltip
}

type containerView struct {
	Name     string
	Kind     string
	State    string // kubelet's state in a few words (Running, CrashLoopBackOff, Error (exit code 1))
	Ready    bool
	Restarts int32
	Waiting  string // back-off until …
	// StateMessage is its state's message in a line, StateTooltip more of
	// it: why it waits, as kubelet says (an image pull's error, a
	// back-off), or how it ended (its termination message).
	StateMessage, StateTooltip string
	// Last is its last termination (kubelet's lastState), in a line:
	// LastMessage is the message (its termination message) cut to a
	// line, LastTooltip more of it.
	Last, LastFinished, LastMessage, LastTooltip string
	Problems                                     []string
	Probes                                       []probeView
}

type probeView struct {
	Type    string
	Result  string // the last run's: success, failure, warning, unknown
	Counter string // consecutive/threshold, while below the threshold
	When    string // how long ago it ran
	Detail  string // the output's or error's first line
	Tooltip string // more of it
	Chart   drawnChart
}

// chartView is a probe's recent runs as bars: one a run, oldest first,
// colored by verdict, as tall as it took (the template "chart").
type chartView struct {
	Width, Height int
	Label         string // for screen readers, and a test's anchor
	Scale         string // the tallest bar's duration
	Bars          []barView
}

type barView struct {
	X, Y, W, H int
	Result     string
	Title      string
}

type restartView struct {
	Time   string // RFC 3339
	Ago    string
	Anchor string // the pod's, when this page shows it
	Object string
	Cause  string
	Why    string
	Action string
}

type eventView struct {
	// Key identifies the event for the script, which skips those already
	// shown: status.js computes it the same way from the stream's JSON.
	Key     string
	Time    string
	Clock   string
	Type    string
	Reason  string
	Object  string
	Count   string
	Message string
	Warning bool
}

func (s *Server) pageData(namespace string, page int) (pageData, error) {
	now := s.clock.Now()
	var list []pods.PodReport
	for _, r := range s.pods.Report() {
		if namespace == "" || r.Namespace == namespace {
			list = append(list, r)
		}
	}
	d := pageData{Clock: now.Format("15:04:05"), Since: now.UTC().Truncate(time.Second).Format(time.RFC3339),
		Namespace: clip(namespace, shownName), MaxEvents: pageEvents}
	if err := s.health(); err != nil {
		d.RuntimeError = clip(err.Error(), shownTooltip)
	}
	// The summary counts from the reports: only the pods shown are made
	// into the API's Pod (with the restarter's waiting state).
	d.Summary.Pods = len(list)
	for _, r := range list {
		if r.Ready {
			d.Summary.Ready++
		}
		d.Summary.Containers += len(r.Containers)
		for _, c := range r.Containers {
			d.Summary.Restarts += int(c.RestartCount) // kubelet's restart count, as Pod.Restarts adds them
		}
	}

	pages := max(1, (len(list)+pagePods-1)/pagePods)
	page = min(max(page, 1), pages)
	from, to := (page-1)*pagePods, min(page*pagePods, len(list))
	d.Pager = pagerView{From: min(from+1, to), To: to, Total: len(list)}
	if page > 1 {
		d.Pager.Prev = pageLink(namespace, page-1)
	}
	if page < pages {
		d.Pager.Next = pageLink(namespace, page+1)
	}
	shown := map[string]string{} // namespace/name → anchor
	for _, r := range list[from:to] {
		v, err := s.podView(s.pod(r), r.Key, now)
		if err != nil {
			return d, err
		}
		shown[r.Namespace+"/"+r.Name] = v.Anchor
		d.Pods = append(d.Pods, v)
	}
	d.Restarts = s.restartViews(list, shown, now)
	if s.kills != nil {
		d.Kills = killsViewOf(s.kills.Kills(), namespace, now)
	}
	if s.nodeReport != nil {
		d.Node = s.nodeReport.NodeReport().Lines(now)
	}

	all := s.events.Since(time.Time{})
	for i := len(all) - 1; i >= 0 && len(d.Events) < pageEvents; i-- {
		if e := all[i]; namespace == "" || e.Namespace == namespace {
			d.Events = append(d.Events, eventRow(e))
		}
	}
	return d, nil
}

func pageLink(namespace string, page int) string {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	q.Set("page", strconv.Itoa(page))
	return "?" + q.Encode()
}

// podPart names a pod's part of the page: a pod re-created under the same
// name (a new sandbox) is a new part.
func podPart(p Pod) string { return "pod/" + p.Namespace + "/" + p.Name + "/" + p.SandboxID }

func (s *Server) podView(p Pod, key string, now time.Time) (podView, error) {
	ready, total := p.ReadyCount()
	v := podView{Part: clip(podPart(p), 3*shownName), Anchor: "pod-" + clip(p.Namespace+"/"+p.Name, 2*shownName),
		Namespace: clip(p.Namespace, shownName), Name: clip(p.Name, shownName), Status: p.Status(),
		Ready: p.Ready, ReadyText: fmt.Sprintf("%d/%d", ready, total), Restarts: p.RestartsText(now), Age: Age(p.CreatedAt, now),
		Created: rfc3339(p.CreatedAt), IP: clip(p.IP, shownName), Source: clip(p.Source, shownLine), Problems: clipAll(p.Problems)}
	if v.Phase = p.Phase; v.Phase == v.Status {
		v.Phase = ""
	}
	if len(p.ReadinessGates) > 0 {
		v.Gates = p.ReadinessGatesText()
	}
	if p.Reason != "" {
		v.Why = clip(strings.TrimSuffix(p.Reason+": "+p.Message, ": "), shownLine)
	}
	for _, c := range p.Conditions {
		cv := conditionView{Type: clip(c.Type, shownName), OK: c.Status == "True", Text: clip(c.Status, shownName)}
		if c.LastTransitionTime != nil {
			cv.Detail = "since " + rfc3339(*c.LastTransitionTime)
		}
		if why := strings.TrimSuffix(c.Reason+": "+c.Message, ": "); why != "" {
			cv.Text += " (" + clip(why, shownLine) + ")"
		}
		v.Conditions = append(v.Conditions, cv)
	}
	histories := map[string]results.ProbeHistory{}
	if s.history != nil && key != "" {
		for _, h := range s.history.For(key) {
			histories[h.Container+"/"+strings.ToLower(h.Type.String())] = h
		}
	}
	for _, c := range p.Containers {
		cv := containerView{Name: clip(c.Name, shownName), Kind: c.Kind, State: clip(c.StateText(), shownName), Ready: c.Ready, Restarts: c.RestartCount,
			Problems: clipAll(append(slices.Clip(c.Problems), c.Warnings...))}
		if c.WaitingUntil != nil {
			cv.Waiting = "back-off until " + c.WaitingUntil.Format("15:04:05")
		}
		switch st := c.Status.State; {
		case st.Waiting != nil:
			cv.StateMessage, cv.StateTooltip = messageLine(st.Waiting.Message)
		case st.Terminated != nil:
			cv.StateMessage, cv.StateTooltip = messageLine(st.Terminated.Message)
		}
		if t := c.Status.LastState.Terminated; t != nil {
			cv.Last = clip(c.Status.LastState.Text(), shownName)
			if t.FinishedAt != nil {
				cv.LastFinished = t.FinishedAt.Format("15:04:05")
			}
			cv.LastMessage, cv.LastTooltip = messageLine(t.Message)
		}
		for _, typ := range []string{"startup", "liveness", "readiness"} {
			pr, ok := c.Probes[typ]
			if !ok {
				continue
			}
			chart, err := s.charts.draw(chartKey{pod: key, container: c.Name, probe: typ}, histories[c.Name+"/"+typ].Recent)
			if err != nil {
				return v, err
			}
			cv.Probes = append(cv.Probes, probeRow(typ, pr, chart, now))
		}
		v.Containers = append(v.Containers, cv)
	}
	return v, nil
}

// messageLine is a message a workload may control (a termination
// message) as a line to show, and more of it for a tooltip.
func messageLine(msg string) (line, tooltip string) {
	msg = strings.TrimSpace(msg)
	first, _, _ := strings.Cut(msg, "\n")
	return clip(first, shownLine), clip(msg, shownTooltip)
}

func probeRow(typ string, p Probe, chart drawnChart, now time.Time) probeView {
	v := probeView{Type: typ, Result: p.Result, When: "not run yet", Chart: chart}
	if p.LastProbeTime != nil {
		v.When = Age(*p.LastProbeTime, now) + " ago"
	}
	if p.Threshold > 0 && p.Consecutive < p.Threshold {
		v.Counter = fmt.Sprintf("%d/%d", p.Consecutive, p.Threshold)
	}
	if p.Result != string(results.OutcomeSuccess) { // what a passing probe printed is noise
		detail := strings.TrimSpace(p.Error + "\n" + p.Output)
		first, _, _ := strings.Cut(detail, "\n")
		v.Detail, v.Tooltip = clip(first, shownLine), clip(detail, shownTooltip)
	}
	return v
}

// The chart's geometry, in pixels: a bar per run of the history's last
// results.HistoryRecent, at least minBar tall so that a fast run shows.
const (
	barWidth    = 5
	barGap      = 1
	chartHeight = 24
	minBar      = 3
)

// chartCache keeps each probe's chart as last drawn, by probe: an open page
// is fetched again at every burst of events, and its charts are most of
// its markup and of the cost of a render, while a probe's runs change only
// when it runs (every periodSeconds). At most chartCacheBytes of markup.
type chartCache struct {
	mu    sync.Mutex
	m     map[chartKey]drawnChart
	bytes int
}

const chartCacheBytes = 1 << 20

// chartKey is a probe: its pod's key (pods.Pod.Key), container and type.
type chartKey struct{ pod, container, probe string }

// drawnChart is a chart as the template "chart" draws it (html/template
// escaped it), and the duration of its tallest bar.
type drawnChart struct {
	SVG   template.HTML
	Scale string
	// The runs it shows: how many and the newest one's time, which a run
	// changes.
	runs int
	last time.Time
}

// draw returns the chart of a probe's runs, drawn again only if they are
// not those it last drew for that probe.
func (c *chartCache) draw(k chartKey, runs []results.Observation) (drawnChart, error) {
	var last time.Time
	if len(runs) > 0 {
		last = runs[len(runs)-1].Time
	}
	c.mu.Lock()
	d, ok := c.m[k]
	c.mu.Unlock()
	if ok && d.runs == len(runs) && d.last.Equal(last) {
		return d, nil
	}
	view := chart(k.probe, runs)
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "chart", view); err != nil {
		return drawnChart{}, err
	}
	d = drawnChart{SVG: template.HTML(buf.String()), Scale: view.Scale, runs: len(runs), last: last} //nolint:gosec // html/template's own output
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+len(d.SVG) > chartCacheBytes {
		c.m, c.bytes = map[chartKey]drawnChart{}, 0
	}
	c.bytes += len(d.SVG) - len(c.m[k].SVG)
	c.m[k] = d
	return d, nil
}

func chart(typ string, runs []results.Observation) chartView {
	c := chartView{Width: results.HistoryRecent * (barWidth + barGap), Height: chartHeight}
	counts := map[results.Outcome]int{}
	var longest time.Duration
	for _, o := range runs {
		counts[o.Outcome]++
		longest = max(longest, o.Duration)
	}
	c.Label = fmt.Sprintf("%s: last %d runs, %d succeeded, %d failed", typ, len(runs), counts[results.OutcomeSuccess]+counts[results.OutcomeWarning],
		counts[results.OutcomeFailure]+counts[results.OutcomeUnknown])
	if len(runs) == 0 {
		return c
	}
	c.Scale = "max " + millis(longest)
	// The newest run is at the right edge, as on a timeline.
	x := c.Width - len(runs)*(barWidth+barGap)
	for _, o := range runs {
		h := minBar
		if longest > 0 {
			h += int(int64(chartHeight-minBar) * int64(o.Duration) / int64(longest))
		}
		title := fmt.Sprintf("%s %s in %s", o.Time.Format("15:04:05"), o.Outcome, millis(o.Duration))
		if text := strings.TrimSpace(o.Err + " " + o.Output); text != "" && o.Outcome != results.OutcomeSuccess {
			title += ": " + text
		}
		c.Bars = append(c.Bars, barView{X: x, Y: chartHeight - h, W: barWidth, H: h, Result: string(o.Outcome), Title: clip(title, shownLine)})
		x += barWidth + barGap
	}
	return c
}

// millis is a duration in milliseconds, to about three digits.
func millis(d time.Duration) string {
	ms := float64(d.Microseconds()) / 1000
	prec := 0
	switch {
	case ms < 1:
		prec = 2
	case ms < 100:
		prec = 1
	}
	return strconv.FormatFloat(ms, 'f', prec, 64) + " ms"
}

// restartViews are the newest restarts of the pods, newest first, with
// why (what `cri-prober why` says, in a line).
func (s *Server) restartViews(list []pods.PodReport, shown map[string]string, now time.Time) []restartView {
	if s.ledger == nil {
		return nil
	}
	listed := make(map[string]bool, len(list))
	for _, p := range list {
		listed[p.Namespace+"/"+p.Name] = true
	}
	entries := s.ledger.Newest(pageRestarts, func(namespace, pod string) bool { return listed[namespace+"/"+pod] })
	out := make([]restartView, 0, len(entries))
	for _, entry := range entries {
		e := restartOf(entry)
		out = append(out, restartView{Time: rfc3339(e.Time), Ago: Age(e.Time, now) + " ago", Anchor: shown[e.Namespace+"/"+e.Pod],
			Object: clip(e.Namespace+"/"+e.Pod+"/"+e.Container, 3*shownName), Cause: clip(string(e.Cause), shownName), Why: clip(why(e), shownTooltip),
			Action: action(e)})
	}
	return out
}

// why says in a line why the agent restarted (or stopped) a container.
func why(e Restart) string {
	exit := fmt.Sprintf("exit code %d", e.ExitCode)
	if e.ExitReason != "" {
		exit += " (" + e.ExitReason + ")"
	}
	switch e.Cause {
	case restart.CauseExit:
		return "it exited: " + exit
	case restart.CausePostStart:
		return "its postStart hook failed; killed, " + exit
	}
	if len(e.Failures) == 0 {
		return fmt.Sprintf("%s; killed with a %d s grace period, %s", e.Cause, e.GracePeriodSeconds, exit)
	}
	output, _, _ := strings.Cut(strings.TrimSpace(e.Failures[len(e.Failures)-1].Output), "\n")
	return fmt.Sprintf("%s: %s; killed with a %d s grace period, %s", ProbeFailures(e), bounded.String(output, shownLine), e.GracePeriodSeconds, exit)
}

func action(e Restart) string {
	if e.Action == ledger.ActionStopped {
		return "stopped, not restarted"
	}
	wait := time.Duration(e.BackOffSeconds * float64(time.Second)).Round(100 * time.Millisecond)
	return fmt.Sprintf("restarted as attempt %d after %s of back-off", e.Attempt, wait)
}

func eventRow(e events.Event) eventView {
	v := eventView{Key: eventKey(e), Time: rfc3339(e.Time), Clock: e.Time.Format("15:04:05"), Type: clip(e.Type, shownName),
		Reason: clip(e.Reason, shownName), Object: clip(strings.TrimSuffix(e.Namespace+"/"+e.Pod+"/"+e.Container, "/"), 3*shownName),
		Message: clip(e.Message, shownMessage), Warning: e.Type == events.Warning}
	if e.Threshold > 0 {
		v.Count = fmt.Sprintf("%d/%d", e.Count, e.Threshold)
	}
	return v
}

// eventKey is what status.js's eventKey computes from the stream's JSON
// (whose times are RFC 3339 with nanoseconds, as time.Time marshals).
func eventKey(e events.Event) string {
	return strings.Join([]string{e.Time.Format(time.RFC3339Nano), e.Namespace, e.Pod, e.Container, e.Reason, strconv.Itoa(e.Count)}, "|")
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// clip makes text a workload controls fit to be shown: at most limit
// bytes (and a note of what was cut), Printable. html/template escapes it
// for where it goes.
func clip(s string, limit int) string { return Printable(bounded.String(s, limit)) }

func clipAll(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, clip(s, shownLine))
	}
	return out
}

// killsViewOf says what the page shows of the budget and the pause (nil:
// nothing to say), the waiting kills of namespace ("" all).
func killsViewOf(k killbudget.Status, namespace string, now time.Time) *killsView {
	var v killsView
	if p := k.Paused; p != nil {
		v.Paused = clip(fmt.Sprintf("by %s, %s ago", p.By, now.Sub(p.Since).Round(time.Second)), shownTooltip)
		if p.Reason != "" {
			v.Paused += " (" + clip(p.Reason, shownTooltip) + ")"
		}
	}
	if k.NodeBudget > 0 || k.PodBudget > 0 {
		var parts []string
		if k.NodeBudget > 0 {
			parts = append(parts, fmt.Sprintf("%d kills per %s on the node (%d in the window)", k.NodeBudget, k.Interval, k.KillsInWindow))
		}
		if k.PodBudget > 0 {
			parts = append(parts, fmt.Sprintf("%d per pod per %s", k.PodBudget, k.Interval))
		}
		v.Budget = strings.Join(parts, ", ")
	}
	for _, d := range k.Deferred {
		if namespace != "" && d.Namespace != namespace {
			continue
		}
		v.Deferred = append(v.Deferred, deferredView{Object: clip(d.Namespace+"/"+d.Pod+" "+d.Container, shownName), Probe: d.Probe,
			Why: clip(DeferredWhy(d, now), shownTooltip)})
	}
	if v.Paused == "" && v.Budget == "" && len(v.Deferred) == 0 {
		return nil
	}
	return &v
}

// DeferredWhy says in a line why a kill waits and until when (the status
// page, cri-prober status).
func DeferredWhy(d killbudget.DeferredKill, now time.Time) string {
	switch d.Reason {
	case killbudget.DeferPaused:
		return fmt.Sprintf("kills paused (waiting %s)", now.Sub(d.Since).Round(time.Second))
	case killbudget.DeferNode:
		return fmt.Sprintf("node restart budget spent, frees in %s", max(0, d.Until.Sub(now)).Round(time.Second))
	case killbudget.DeferPod:
		return fmt.Sprintf("pod restart budget spent, frees in %s", max(0, d.Until.Sub(now)).Round(time.Second))
	}
	return d.Reason
}
