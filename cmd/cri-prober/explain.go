package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newExplainCommand() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "explain -f FILE [-f FILE…]",
		Short: "Say when each probe of a manifest runs, detects and restarts; common mistakes",
		Long: `For each probe of the pods in the manifests: when it first runs, the
earliest and worst-case time to detect a failure and to act on it (restart
or take out of traffic), following kubelet's semantics, and warnings for the
usual mistakes. Nothing runs: it reads the manifests only.`,
		Example: `  cri-prober explain -f pod.yaml
  cri-prober explain examples/demo/web.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(files, args...)
			if len(paths) == 0 {
				return usageErrorf(cmd, "explain needs a manifest: -f FILE")
			}
			return explain(paths, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a Pod manifest `file` (repeatable; or give them as arguments)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func explain(files []string, stdout io.Writer) error {
	var problems int
	for _, f := range files {
		pods, errs := spec.LoadFile(f)
		for _, e := range errs {
			safeln(stdout, "invalid:", e)
		}
		problems += len(errs)
		for _, p := range pods {
			printExplanation(stdout, p)
		}
	}
	if problems > 0 {
		return errProblemsFound
	}
	return nil
}

func printExplanation(w io.Writer, pod *spec.Pod) {
	safef(w, "pod %s/%s (%s): restartPolicy %s, terminationGracePeriodSeconds %d\n", pod.Namespace, pod.Name, pod.Source, pod.RestartPolicy, pod.TerminationGracePeriodSeconds)
	ex := prober.Explain(pod)
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
		safef(w, "    %s: %s every %ds, timeout %ds, success %d, failure %d, initial delay %ds\n",
			strings.ToLower(e.Type.String()), e.Handler, p.PeriodSeconds, p.TimeoutSeconds, p.SuccessThreshold, p.FailureThreshold, p.InitialDelaySeconds)
		gated := ""
		if e.Type != results.Startup && c.Startup != nil {
			gated = " (after the startup probe succeeds)"
		}
		safef(w, "      first run:           %s after the container starts%s\n", e.FirstRun, gated)
		switch e.Type {
		case results.Readiness:
			safef(w, "      not ready:           %s after the app stops answering\n", e.Detect)
		case results.Liveness:
			safef(w, "      failure detected:    %s after the app breaks\n", e.Detect)
			safef(w, "      %s %s (grace %ds; a container that keeps failing waits up to %s more)\n", restartVerb(pod, c), e.Act, e.GracePeriod, prober.CrashLoopWorst())
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
