package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

func newWhyCommand() *cobra.Command {
	var o podQuery
	var all bool
	cmd := &cobra.Command{
		Use:   "why POD [CONTAINER]",
		Short: "Say why the agent restarted a pod's containers (the failures, the exit, the back-off)",
		Long: `Says why a running agent restarted (or stopped) a pod's containers: the
probe results that reached the failure threshold, or the exit code; the
grace period of the kill; the back-off before the replacement started.
With --state-dir the agent keeps this across its own restarts.

POD is NAMESPACE/NAME, or NAME with -n NAMESPACE.`,
		Example: `  cri-prober why shop/web
  cri-prober why shop/web app --all
  cri-prober why -n shop web -o yaml`,
		Args: rangeArgs(1, 2, "POD [CONTAINER]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output == "text" { // the name this format had before -o table
				o.output = outputTable
			}
			if err := o.parse(cmd, args, readFormats...); err != nil {
				return err
			}
			return o.why(cmd.Context(), cmd.OutOrStdout(), all)
		},
	}
	o.register(cmd)
	cmd.Flags().Lookup("output").Usage = "output format: table (the default: a paragraph per restart), wide (with the pod's UID, whole IDs and outputs), json, yaml"
	cmd.Flags().BoolVar(&all, "all", false, "every restart kept, not only the last 3")
	return cmd
}

func (q *podQuery) why(ctx context.Context, stdout io.Writer, all bool) error {
	r, err := agentClient(q.server).Restarts(ctx, q.ns, q.name)
	if err != nil {
		return err
	}
	if c := q.container; c != "" {
		kept := r.Restarts[:0]
		for _, e := range r.Restarts {
			if e.Container == c {
				kept = append(kept, e)
			}
		}
		r.Restarts = kept
	}
	if !all && len(r.Restarts) > 3 {
		r.Restarts = r.Restarts[len(r.Restarts)-3:]
	}
	if structured(q.output) {
		return printObject(stdout, q.output, r)
	}
	if len(r.Restarts) == 0 {
		safef(stdout, "%s/%s: the agent has restarted none of its containers\n", q.ns, q.name)
		return nil
	}
	for _, e := range r.Restarts {
		printWhy(stdout, e, q.output == outputWide)
	}
	return nil
}

// printWhy says why one container was restarted; wide: with the pod's
// UID, whole container IDs and each failure's output in full (made safe).
func printWhy(w io.Writer, e api.Restart, wide bool) {
	id, output := shortID, firstLine
	if wide {
		id = func(s string) string { return s }
		output = func(s string) string { return terminalSafe(strings.TrimSpace(s)) }
	}
	what := "restarted"
	if e.Action == ledger.ActionStopped {
		what = "stopped (not restarted)"
	}
	safef(w, "%s/%s %s: %s %s", e.Namespace, e.Pod, e.Container, what, e.Time.Local().Format("2006-01-02 15:04:05"))
	if e.Action == ledger.ActionRestarted {
		safef(w, " as attempt %d", e.Attempt)
	}
	if wide && e.PodUID != "" {
		safef(w, " (pod UID %s)", e.PodUID)
	}
	safeln(w)
	switch e.Cause {
	case restart.CauseExit:
		safef(w, "  why: it exited with code %d%s\n", e.ExitCode, reasonSuffix(e.ExitReason))
	case restart.CausePostStart:
		safef(w, "  why: its postStart hook failed; it was killed and ended with code %d%s\n", e.ExitCode, reasonSuffix(e.ExitReason))
	default:
		safef(w, "  why: %s:\n", api.ProbeFailures(e))
		for _, f := range e.Failures {
			safef(w, "    %s  %d/%d  %s\n", f.Time.Local().Format("15:04:05.000"), f.Consecutive, f.Threshold, output(f.Output))
		}
		safef(w, "  killed with a %d s grace period; it ended with code %d%s\n", e.GracePeriodSeconds, e.ExitCode, reasonSuffix(e.ExitReason))
	}
	if e.Action == ledger.ActionRestarted {
		wait := time.Duration(e.BackOffSeconds * float64(time.Second)).Round(100 * time.Millisecond)
		safef(w, "  replaced %s by %s after %s of back-off\n", id(e.ContainerID), id(e.ReplacementID), wait)
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
