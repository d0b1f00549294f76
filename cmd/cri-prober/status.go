package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/events"
)

const defaultServer = "http://127.0.0.1:9440"

const statusHelp = `Usage: cri-prober status [flags]

Prints a running agent's pods and containers: readiness, status, restarts
and age as kubectl get pods shows them, and under each pod one line per
container with its probes' last results.

Examples:
  cri-prober status
  cri-prober status --namespace shop
  cri-prober status -o json
  cri-prober status --server http://10.0.0.5:9440

Flags:
`

const eventsHelp = `Usage: cri-prober events [flags]

Prints a running agent's recent events (probe failures, kills, restarts,
back-offs), oldest first; with -f, keeps printing new ones as they happen.

Examples:
  cri-prober events
  cri-prober events --since 10m
  cri-prober events -f

Flags:
`

// apiRequest GETs path from a running agent and returns the response of a
// 200; anything else is an error that says what to check. server is the
// agent's --listen address as a URL: http://host:port, https://… (a
// user:password in it is sent as basic auth, as curl does; the CA comes
// from the system or SSL_CERT_FILE), or unix:///path for a unix socket.
func apiRequest(ctx context.Context, server, path string) (*http.Response, error) {
	server = serverURL(server)
	client, base := http.DefaultClient, strings.TrimSuffix(server, "/")
	if socket, ok := strings.CutPrefix(server, "unix://"); ok {
		client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
		base = "http://localhost"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %w", redactURL(server), err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // its URL may carry a password
		}
		return nil, fmt.Errorf("cannot reach the agent at %s: %w (is `cri-prober run` running? set --server to its --listen address)", redactURL(server), err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("agent at %s answered %s: %s", redactURL(server), resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// serverURL takes --server as the agent's --listen address may be
// written: a URL, or host:port (http), or :port (this host).
func serverURL(server string) string {
	if strings.Contains(server, "://") || server == "" {
		return server
	}
	if strings.HasPrefix(server, ":") {
		server = "127.0.0.1" + server
	}
	return "http://" + server
}

// redactURL is server without the password it may carry.
func redactURL(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.User == nil {
		return server
	}
	return u.Redacted()
}

// writeJSONTo prints v as indented JSON, as the API serves it.
func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func apiGet(ctx context.Context, server, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := apiRequest(ctx, server, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", statusHelp)
	server := fs.String("server", defaultServer, "the agent's state API: its --listen address as host:port (or :port), http://host:port, https://[user:password@]host:port, or unix:///path")
	namespace := fs.String("namespace", "", "only pods of this namespace")
	output := fs.String("o", "table", "output format: table or json")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	if *output != "table" && *output != "json" {
		safef(stderr, "-o %q: want table or json\n", *output)
		return errUsage
	}
	var list api.PodList
	if err := apiGet(ctx, *server, "/api/v1/pods", &list); err != nil {
		return err
	}
	pods := list.Pods[:0]
	for _, p := range list.Pods {
		if *namespace == "" || p.Namespace == *namespace {
			pods = append(pods, p)
		}
	}
	if list.RuntimeError != "" {
		safef(stderr, "WARNING: %s; showing the pods as last seen\n", list.RuntimeError)
	}
	if *output == "json" {
		return writeJSONTo(stdout, api.PodList{RuntimeError: list.RuntimeError, Pods: pods})
	}
	printStatus(stdout, pods, time.Now())
	return nil
}

func printStatus(w io.Writer, pods []api.Pod, now time.Time) {
	// The pod rows are aligned as a table; each pod's container lines go
	// under its row, outside the alignment (they are long).
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tREADY\tSTATUS\tRESTARTS\tAGE")
	for _, p := range pods {
		// kubectl's READY: regular containers and sidecars; init
		// containers never count.
		ready, total, restarts := 0, 0, uint32(0)
		for _, c := range p.Containers {
			restarts += c.RestartCount
			if c.Kind == "init" {
				continue
			}
			total++
			if c.Ready {
				ready++
			}
		}
		safef(tw, "%s\t%s\t%d/%d\t%s\t%d\t%s\n", p.Namespace, p.Name, ready, total, podStatus(p), restarts, age(p.CreatedAt, now))
	}
	tw.Flush()
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	safeln(w, rows[0])
	for i, p := range pods {
		safeln(w, rows[i+1])
		for _, c := range p.Containers {
			readiness := "ready"
			if !c.Ready {
				readiness = "not ready"
			}
			name := c.Name
			if c.Kind != "" {
				name += " (" + c.Kind + ")"
			}
			if c.Kind == "init" { // run to completion: readiness means nothing
				state := c.State
				if c.Reason != "" {
					state = c.Reason
				}
				safef(w, "    %s: %s, restarts %d\n", name, strings.ToLower(state), c.RestartCount)
				continue
			}
			safef(w, "    %s: %s, %s, restarts %d — %s\n", name, readiness, c.State, c.RestartCount, probeSummary(c, now))
		}
		for _, problem := range p.Problems {
			safef(w, "    ! %s\n", terminalSafe(problem))
		}
	}
}

// podStatus is kubectl's STATUS column in short: Init:N/M while init
// containers run, Completed or Error once the pod is over, else the first
// reason a container is not running, else Running.
func podStatus(p api.Pod) string {
	if len(p.Problems) > 0 {
		return "InvalidProbeConfig"
	}
	for _, c := range p.Containers {
		if len(c.Problems) > 0 {
			return "InvalidProbeConfig"
		}
	}
	switch p.Phase {
	case "Succeeded":
		return "Completed"
	case "Failed":
		return "Error"
	}
	inits, initialized := 0, 0
	for _, c := range p.Containers {
		switch {
		case c.Kind == "":
		case c.Reason == "Completed" || (c.Kind == "sidecar" && c.Started):
			inits++
			initialized++
		default:
			inits++
		}
	}
	if p.Phase == "Pending" && initialized < inits {
		return fmt.Sprintf("Init:%d/%d", initialized, inits)
	}
	for _, c := range p.Containers {
		if c.Kind == "" && c.State != "Running" {
			return c.State
		}
	}
	return "Running"
}

// probeSummary is the container's probes in one line, like describe's
// "Liveness: … Readiness: …", with the last results instead of the specs.
func probeSummary(c api.Container, now time.Time) string {
	if len(c.Problems) > 0 {
		return c.Problems[0]
	}
	if c.WaitingUntil != nil {
		return "back-off until " + c.WaitingUntil.Local().Format("15:04:05")
	}
	names := make([]string, 0, len(c.Probes))
	for n := range c.Probes {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		p := c.Probes[n]
		if p.LastProbeTime == nil && p.Error == "" {
			parts = append(parts, n+" not run yet")
			continue
		}
		s := n + " " + p.Result
		if p.Consecutive < p.Threshold {
			s += fmt.Sprintf(" (%d/%d)", p.Consecutive, p.Threshold) // below the threshold: no change yet
		}
		if p.LastProbeTime != nil {
			s += " " + age(*p.LastProbeTime, now) + " ago"
		}
		if detail := firstLine(p.Error + p.Output); p.Result != "success" && detail != "" {
			s += ": " + detail
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no probes"
	}
	return strings.Join(parts, " · ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return terminalSafe(s)
}

// safef is fmt.Fprintf for lines that carry what workloads and users
// supplied (names, probe output, errors, arguments): every string or error
// argument goes through terminalSafe; the format is ours.
func safef(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, safeArgs(args)...)
}

// safeln is safef for fmt.Fprintln.
func safeln(w io.Writer, args ...any) {
	fmt.Fprintln(w, safeArgs(args)...)
}

func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = terminalSafe(v)
		case error:
			out[i] = terminalSafe(v.Error())
		default:
			out[i] = a
		}
	}
	return out
}

// terminalSafe shows probe output and other text from containers without
// letting the terminal interpret it: control characters (escape sequences
// that would move the cursor, retitle the window or hide text) are printed
// as \xNN, line breaks and tabs as spaces.
func terminalSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) || r == utf8.RuneError:
			safef(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// age renders a duration as kubectl does: 42s, 5m3s, 3h12m, 2d4h.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours()/24), int(d.Hours())%24)
	}
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("events", eventsHelp)
	server := fs.String("server", defaultServer, "the agent's state API: its --listen address as host:port (or :port), http://host:port, https://[user:password@]host:port, or unix:///path")
	follow := fs.Bool("f", false, "keep printing new events")
	since := fs.Duration("since", 0, "only events of the last DURATION (e.g. 10m; default: all kept)")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	query := url.Values{}
	if *since > 0 {
		query.Set("since", time.Now().Add(-*since).UTC().Format(time.RFC3339))
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
	if !*follow {
		var list api.EventList
		if err := apiGet(ctx, *server, "/api/v1/events?"+query.Encode(), &list); err != nil {
			return err
		}
		for _, e := range list.Events {
			printEvent(tw, e)
		}
		return tw.Flush()
	}
	tw.Flush()
	if *since == 0 {
		query.Set("since", time.Unix(0, 0).UTC().Format(time.RFC3339)) // the backlog first
	}
	query.Set("watch", "1")
	return followEvents(ctx, *server, query, stdout)
}

func followEvents(ctx context.Context, server string, query url.Values, out io.Writer) error {
	resp, err := apiRequest(ctx, server, "/api/v1/events?"+query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		printEvent(tw, e)
		tw.Flush()
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream from %s: %w", server, err)
	}
	return errors.New("the agent closed the event stream (did it stop?)")
}

func printEvent(w io.Writer, e events.Event) {
	object := e.Namespace + "/" + e.Pod
	if e.Container != "" {
		object += "/" + e.Container
	}
	// A probe failure's count against its threshold (kubernetes#115823)
	// beside kubelet's message, which stays as kubelet words it.
	count := ""
	if e.Threshold > 0 {
		count = fmt.Sprintf("%d/%d", e.Count, e.Threshold)
	}
	safef(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05"), e.Type, e.Reason, terminalSafe(object), count, terminalSafe(strings.TrimSpace(e.Message)))
}
