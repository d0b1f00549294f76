package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/podfs"
	"github.com/cri-prober/cri-prober/pkg/podmaker"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const playLong = `Makes the pods of Pod manifests through the runtime, as kubelet makes
static pods (named <name>-<node>), runs them with kubelet's behaviour —
init containers, sidecars, probes, postStart and preStop hooks, restarts
with back-off — and follows them on the terminal: each pod when it
changes (as status -w) and every event (as events -w).

Ctrl-C or --timeout stops them as kubelet deletes a pod (preStop hooks,
grace periods) and removes them, unless --keep. Pods kept run on, but
nothing probes or restarts them any more: play the same files again to
take them over, or remove them with --down.

--wait ready|started|healthy exits as soon as every pod holds the
condition, leaving the pods running (as docker compose up --wait), with
the exit codes of wait:
  0    the condition holds
  1    --timeout passed first (the pods are then removed, unless --keep)
  2    bad arguments or manifests, the runtime unreachable
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM

A file's pods are the same pods as long as the file and the node stay the
same: an edited manifest is a new pod, as under kubelet.`

const playExample = `  cri-prober play pod.yaml
  cri-prober play -f web.yaml -f db.yaml --timeout 5m
  cri-prober play pod.yaml --wait ready --timeout 2m && ./run-tests.sh; cri-prober play --down pod.yaml
  cat pod.yaml | cri-prober play -f -`

type playOptions struct {
	runtimeFlags
	node    nodeFlags
	files   []string
	cond    string
	timeout time.Duration
	keep    bool
	down    bool
	output  string
	policy  probePolicy
	podSync podSyncFlags
}

func newPlayCommand() *cobra.Command {
	var o playOptions
	cmd := &cobra.Command{
		Use:     "play FILE...",
		Short:   "Make, run and follow the pods of Pod manifests, as kubelet runs static pods",
		Long:    playLong,
		Example: playExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := o.run(cmd, args)
			if errors.Is(err, errProblemsFound) {
				return err // the wait's answer (1)
			}
			return answerOrTwo(err)
		},
	}
	fs := cmd.Flags()
	o.registerAs(fs, "connect-timeout")
	o.node.register(fs)
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "a manifest `file` (several allowed; - reads standard input), as kubectl's -f")
	fs.StringVar(&o.cond, "wait", "", "exit once every pod is ready, started or healthy (as wait --for), leaving the pods running")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop and remove the pods after this long (with --wait: give up waiting, exit code 1); 0: until Ctrl-C")
	fs.BoolVar(&o.keep, "keep", false, "leave the pods when play ends (they run on unprobed); remove them later with --down")
	fs.BoolVar(&o.down, "down", false, "stop and remove the pods of the files that an earlier play --keep or --wait left, then exit (as podman kube down)")
	fs.StringVarP(&o.output, "output", "o", outputTable, "how pods are shown as they change: table or wide")
	o.policy.registerDestinations(fs)
	o.policy.registerFailureEvents(fs)
	o.podSync.register(fs)
	_ = cmd.RegisterFlagCompletionFunc("wait", cobra.FixedCompletions([]string{"ready", "started", "healthy"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (o *playOptions) run(cmd *cobra.Command, args []string) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	files := append(append([]string(nil), args...), o.files...)
	if len(files) == 0 {
		return usageErrorf(cmd, "which pods? give manifest files, as arguments or with -f (- for standard input)")
	}
	var holds func(waitContainer) bool
	if o.cond != "" {
		var ok bool
		if holds, ok = waitConditions[o.cond]; !ok {
			return usageErrorf(cmd, "--wait %q: want ready, started or healthy", o.cond)
		}
	}
	if o.output != outputTable && o.output != outputWide {
		return usageErrorf(cmd, "--output %q: want table or wide", o.output)
	}
	switch {
	case o.down && (o.cond != "" || o.keep):
		return usageErrorf(cmd, "--down removes pods: it takes neither --wait nor --keep")
	case o.timeout < 0:
		return usageErrorf(cmd, "--timeout must be positive (0: until Ctrl-C)")
	}
	if err := o.podSync.check(); err != nil {
		return usageError{cmd: cmd, err: err}
	}
	node, err := o.node.node("")
	if err != nil {
		return usageError{cmd: cmd, err: fmt.Errorf("the node: %w", err)}
	}
	manifests, err := loadPlayed(cmd, files, node.Name, stderr)
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("v") {
		o.verbosity = -1 // the terminal shows the events; the log only errors
	}
	client, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()

	uids := map[string]bool{}
	for _, m := range manifests {
		uids[m.UID] = true
	}
	owned := agent.NewPodSet()
	if !o.down {
		owned.Set(manifests)
	}
	out := &playPrinter{w: stdout, wide: o.output == outputWide, seen: map[string]string{}, uids: uids}
	cfg := agent.Config{
		Client: client, Poller: cri.PollerConfig{RelistPeriod: 500 * time.Millisecond}, EventsAddress: eventsAddress("", client),
		Restart: restart.Config{Mode: restart.Recreate}, Recorder: out, StaticPods: owned, Node: node,
		Maker:  podmaker.Config{MatchRecord: func(r podfs.Record) bool { return uids[r.UID] }},
		Prober: prober.Config{NoStartupJitter: true},
	}
	o.policy.apply(&cfg)
	o.podSync.apply(&cfg.Restart)
	engine, err := agent.New(ctx, cfg)
	if err != nil {
		return err
	}
	out.report = func() []pods.PodReport { return engine.Report() }

	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { engine.Run(engineCtx) })
	defer func() {
		stopEngine()
		wg.Wait()
	}()

	if o.down {
		return removePlayed(ctx, engine, owned, uids, stdout)
	}
	result := o.follow(ctx, engine, holds, out, stdout)
	if result.keep {
		return result.err
	}
	safef(stdout, "Removing the pods (preStop hooks, grace periods)…\n")
	if err := removePlayed(context.WithoutCancel(ctx), engine, owned, uids, stdout); err != nil {
		return err
	}
	return result.err
}

// playResult is how following ended: with what error, and whether the
// pods stay.
type playResult struct {
	err  error
	keep bool
}

// follow prints the pods as they change until the condition holds, the
// timeout passes or the user interrupts.
func (o *playOptions) follow(ctx context.Context, engine *agent.Agent, holds func(waitContainer) bool, out *playPrinter, stdout io.Writer) playResult {
	var deadline <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		deadline = t.C
	}
	sub := engine.Subscribe()
	defer sub.Close()
	for {
		out.printChanged()
		if holds != nil && out.allHold(holds) {
			safef(stdout, "every pod is %s\n", o.cond)
			return playResult{keep: true}
		}
		select {
		case <-ctx.Done():
			if holds != nil {
				return playResult{err: interruptedWait(context.Cause(ctx), "of the files", o.cond), keep: o.keep}
			}
			return playResult{keep: o.keep}
		case <-deadline:
			if holds != nil {
				safef(stdout, "timed out after %s: not every pod is %s\n", o.timeout, o.cond)
				out.printNot(holds)
				return playResult{err: errProblemsFound, keep: o.keep}
			}
			return playResult{keep: o.keep}
		case <-sub.Changed():
		}
	}
}

