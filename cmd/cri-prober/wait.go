package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
)

func newWaitCommand() *cobra.Command {
	var o waitOptions
	cmd := &cobra.Command{
		Use:   "wait POD --for ready|started|healthy",
		Short: "Wait until a pod is ready, started or healthy (for CI scripts)",
		Long: `Waits until the condition holds for the pod (or for --container only) and
exits 0. By default it runs the pod's probes itself, with their own periods
and thresholds, as the agent would (no agent needed, nothing is restarted);
with --server it asks a running agent instead. A pod that does not exist
yet is waited for. On a terminal it shows what it waits for, the current
state and the time spent.

POD is NAMESPACE/NAME, or NAME with -n NAMESPACE.

  ready    every container ready: running, started, readiness passed (or no
           readiness probe)
  started  every container started: running, startup probe passed (or none)
  healthy  every container started and its liveness probe (if any) passing

Exit codes, for scripts:
  0    the condition holds
  1    --timeout passed first (the last probe results are printed)
  2    bad arguments, the runtime or agent is unreachable, a bad manifest
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (a cancelled CI step):
       never 0, the condition was not seen to hold

Probe specs come from --pod-manifests or the containers' annotations.`,
		Example: `  crictl runp pod.json && crictl create … && crictl start … &&
    cri-prober wait ci/web --for ready --timeout 60s
  cri-prober wait demo/web --for healthy -c web --pod-manifests examples/demo
  cri-prober wait -n shop api --for ready --server 127.0.0.1:9440`,
		Args: rangeArgs(0, 1, "POD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return answerOrTwo(o.run(cmd, args)) // a timeout is the wait's answer (1)
		},
	}
	fs := cmd.Flags()
	o.registerAs(fs, "connect-timeout")
	o.podRef.register(fs)
	fs.StringVar(&o.cond, "for", "ready", "the condition: ready, started or healthy")
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{"ready", "started", "healthy"}, cobra.ShellCompDirectiveNoFileComp))
	registerPodAndContainer(fs, &o.pod, &o.container, "only this container, by name (default: all of the pod's)")
	fs.StringVar(&o.manifests, "pod-manifests", "", "manifest `directory` with the pod's probe specs (else annotations)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long (exit code 1)")
	fs.StringVarP(&o.server, "server", "s", "", "ask the agent at this state API address (as --server of status) instead of probing here")
	fs.StringVar(&o.progress, "progress", "auto", "the progress line on stderr: auto (when stderr is a terminal), always, never")
	o.policy.registerAnnotationHosts(fs)
	o.policy.registerDestinations(fs)
	o.policy.registerFailureEvents(fs)
	return cmd
}

type waitOptions struct {
	runtimeFlags
	podRef
	cond, pod, container, manifests, server, progress string
	timeout                                           time.Duration
	policy                                            probePolicy
}

