package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/explain"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newExplainCommand() *cobra.Command {
	var files []string
	var startTime time.Duration
	cmd := &cobra.Command{
		Use:   "explain -f FILE [-f FILE…]",
		Short: "Say when each probe of a manifest runs, detects and restarts; common mistakes",
		Long: `For each probe of the pods in the manifests: when it first runs, the
earliest and worst-case time to detect a failure and to act on it (restart
or take out of traffic), following kubelet's semantics, and warnings for the
usual mistakes. Nothing runs: it reads the manifests only.

A probe's startInterval (cri-prober's extension: a faster pace until it
first succeeds) is taken into account. Warnings are the ones you can act
on: a timeout longer than the period, liveness without readiness, and, with
--start-time, a start-up budget shorter than the app's start time.`,
		Example: `  cri-prober explain -f pod.yaml
  cri-prober explain examples/demo/web.yaml
  cri-prober explain -f pod.yaml --start-time 45s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(files, args...)
			if len(paths) == 0 {
				return usageErrorf(cmd, "explain needs a manifest: -f FILE")
			}
			if startTime < 0 {
				return usageErrorf(cmd, "--start-time must not be negative")
			}
			var opts []explain.Option
			if startTime > 0 {
				opts = append(opts, explain.WithStartTime(startTime))
			}
			return explainFiles(paths, cmd.InOrStdin(), cmd.OutOrStdout(), opts...)
		},
	}
	cmd.Flags().DurationVar(&startTime, "start-time", 0, "how long the app takes to start answering (e.g. 45s): warns when a startup budget is shorter, and says what to set")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a Pod manifest `file`, - for standard input (repeatable; or give them as arguments)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func explainFiles(files []string, stdin io.Reader, stdout io.Writer, opts ...explain.Option) error {
	var problems int
	for _, f := range files {
		r := loadPath(f, stdin)
		for _, n := range r.Skipped {
			safeln(stdout, n.String())
		}
		for _, e := range r.Errors {
			safeln(stdout, "invalid:", e)
		}
		problems += len(r.Errors)
		for _, p := range r.Pods {
			printExplanation(stdout, p, opts...)
		}
	}
	if problems > 0 {
		return errProblemsFound
	}
	return nil
}

func printExplanation(w io.Writer, pod *spec.Pod, opts ...explain.Option) {
	safef(w, "pod %s/%s (%s): restartPolicy %s, terminationGracePeriodSeconds %d\n", pod.Namespace, pod.Name, pod.Source, pod.RestartPolicy, pod.TerminationGracePeriodSeconds)
	ex := explain.Probes(pod, opts...)
	if len(ex) == 0 {
		safeln(w, "  no probes: its containers are observed, never probed, and ready while running")
	}
	container := ""
	for _, e := range ex {
		if e.Container != container {
			container = e.Container
			safef(w, "\n  container %s\n", container)
		}
		c, _ := pod.Container(e.Container)
		p := c.Probe(e.Type)
		pace := fmt.Sprintf("every %s", e.Period)
		if e.StartInterval > 0 {
			pace += fmt.Sprintf(" (%s until it first succeeds)", e.StartInterval)
		}
		safef(w, "    %s: %s %s, timeout %ds, success %d, failure %d, initial delay %ds\n",
			strings.ToLower(e.Type.String()), e.Handler, pace, p.TimeoutSeconds, p.SuccessThreshold, p.FailureThreshold, p.InitialDelaySeconds)
		gated := ""
		if e.Type != results.Startup && c.Startup != nil {
			gated = " (after the startup probe succeeds)"
		}
		safef(w, "      first run:           %s after the container starts%s\n", e.FirstRun, gated)
		if e.Type != results.Liveness && e.Pass != (explain.Window{}) {
			safef(w, "      passes:              %s after the app first answers\n", e.Pass)
		}
		if e.StartBudget > 0 {
			safef(w, "      start budget:        the app must answer within %s of starting, or it is restarted\n", e.StartBudget)
		}
		switch e.Type {
		case results.Readiness:
			safef(w, "      not ready:           %s after the app stops answering\n", e.Detect)
		case results.Liveness:
			safef(w, "      failure detected:    %s after the app breaks\n", e.Detect)
			safef(w, "      %s %s (grace %ds; a container that keeps failing waits up to %s more)\n", restartVerb(pod, c), e.Act, e.GracePeriod, restart.DefaultMaxBackoff)
		case results.Startup:
			safef(w, "      gives up:            %s after the container starts, if it never passes\n", e.Detect)
			safef(w, "      %s %s (grace %ds)\n", restartVerb(pod, c), e.Act, e.GracePeriod)
		}
		for _, warning := range e.Warnings {
			safef(w, "      warning: %s\n", warning)
		}
	}
	safeln(w)
}

// restartVerb says what a probe kill leads to: a restart, unless the
// container's policy (else the pod's) is Never; sidecars always restart.
func restartVerb(pod *spec.Pod, c *spec.Container) string {
	if c.Kind != spec.Sidecar && !c.RestartsAfterKill(pod.RestartPolicy) {
		return "stopped (not restarted):"
	}
	return "restarted:          "
}
