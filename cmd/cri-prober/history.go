package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cri-prober/cri-prober/pkg/api"
)

const historyHelp = `Usage: cri-prober history [flags] NAMESPACE/NAME [CONTAINER]

Prints a running agent's recent probe runs of a pod: for each probe, its
last runs (any result) and, kept apart so that a stream of successes never
hides them, its last failures. Each run shows where it stood against the
threshold (2/3) and marks the run that changed the probe's result (*).
Runs of earlier instances of a restarted container are included.

Examples:
  cri-prober history shop/web
  cri-prober history shop/web app
  cri-prober history -o json shop/web

Flags:
`

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("history", historyHelp)
	server := fs.String("server", defaultServer, "the agent's state API: its --listen address as host:port (or :port), http://host:port, https://[user:password@]host:port, or unix:///path")
	output := fs.String("o", "table", "output format: table or json")
	if err := parseFlagsWithArgs(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if fs.NArg() < 1 || fs.NArg() > 2 || !ok || ns == "" || name == "" {
		safeln(stderr, "want NAMESPACE/NAME [CONTAINER], e.g. cri-prober history shop/web app")
		return errUsage
	}
	if *output != "table" && *output != "json" {
		safef(stderr, "-o %q: want table or json\n", *output)
		return errUsage
	}
	var h api.History
	if err := apiGet(ctx, *server, "/api/v1/pods/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/history", &h); err != nil {
		return err
	}
	if c := fs.Arg(1); c != "" {
		probes := h.Probes[:0]
		for _, p := range h.Probes {
			if p.Container == c {
				probes = append(probes, p)
			}
		}
		if len(probes) == 0 {
			return fmt.Errorf("pod %s/%s has no probed container %q", ns, name, c)
		}
		h.Probes = probes
	}
	if *output == "json" {
		return writeJSONTo(stdout, h)
	}
	printHistory(stdout, h)
	return nil
}

func printHistory(w io.Writer, h api.History) {
	if len(h.Probes) == 0 {
		safef(w, "pod %s/%s: no probe has run\n", h.Namespace, h.Name)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tPROBE\tTIME\tRESULT\tCOUNT\tTOOK\tOUTPUT")
	for _, p := range h.Probes {
		for _, r := range p.Recent {
			printRun(tw, p, r)
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
			safef(tw, "%s\t%s\t(earlier failures)\t\t\t\t\n", p.Container, p.Type)
			for _, r := range earlier {
				printRun(tw, p, r)
			}
		}
	}
	tw.Flush()
}

func printRun(w io.Writer, p api.ProbeHistory, r api.Run) {
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
	safef(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Container, p.Type, r.Time.Local().Format("15:04:05.000"), r.Result, count, took, firstLine(detail))
}