// loadPlayed reads the files as static pods of node (- is standard
// input); a bad file is a usage error naming it, its line and field, and
// a pod defined twice is one as in a manifest directory.
func loadPlayed(cmd *cobra.Command, files []string, node string, stderr io.Writer) ([]*spec.Pod, error) {
	for _, f := range files {
		if f == "-" {
			continue
		}
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			return nil, usageErrorf(cmd, "%s is a directory: give its manifest files (run --static-pod-path serves a directory)", f)
		}
	}
	r, err := manifests.LoadFiles(files, cmd.InOrStdin(), manifests.AsStatic(spec.Static{NodeName: node}))
	if err != nil {
		return nil, err
	}
	for _, w := range r.Warnings {
		safef(stderr, "warning: %s\n", w.Error())
	}
	if len(r.Errors) > 0 {
		for _, e := range r.Errors {
			safef(stderr, "%s\n", e.Error())
		}
		return nil, usageErrorf(cmd, "%d problem(s) in the manifests: nothing was made; fix them and play again", len(r.Errors))
	}
	if len(r.Pods) == 0 {
		return nil, usageErrorf(cmd, "no Pod manifest in %v", files)
	}
	return r.Pods, nil
}

// removePlayed stops and removes the pods of uids as kubelet removes a
// pod whose manifest is gone (their manifests are taken away from the
// engine), and waits until none is left and the runtime answers, looking
// again at each change and each listing of the runtime.
func removePlayed(ctx context.Context, engine *agent.Agent, owned *agent.PodSet, uids map[string]bool, stdout io.Writer) error {
	sub := engine.Subscribe()
	defer sub.Close()
	owned.Set(nil)
	for {
		left := 0
		for _, p := range engine.View().Pods() {
			if uids[p.UID] {
				left++
			}
		}
		if left == 0 && engine.Health() == nil {
			safef(stdout, "removed\n")
			return nil
		}
		select {
		case <-ctx.Done():
			return interruptedWait(context.Cause(ctx), "of the files", "removed")
		case <-sub.Changed():
		case <-sub.Listed():
		}
	}
}

// playPrinter prints the engine's events as they happen and the pods of
// the files when they change, one writer for both.
type playPrinter struct {
	mu     sync.Mutex
	w      io.Writer
	wide   bool
	report func() []pods.PodReport
	seen   map[string]string // pod → its last printed state (watchState)
	header bool
	uids   map[string]bool
}

// Record prints an event (engine.Recorder).
func (p *playPrinter) Record(e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	printEvent(tw, e, p.wide)
	tw.Flush()
}

// pods are the files' pods as the API shows them.
func (p *playPrinter) pods() []api.Pod {
	if p.report == nil {
		return nil
	}
	var out []api.Pod
	for _, r := range p.report() {
		if p.uids[r.UID] {
			out = append(out, api.PodFromReport(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// printChanged prints the pods whose state changed since they were last
// printed.
func (p *playPrinter) printChanged() {
	list := p.pods()
	p.mu.Lock()
	defer p.mu.Unlock()
	var changed []api.Pod
	for _, pod := range list {
		key, state := pod.Namespace+"/"+pod.Name, watchState(pod)
		if p.seen[key] != state {
			p.seen[key] = state
			changed = append(changed, pod)
		}
	}
	if len(changed) > 0 {
		printStatus(p.w, changed, time.Now(), p.wide, !p.header)
		p.header = true
	}
}

// allHold reports whether every pod of the files holds the condition.
func (p *playPrinter) allHold(holds func(waitContainer) bool) bool {
	list := p.pods()
	if len(list) < len(p.uids) {
		return false
	}
	for _, pod := range list {
		if !podWaitState(pod).holds(holds, "") {
			return false
		}
	}
	return true
}

// printNot prints what of the pods does not hold the condition.
func (p *playPrinter) printNot(holds func(waitContainer) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range p.pods() {
		if st := podWaitState(pod); !st.holds(holds, "") {
			safef(p.w, "pod %s/%s:\n", pod.Namespace, pod.Name)
			st.print(p.w)
		}
	}
}
