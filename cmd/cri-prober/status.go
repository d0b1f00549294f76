package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/events"
)

// defaultServer is --server's default: "" is where the agent is found
// (defaultServerURL).
const defaultServer = ""

func newStatusCommand() *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print a running agent's pods, readiness, restarts and last probe results",
		Long: `Prints a running agent's pods and containers: readiness, status, restarts
and age as kubectl get pods shows them, and under each pod one line per
container with its probes' last results. Pods of every namespace are shown
unless -n picks one (the node's view, as crictl pods). With -o wide, also
what kubectl describe says: the pod's conditions, why a container waits
and how it and its last instance ended (the termination message's first
line). Under the pods, what the agent keeps on the node: disk pressure,
the image filesystem's use, the bytes of container logs kept (with -o wide,
each container's) and what was reclaimed since it started. With -w, prints
a pod's row again whenever it changes, as kubectl get -w.`,
		Example: `  cri-prober status
  cri-prober status -n shop
  cri-prober status -o wide
  cri-prober status -o yaml
  cri-prober status -w
  cri-prober status --server 10.0.0.5:9440`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output, readFormats...); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	addServerFlag(fs, &o.server)
	o.namespaces.register(cmd, "pods")
	fs.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each pod again when it changes")
	addOutputFlag(cmd, &o.output, readFormats...)
	return cmd
}

type statusOptions struct {
	server     string
	client     *api.Client // of server, once run
	namespaces namespaceFilter
	watch      bool
	output     string
}

// list is the agent's pods (of -n's namespace), and the runtime error it
// reports, if any, on stderr.
func (o *statusOptions) list(ctx context.Context, stderr io.Writer) (api.PodList, error) {
	list, err := o.client.Pods(ctx)
	if err != nil {
		return list, err
	}
	pods := list.Pods[:0]
	for _, p := range list.Pods {
		if o.namespaces.matches(p.Namespace) {
			pods = append(pods, p)
		}
	}
	list.Pods = pods
	if list.RuntimeError != "" {
		safef(stderr, "WARNING: %s; showing the pods as last seen\n", list.RuntimeError)
	}
	return list, nil
}

func (o *statusOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	o.client = agentClient(o.server)
	list, err := o.list(ctx, stderr)
	if err != nil {
		return err
	}
	pods := list.Pods
	if structured(o.output) {
		if o.watch {
			for _, p := range pods {
				if err := printStreamed(stdout, o.output, p); err != nil {
					return err
				}
			}
		} else if err := printObject(stdout, o.output, statusObject{PodList: list, Node: o.node(ctx)}); err != nil {
			return err
		}
	} else {
		printStatus(stdout, pods, time.Now(), o.output == outputWide, true)
		o.printKills(ctx, stdout)
		if r := o.node(ctx); r != nil {
			safeln(stdout)
			printNode(stdout, *r, o.namespaces, time.Now(), o.output == outputWide)
		}
	}
	if !o.watch {
		return nil
	}
	return o.watchPods(ctx, pods, stdout, stderr)
}

// printKills says, under the pods, whether kills are paused and which
// wait (nothing from an agent that does not say: one without a
// restarter, or older).
func (o *statusOptions) printKills(ctx context.Context, stdout io.Writer) {
	st, err := o.client.Kills(ctx)
	if err != nil {
		return
	}
	if st.Paused != nil || len(st.Deferred) > 0 {
		safeln(stdout)
		printKills(stdout, st, time.Now(), false)
	}
}

// statusObject is what status -o json|yaml prints: the pod list, and
// what the agent keeps on the node.
type statusObject struct {
	api.PodList
	Node *api.NodeReport `json:"node,omitempty"`
}

// node is what the agent keeps on the node (nil from an agent that keeps
// nothing there: one without pod sync, or older).
func (o *statusOptions) node(ctx context.Context) *api.NodeReport {
	r, err := o.client.Node(ctx)
	if err != nil {
		return nil
	}
	return &r
}

// printNode prints what the agent keeps on the node, as kubectl describe
// node prints its conditions and capacity; wide adds each container's log
// bytes (of -n's namespace).
func printNode(w io.Writer, r api.NodeReport, namespaces namespaceFilter, now time.Time, wide bool) {
	safeln(w, "Node:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, l := range r.Lines(now) {
		safef(tw, "  %s:\t%s\n", l.Label, l.Text)
	}
	tw.Flush()
	if !wide {
		return
	}
	safeln(w, "  Log bytes by container:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range r.ContainerLogs.Containers {
		if namespaces.matches(c.Namespace) {
			safef(tw, "    %s/%s\t%s\t%s\t%s\n", c.Namespace, c.Pod, c.Container, shortID(c.ContainerID), api.Size(c.Bytes))
		}
	}
	tw.Flush()
}

