package main

import (
	"context"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

const whyHelp = `Usage: cri-prober why [flags] NAMESPACE/NAME [CONTAINER]

Says why a running agent restarted (or stopped) a pod's containers: the
probe results that reached the failure threshold, or the exit code; the
grace period of the kill; the back-off before the replacement started.
With --state-dir the agent keeps this across its own restarts.

Examples:
  cri-prober why shop/web
  cri-prober why --all shop/web app
  cri-prober why -o json shop/web

Flags:
`

func runWhy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("why", whyHelp)
	server := fs.String("server", defaultServer, "the agent's state API: its --listen address as host:port (or :port), http://host:port, https://[user:password@]host:port, or unix:///path")
	all := fs.Bool("all", false, "every restart kept, not only the last 3")
	output := fs.String("o", "text", "output format: text or json")
	if err := parseFlagsWithArgs(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if fs.NArg() < 1 || fs.NArg() > 2 || !ok || ns == "" || name == "" {
		safeln(stderr, "want NAMESPACE/NAME [CONTAINER], e.g. cri-prober why shop/web app")
		return errUsage
	}
	if *output != "text" && *output != "json" {
		safef(stderr, "-o %q: want text or json\n", *output)
		return errUsage
	}
	var r api.Restarts
	if err := apiGet(ctx, *server, "/api/v1/pods/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/restarts", &r); err != nil {
		return err
	}
	if c := fs.Arg(1); c != "" {
		kept := r.Restarts[:0]
		for _, e := range r.Restarts {
			if e.Container == c {
				kept = append(kept, e)
			}
		}
		r.Restarts = kept
	}
	if !*all && len(r.Restarts) > 3 {
		r.Restarts = r.Restarts[len(r.Restarts)-3:]
	}
	if *output == "json" {
		return writeJSONTo(stdout, r)
	}
	if len(r.Restarts) == 0 {
		safef(stdout, "%s/%s: the agent has restarted none of its containers\n", ns, name)
		return nil
	}
	for _, e := range r.Restarts {
		printWhy(stdout, e)
	}
	return nil
}

func printWhy(w io.Writer, e restart.Entry) {
	what := "restarted"
	if e.Action == restart.ActionStopped {
		what = "stopped (not restarted)"
	}
	safef(w, "%s/%s %s: %s %s", e.Namespace, e.Pod, e.Container, what, e.Time.Local().Format("2006-01-02 15:04:05"))
	if e.Action == restart.ActionRestarted {
		safef(w, " as attempt %d", e.Attempt)
	}
	safeln(w)
	switch restart.Cause(e.Cause) {
	case restart.CauseExit:
		safef(w, "  why: it exited with code %d%s\n", e.ExitCode, reasonSuffix(e.ExitReason))
	case restart.CausePostStart:
		safef(w, "  why: its postStart hook failed; it was killed and ended with code %d%s\n", e.ExitCode, reasonSuffix(e.ExitReason))
	default:
		threshold := 0
		if n := len(e.Failures); n > 0 {
			threshold = e.Failures[n-1].Threshold
		}
		safef(w, "  why: its %s probe failed %d time(s) in a row (failureThreshold %d):\n", e.Cause, len(e.Failures), threshold)
		for _, f := range e.Failures {
			safef(w, "    %s  %d/%d  %s\n", f.Time.Local().Format("15:04:05.000"), f.Consecutive, f.Threshold, firstLine(f.Output))
		}
		safef(w, "  killed with a %d s grace period; it ended with code %d%s\n", e.GracePeriodSeconds, e.ExitCode, reasonSuffix(e.ExitReason))
	}
	if e.Action == restart.ActionRestarted {
		wait := time.Duration(e.BackOffSeconds * float64(time.Second)).Round(100 * time.Millisecond)
		safef(w, "  replaced %s by %s after %s of back-off\n", short(e.ContainerID), short(e.ReplacementID), wait)
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func short(id string) string { return id[:min(len(id), 13)] }
