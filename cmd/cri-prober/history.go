package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/api"
)

func newHistoryCommand() *cobra.Command {
	var o podQuery
	cmd := &cobra.Command{
		Use:   "history POD [CONTAINER]",
		Short: "Print a pod's recent probe runs and its last failures, with threshold counts",
		Long: `Prints a running agent's recent probe runs of a pod: for each probe, its
last runs (any result) and, kept apart so that a stream of successes never
hides them, its last failures. Each run shows where it stood against the
threshold (2/3) and marks the run that changed the probe's result (*).
Runs of earlier instances of a restarted container are included.

POD is NAMESPACE/NAME, or NAME with -n NAMESPACE.`,
		Example: `  cri-prober history shop/web
  cri-prober history -n shop web -c app
  cri-prober history shop/web -o json`,
		Args: rangeArgs(1, 2, "POD [CONTAINER]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.parse(cmd, args, readFormats...); err != nil {
				return err
			}
			return o.history(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.register(cmd)
	return cmd
}

// podQuery is what history and why take: a pod, a container in it, and
// how to print.
type podQuery struct {
	podRef
	server    string
	container string
	output    string
	ns, name  string
}

func (q *podQuery) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	addServerFlag(fs, &q.server)
	q.podRef.register(fs)
	fs.StringVarP(&q.container, "container", "c", "", "only this container (by name, as kubectl's -c)")
	addOutputFlag(cmd, &q.output, readFormats...)
}

func (q *podQuery) parse(cmd *cobra.Command, args []string, formats ...string) error {
	if err := checkOutput(cmd, q.output, formats...); err != nil {
		return err
	}
	var err error
	if q.ns, q.name, err = q.podRef.parse(cmd, args[0]); err != nil {
		return err
	}
	if len(args) == 2 {
		if q.container != "" && q.container != args[1] {
			return usageErrorf(cmd, "container %q given twice (-c %q): give one", args[1], q.container)
		}
		q.container = args[1]
	}
	return nil
}

func (q *podQuery) history(ctx context.Context, stdout io.Writer) error {
	h, err := agentClient(q.server).History(ctx, q.ns, q.name)
	if err != nil {
		return err
	}
	if c := q.container; c != "" {
		probes := h.Probes[:0]
		for _, p := range h.Probes {
			if p.Container == c {
				probes = append(probes, p)
			}
		}
		if len(probes) == 0 {
			return fmt.Errorf("pod %s/%s has no probed container %q", q.ns, q.name, c)
		}
		h.Probes = probes
	}
	if structured(q.output) {
		return printObject(stdout, q.output, h)
	}
	printHistory(stdout, h, q.output == outputWide)
	return nil
}

// printHistory prints each probe's runs (wide: with the instance each ran
// against, and the date).
func printHistory(w io.Writer, h api.History, wide bool) {
	if len(h.Probes) == 0 {
		safef(w, "pod %s/%s: no probe has run\n", h.Namespace, h.Name)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "CONTAINER\tPROBE\tTIME\tRESULT\tCOUNT\tTOOK\tINSTANCE\tOUTPUT")
	} else {
		fmt.Fprintln(tw, "CONTAINER\tPROBE\tTIME\tRESULT\tCOUNT\tTOOK\tOUTPUT")
	}
	for _, p := range h.Probes {
		for _, r := range p.Recent {
			printRun(tw, p, r, wide)
		}
		// Failures older than the recent runs: the ones a success stream
		// would have hidden.
		var earlier []api.Run
		for _, r := range p.Failures {
			if len(p.Recent) == 0 || r.Time.Before(p.Recent[0].Time) {
				earlier = append(earlier, r)
			}
		}
		if len(earlier) > 0 {
			empty := "\t\t\t\t"
			if wide {
				empty += "\t"
			}
			safef(tw, "%s\t%s\t(earlier failures)"+empty+"\n", p.Container, p.Type) // empty cells: tabs, not text
			for _, r := range earlier {
				printRun(tw, p, r, wide)
			}
		}
	}
	tw.Flush()
}

func printRun(w io.Writer, p api.ProbeHistory, r api.Run, wide bool) {
	count := ""
	if r.Threshold > 0 {
		count = fmt.Sprintf("%d/%d", r.Consecutive, r.Threshold)
	}
	if r.Changed {
		count += "*"
	}
	detail := r.Output
	if r.Error != "" {
		detail = "error: " + r.Error
	}
	took := time.Duration(r.DurationMs * float64(time.Millisecond)).Round(time.Millisecond)
	if wide {
		safef(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Container, p.Type, r.Time.Local().Format("2006-01-02T15:04:05.000"), r.Result, count, took, shortID(r.ContainerID), firstLine(detail))
		return
	}
	safef(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Container, p.Type, r.Time.Local().Format("15:04:05.000"), r.Result, count, took, firstLine(detail))
}