// watchPods prints every pod whose state changed, each time the agent
// records an event (every change it makes or sees comes with one), as
// kubectl get -w prints changed objects.
func (o *statusOptions) watchPods(ctx context.Context, last []api.Pod, stdout, stderr io.Writer) error {
	seen := map[string]string{}
	remember := func(p api.Pod) bool {
		key, state := p.Namespace+"/"+p.Name, watchState(p)
		if seen[key] == state {
			return false
		}
		seen[key] = state
		return true
	}
	for _, p := range last {
		remember(p)
	}
	return o.client.WatchEvents(ctx, time.Time{}, func(events.Event) error {
		list, err := o.list(ctx, stderr)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped (Ctrl-C) while listing: a clean end, as between events
			}
			return err
		}
		var changed []api.Pod
		for _, p := range list.Pods {
			if remember(p) {
				changed = append(changed, p)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		if structured(o.output) {
			for _, p := range changed {
				if err := printStreamed(stdout, o.output, p); err != nil {
					return err
				}
			}
			return nil
		}
		printStatus(stdout, changed, time.Now(), o.output == outputWide, false)
		return nil
	})
}

// watchState is what of a pod status -w prints again when it changes: its
// status, readiness, restarts and each probe's result, not the times of the
// runs (every run would print the pod again).
func watchState(p api.Pod) string {
	var b strings.Builder
	ready, total := p.ReadyCount()
	fmt.Fprintf(&b, "%s %d/%d %d %q %q", p.Status(), ready, total, p.Restarts(), p.IP, p.Problems)
	for _, c := range p.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, c := range p.Containers {
		fmt.Fprintf(&b, "|%s %s %s %v %v %d %q", c.Name, c.StateText(), c.Reason, c.Ready, c.Started, c.RestartCount, c.Problems)
		kinds := make([]string, 0, len(c.Probes))
		for kind := range c.Probes {
			kinds = append(kinds, kind)
		}
		sort.Strings(kinds)
		for _, kind := range kinds {
			fmt.Fprintf(&b, " %s=%s/%s", kind, c.Probes[kind].Result, c.Probes[kind].Stable)
		}
	}
	return b.String()
}

// printStatus prints pods as kubectl get pods does (wide: with IP, UID
// and where the specs came from), each with its containers below; wide
// adds what kubectl describe says of them: the pod's conditions, why it
// failed, why a container waits and how its last instance ended (its
// termination message's first line).
func printStatus(w io.Writer, pods []api.Pod, now time.Time, wide, header bool) {
	// The pod rows are aligned as a table; each pod's container lines go
	// under its row, outside the alignment (they are long).
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 8, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tREADY\tSTATUS\tRESTARTS\tAGE\tIP\tSANDBOX\tREADINESS GATES\tSPEC")
	} else {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tREADY\tSTATUS\tRESTARTS\tAGE")
	}
	for _, p := range pods {
		ready, total := p.ReadyCount()
		restarts := p.RestartsText(now)
		if wide {
			safef(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, ready, total, p.Status(), restarts, api.Age(p.CreatedAt, now), dash(p.IP), shortID(p.SandboxID),
				p.ReadinessGatesText(), dash(p.Source))
			continue
		}
		safef(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", p.Namespace, p.Name, ready, total, p.Status(), restarts, api.Age(p.CreatedAt, now))
	}
	tw.Flush()
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	if header {
		safeln(w, rows[0])
	}
	for i, p := range pods {
		safeln(w, rows[i+1])
		if wide {
			printPodDetail(w, p)
		}
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
				safef(w, "    %s: %s, restarts %d\n", name, strings.ToLower(c.StateText()), c.RestartCount)
			} else {
				safef(w, "    %s: %s, %s, restarts %d — %s\n", name, readiness, c.StateText(), c.RestartCount, probeSummary(c, now))
			}
			if wide {
				printContainerDetail(w, c, now)
			}
		}
		for _, problem := range p.Problems {
			safef(w, "    ! %s\n", terminalSafe(problem))
		}
	}
}

// shownDetail bounds what status -o wide prints of a message a workload
// may control (a termination message), on one line.
const shownDetail = 200

// printPodDetail prints why a pod failed as a whole and its conditions,
// as kubectl describe's Status, Reason, Message and Conditions.
func printPodDetail(w io.Writer, p api.Pod) {
	if p.Reason != "" {
		safef(w, "    reason: %s: %s\n", p.Reason, api.Shown(p.Message, shownDetail))
	}
	if len(p.Conditions) == 0 {
		return
	}
	parts := make([]string, 0, len(p.Conditions))
	for _, c := range p.Conditions {
		s := c.Type + "=" + c.Status
		if why := strings.TrimSuffix(c.Reason+": "+c.Message, ": "); why != "" {
			s += " (" + api.Shown(why, shownDetail) + ")"
		}
		parts = append(parts, s)
	}
	safef(w, "    conditions: %s\n", strings.Join(parts, ", "))
}

