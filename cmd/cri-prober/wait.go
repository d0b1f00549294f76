package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const waitHelp = `Usage: cri-prober wait --for ready|started|healthy --pod NAMESPACE/NAME [flags]

Runs the pod's probes with their own periods and thresholds, as the agent
would (no agent needed, nothing is restarted), and exits 0 as soon as the
condition holds for the pod (or for --container-name only). A pod that does
not exist yet is waited for.

Exit codes, for scripts:
  0    the condition holds
  1    --timeout passed first (the last probe results are printed)
  2    bad arguments, or the runtime is unreachable
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (a cancelled CI step):
       never 0, the condition was not seen to hold

  ready    every container ready: running, started, readiness passed (or no
           readiness probe)
  started  every container started: running, startup probe passed (or none)
  healthy  every container started and its liveness probe (if any) passing

Probe specs come from --pod-manifests or the containers' annotations.

Examples:
  crictl runp pod.json && crictl create … && crictl start … &&
    cri-prober wait --for ready --pod ci/web --timeout 60s
  cri-prober wait --for healthy --pod demo/web --container-name web --pod-manifests examples/demo

Flags:
`

// runWait exits 2 for every error: a timeout is the wait's answer (1).
func runWait(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := waitFor(ctx, args, stdout, stderr)
	var coded exitCode
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, errProblemsFound) || errors.As(err, &coded) {
		return err
	}
	return withCode(2, err)
}

func waitFor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var rf runtimeFlags
	fs := newFlagSet("wait", waitHelp)
	rf.registerAs(fs, "connect-timeout")
	cond := fs.String("for", "ready", "the condition: ready, started or healthy")
	pod := fs.String("pod", "", "the pod as `NAMESPACE/NAME`")
	containerName := fs.String("container-name", "", "only this container (default: all of the pod's)")
	manifests := fs.String("pod-manifests", "", "manifest `directory` with the pod's probe specs (else annotations)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	namespace, name, ok := strings.Cut(*pod, "/")
	if !ok || namespace == "" || name == "" {
		safeln(stderr, "--pod NAMESPACE/NAME is required")
		return errUsage
	}
	holds, ok := waitConditions[*cond]
	if !ok {
		safef(stderr, "--for %q: want ready, started or healthy\n", *cond)
		return errUsage
	}

	client, err := rf.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	cfg := agent.Config{
		Client: client, RelistPeriod: 500 * time.Millisecond, EventsAddress: eventsAddress("", client),
		Recorder: recorders{}, // quiet: the result is the exit code
		ProberOptions: []prober.Option{
			prober.WithPodFilter(func(ns, n string) bool { return ns == namespace && n == name }),
			prober.WithoutStartupJitter(),
		},
	}
	if *manifests != "" {
		dir := spec.NewManifestDir(*manifests, nil)
		dir.Reload()
		_, errs := dir.Pods()
		for _, e := range errs {
			if e.Namespace == namespace && e.Pod == name {
				return fmt.Errorf("the pod's manifest is invalid: %v", e)
			}
		}
		cfg.Manifests = dir
	}
	engine, err := agent.New(cfg)
	if err != nil {
		return err
	}
	// The engine stops only after the last results are read: its workers
	// forget their results as they stop.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { engine.Run(ctx) })

	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	deadline := time.NewTimer(*timeout)
	defer deadline.Stop()
	for {
		report, found := engine.ReportPod(namespace, name)
		if found && holds(report, *containerName) {
			safef(stdout, "pod %s is %s\n", *pod, *cond)
			return nil
		}
		select {
		case <-ctx.Done():
			return interruptedWait(context.Cause(ctx), *pod, *cond)
		case <-deadline.C:
			report, found = engine.ReportPod(namespace, name)
			safef(stdout, "timed out after %s: pod %s is not %s\n", *timeout, *pod, *cond)
			printLastResults(stdout, report, found)
			return errProblemsFound
		case <-check.C:
		}
	}
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

var waitConditions = map[string]func(pods.PodReport, string) bool{
	"ready": func(p pods.PodReport, only string) bool {
		return allContainers(p, only, func(c pods.ContainerReport) bool { return c.Ready })
	},
	"started": func(p pods.PodReport, only string) bool {
		return allContainers(p, only, func(c pods.ContainerReport) bool { return c.Started })
	},
	"healthy": func(p pods.PodReport, only string) bool {
		return allContainers(p, only, func(c pods.ContainerReport) bool {
			if !c.Started || len(c.Problems) > 0 {
				return false
			}
			for _, pr := range c.Probes {
				if pr.Type == results.Liveness && (pr.Last == nil || pr.Last.Outcome == results.OutcomeFailure || pr.Result != results.Success) {
					return false
				}
			}
			return true
		})
	},
}

// allContainers reports whether ok holds for every container of the pod
// (init containers aside: they never count, as kubelet's ContainersReady).
func allContainers(p pods.PodReport, only string, ok func(pods.ContainerReport) bool) bool {
	seen := false
	for _, c := range p.Containers {
		if (only != "" && c.Name != only) || (only == "" && c.Kind == spec.Init) {
			continue
		}
		if c.ID == "" || !ok(c) {
			return false
		}
		seen = true
	}
	return seen
}

func printLastResults(w io.Writer, p pods.PodReport, found bool) {
	if !found {
		safeln(w, "  the pod does not exist (see cri-prober pods)")
		return
	}
	for _, problem := range p.Problems {
		safef(w, "  ! %s\n", problem)
	}
	for _, c := range p.Containers {
		safef(w, "  %s: %s, started=%v, ready=%v\n", c.Name, c.State, c.Started, c.Ready)
		for _, problem := range c.Problems {
			safef(w, "    ! %s\n", problem)
		}
		for _, pr := range c.Probes {
			if pr.Last == nil {
				safef(w, "    %s: not run yet\n", strings.ToLower(pr.Type.String()))
				continue
			}
			detail := strings.TrimSpace(pr.Last.Output + pr.Last.Err)
			safef(w, "    %s: %s (%d/%d): %s\n", strings.ToLower(pr.Type.String()), pr.Last.Outcome, pr.Last.Consecutive, pr.Last.Threshold, detail)
		}
	}
}
