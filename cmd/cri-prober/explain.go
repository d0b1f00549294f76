package main

import (
	"context"
	"io"
	"strings"

	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const explainHelp = `Usage: cri-prober explain -f FILE [-f FILE…]

For each probe of the pods in the manifests: when it first runs, the
earliest and worst-case time to detect a failure and to act on it (restart
or take out of traffic), following kubelet's semantics, and warnings for the
usual mistakes. Nothing runs: it reads the manifests only.

Examples:
  cri-prober explain -f pod.yaml
  cri-prober explain -f examples/demo/web.yaml

Flags:
`

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func runExplain(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var files fileList
	fs := newFlagSet("explain", explainHelp)
	fs.Var(&files, "f", "a Pod manifest (repeatable)")
	if err := parseFlagsWithArgs(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	files = append(files, fs.Args()...)
	if len(files) == 0 {
		safeln(stderr, "explain needs a manifest: -f FILE")
		fs.Usage()
		return errUsage
	}
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