func (o *waitOptions) run(cmd *cobra.Command, args []string) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	arg := o.pod
	switch {
	case len(args) == 1 && o.pod != "":
		return usageErrorf(cmd, "the pod is given twice (argument and --pod): give one")
	case len(args) == 1:
		arg = args[0]
	case arg == "":
		return usageErrorf(cmd, "which pod? give it as NAMESPACE/NAME, or NAME with -n")
	}
	namespace, name, err := o.podRef.parse(cmd, arg)
	if err != nil {
		return err
	}
	holds, ok := waitConditions[o.cond]
	if !ok {
		return usageErrorf(cmd, "--for %q: want ready, started or healthy", o.cond)
	}
	show, err := progressWanted(o.progress, stderr)
	if err != nil {
		return usageErrorf(cmd, "--progress: %v", err)
	}
	if o.server != "" && o.manifests != "" {
		return usageErrorf(cmd, "--pod-manifests is for probing here; with --server the agent uses its own")
	}
	pod := namespace + "/" + name
	var state func(ctx context.Context) (waitState, error)
	// Its own engine tells of its changes (changed). An agent over HTTP is
	// asked every half second: its event stream does not tell of every
	// change (a pod or a container seen to appear), and many CI jobs may
	// wait on one agent at once, beyond its cap of event streams.
	var changed <-chan struct{}
	every := 500 * time.Millisecond // the remote asks; locally, the progress line's clock
	if o.server != "" {
		client := agentClient(o.server)
		state = func(ctx context.Context) (waitState, error) { return agentWaitState(ctx, client, namespace, name) }
	} else {
		engine, stop, err := o.startEngine(ctx, namespace, name)
		if err != nil {
			return err
		}
		defer stop()
		sub := engine.Subscribe()
		defer sub.Close()
		changed = sub.Changed()
		state = func(context.Context) (waitState, error) {
			report, found := engine.ReportPod(namespace, name)
			if !found {
				return waitState{}, nil
			}
			return podWaitState(api.PodFromReport(report)), nil
		}
	}

	line := newProgressLine(stderr, show)
	defer line.clear()
	started := time.Now()
	var check <-chan time.Time
	if o.server != "" || show {
		t := time.NewTicker(every)
		defer t.Stop()
		check = t.C
	}
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	var last waitState
	for {
		st, err := state(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			line.clear()
			return err
		case err == nil:
			last = st
			if st.holds(holds, o.container) {
				line.clear()
				safef(stdout, "pod %s is %s\n", pod, o.cond)
				return nil
			}
		}
		line.show(fmt.Sprintf("waiting for %s to be %s: %s (%s)", pod, o.cond, last.summary(o.container), time.Since(started).Round(time.Second)))
		select {
		case <-ctx.Done():
			line.clear()
			return interruptedWait(context.Cause(ctx), pod, o.cond)
		case <-deadline.C:
			line.clear()
			if st, err := state(ctx); err == nil {
				last = st
			}
			safef(stdout, "timed out after %s: pod %s is not %s\n", o.timeout, pod, o.cond)
			last.print(stdout)
			return errProblemsFound
		case <-changed:
		case <-check:
		}
	}
}

// startEngine runs the pod's probes here, quietly: the result is the exit
// code. The engine stops only after the last results are read (stop):
// its workers forget their results as they stop.
func (o *waitOptions) startEngine(ctx context.Context, namespace, name string) (*agent.Agent, func(), error) {
	client, err := o.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg := agent.Config{
		Client: client, Poller: cri.PollerConfig{RelistPeriod: 500 * time.Millisecond}, EventsAddress: eventsAddress("", client),
		Recorder: quiet{},
		Prober: prober.Config{
			PodFilter:       func(ns, n string) bool { return ns == namespace && n == name },
			NoStartupJitter: true,
		},
	}
	o.policy.apply(&cfg)
	if o.manifests != "" {
		dir := manifests.NewDir(o.manifests, nil)
		dir.Reload()
		_, errs := dir.Pods()
		for _, e := range errs {
			if e.Namespace == namespace && e.Pod == name {
				client.Close()
				return nil, nil, fmt.Errorf("the pod's manifest is invalid: %v", e)
			}
		}
		cfg.Manifests = dir
	}
	engine, err := agent.New(ctx, cfg)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { engine.Run(ctx) })
	return engine, func() {
		cancel()
		wg.Wait()
		client.Close()
	}, nil
}

// interruptedWait is the error of a wait given up before the condition
// held: the signal's exit code, never 0.
func interruptedWait(cause error, pod, cond string) error {
	code := 130
	var sig interrupted
	if errors.As(cause, &sig) {
		code = sig.exitCode()
	}
	return withCode(code, fmt.Errorf("%v while waiting: pod %s was not seen %s", cause, pod, cond))
}

// waitState is what wait reads of a pod, from its own engine or from an
// agent, so that both answer by the same rules.
type waitState struct {
	found      bool
	problems   []string
	containers []waitContainer
}