// printContainerDetail prints why a container waits (or how it ended) and
// how its last instance ended, as kubectl describe's State and Last State.
func printContainerDetail(w io.Writer, c api.Container, now time.Time) {
	st := c.Status.State
	switch {
	case st.Waiting != nil && st.Waiting.Message != "":
		safef(w, "      waiting: %s\n", api.Shown(firstLineOf(st.Waiting.Message), shownDetail))
	case st.Terminated != nil:
		safef(w, "      terminated: %s\n", termination(st, now))
	}
	if c.Status.LastState.Terminated != nil {
		safef(w, "      last state: %s\n", termination(c.Status.LastState, now))
	}
}

// termination is an exit in a line: its reason and code, when it ended,
// and its message's first line (the termination message).
func termination(s api.ContainerState, now time.Time) string {
	t := s.Terminated
	text := s.Text()
	if t.FinishedAt != nil {
		text += ", finished " + api.Age(*t.FinishedAt, now) + " ago"
	}
	if msg := firstLineOf(t.Message); msg != "" {
		text += ": " + msg
	}
	return api.Shown(text, shownDetail)
}

// firstLineOf is the first line of s that says something.
func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
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
			s += " " + api.Age(*p.LastProbeTime, now) + " ago"
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

// terminalSafe shows text a workload or a user supplied without letting
// the terminal act on it (api.Printable: the status page's rule too).
func terminalSafe(s string) string { return api.Printable(s) }

func newEventsCommand() *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print (or follow with -w) a running agent's events",
		Long: `Prints a running agent's recent events (probe failures, kills, restarts,
back-offs), oldest first, in kubelet's words; with -w (or -f), keeps
printing new ones as they happen, as kubectl events -w.`,
		Example: `  cri-prober events
  cri-prober events --since 10m
  cri-prober events -w
  cri-prober events -n shop -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output, readFormats...); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	addServerFlag(fs, &o.server)
	fs.BoolVarP(&o.follow, "watch", "w", false, "after the list, keep printing new events")
	fs.BoolVarP(&o.follow, "follow", "f", false, "the same as --watch")
	fs.DurationVar(&o.since, "since", 0, "only events of the last `DURATION` (e.g. 10m; default: all kept)")
	o.namespaces.register(cmd, "events")
	addOutputFlag(cmd, &o.output, readFormats...)
	return cmd
}

type eventsOptions struct {
	server     string
	follow     bool
	since      time.Duration
	namespaces namespaceFilter
	output     string
}

func (o *eventsOptions) run(ctx context.Context, stdout io.Writer) error {
	var since time.Time
	if o.since > 0 {
		since = time.Now().Add(-o.since)
	}
	print := func(e events.Event) error {
		if !o.namespaces.matches(e.Namespace) {
			return nil
		}
		if structured(o.output) {
			return printStreamed(stdout, o.output, e)
		}
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		printEvent(tw, e, o.output == outputWide)
		return tw.Flush()
	}
	client := agentClient(o.server)
	if !o.follow {
		list, err := client.Events(ctx, since)
		if err != nil {
			return err
		}
		kept := list.Events[:0]
		for _, e := range list.Events {
			if o.namespaces.matches(e.Namespace) {
				kept = append(kept, e)
			}
		}
		list.Events = kept
		if structured(o.output) {
			return printObject(stdout, o.output, list)
		}
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		printEventHeader(tw)
		for _, e := range list.Events {
			printEvent(tw, e, o.output == outputWide)
		}
		return tw.Flush()
	}
	if !structured(o.output) {
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		printEventHeader(tw)
		tw.Flush()
	}
	if o.since == 0 {
		since = time.Unix(0, 0) // the backlog first
	}
	return client.WatchEvents(ctx, since, print)
}

func printEventHeader(w io.Writer) {
	fmt.Fprintln(w, "TIME\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
}

// printEvent prints one event row (wide: with the date, and the message
// whole rather than its first line).
func printEvent(w io.Writer, e events.Event, wide bool) {
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
	when := e.Time.Local().Format("15:04:05")
	if wide {
		when = e.Time.Local().Format("2006-01-02T15:04:05.000")
	}
	safef(w, "%s\t%s\t%s\t%s\t%s\t%s\n", when, e.Type, e.Reason, terminalSafe(object), count, terminalSafe(strings.TrimSpace(e.Message)))
}