type waitContainer struct {
	name, state      string
	init             bool // init containers never count, as in kubelet's ContainersReady
	present          bool // an instance exists
	started, ready   bool
	live             bool // no spec problem and every liveness probe passing
	problems, probes []string
}

var waitConditions = map[string]func(waitContainer) bool{
	"ready":   func(c waitContainer) bool { return c.ready },
	"started": func(c waitContainer) bool { return c.started },
	"healthy": func(c waitContainer) bool { return c.started && c.live },
}

// holds reports whether ok holds for every container of the pod (or only
// the one named), and there is at least one.
func (s waitState) holds(ok func(waitContainer) bool, only string) bool {
	seen := false
	for _, c := range s.containers {
		if (only != "" && c.name != only) || (only == "" && c.init) {
			continue
		}
		if !c.present || !ok(c) {
			return false
		}
		seen = true
	}
	return seen
}

// summary is the progress line's state: each container's readiness.
func (s waitState) summary(only string) string {
	if !s.found {
		return "no such pod yet"
	}
	var parts []string
	for _, c := range s.containers {
		if (only != "" && c.name != only) || (only == "" && c.init) {
			continue
		}
		st := c.state
		switch {
		case !c.present:
			st = "not created"
		case c.ready:
			st += ", ready"
		case c.started:
			st += ", not ready"
		default:
			st += ", not started"
		}
		parts = append(parts, c.name+" "+st)
	}
	if len(parts) == 0 {
		return "no container yet"
	}
	return terminalSafe(strings.Join(parts, "; "))
}

func (s waitState) print(w io.Writer) {
	if !s.found {
		safeln(w, "  the pod does not exist (see cri-prober pods)")
		return
	}
	for _, problem := range s.problems {
		safef(w, "  ! %s\n", problem)
	}
	for _, c := range s.containers {
		safef(w, "  %s: %s, started=%v, ready=%v\n", c.name, c.state, c.started, c.ready)
		for _, problem := range c.problems {
			safef(w, "    ! %s\n", problem)
		}
		for _, p := range c.probes {
			safef(w, "    %s\n", p)
		}
	}
}

// agentWaitState asks a running agent; a pod it does not know is not
// found yet (waited for), any other answer but 200 is an error.
func agentWaitState(ctx context.Context, client *api.Client, namespace, name string) (waitState, error) {
	p, err := client.Pod(ctx, namespace, name)
	var status *api.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return waitState{}, nil
	}
	if err != nil {
		return waitState{}, err
	}
	return podWaitState(p), nil
}

// podWaitState reads a pod as the API shows it: an agent's answer, or the
// wait's own engine's report (api.PodFromReport), judged alike.
func podWaitState(p api.Pod) waitState {
	s := waitState{found: true, problems: p.Problems}
	for _, c := range p.Containers {
		wc := waitContainer{name: c.Name, state: c.State, init: c.Kind == "init", present: c.ID != "", started: c.Started, ready: c.Ready,
			live: len(c.Problems) == 0, problems: c.Problems}
		kinds := make([]string, 0, len(c.Probes))
		for kind := range c.Probes {
			kinds = append(kinds, kind)
		}
		sort.Strings(kinds)
		for _, kind := range kinds {
			pr := c.Probes[kind]
			if kind == "liveness" && (pr.LastProbeTime == nil || pr.Result == string(results.OutcomeFailure) || pr.Stable != results.Success.String()) {
				wc.live = false
			}
			if pr.LastProbeTime == nil {
				wc.probes = append(wc.probes, kind+": not run yet")
				continue
			}
			wc.probes = append(wc.probes, fmt.Sprintf("%s: %s (%d/%d): %s", kind, pr.Result, pr.Consecutive, pr.Threshold, strings.TrimSpace(pr.Output+pr.Error)))
		}
		s.containers = append(s.containers, wc)
	}
	return s
}

// quiet drops every event: wait's result is its exit code.
type quiet struct{}

func (quiet) Record(events.Event) {}
