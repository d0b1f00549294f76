package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

type pauseOptions struct {
	server string
	output string
	reason string
}

func newPauseCommand() *cobra.Command {
	var o pauseOptions
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pause every kill that liveness and startup probes make on the node, until resume (maintenance, incidents)",
		Long: `Pauses every kill a liveness or startup probe would make on the node: the
probes go on and report, and each kill that falls due waits (a KillDeferred
event, cri-prober status, the status page, cri_prober_kills_deferred) until
cri-prober resume; then the kills whose probes still fail go ahead. Exits
are restarted as before. Who paused, when and why is recorded in a
KillsPaused event. With --state-dir the pause survives the agent's restart.

The agent serves pause and resume, as every change of its state, only to
a client it can name: on a unix socket (--listen
unix:///run/cri-prober/api.sock, or the systemd socket unit), or behind a
--web.config.file that checks basic auth or client certificates.`,
		Example: `  cri-prober pause --reason "database failover"
  cri-prober pause --server unix:///run/cri-prober/api.sock
  cri-prober resume`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output, changeFormats...); err != nil {
				return err
			}
			if len(o.reason) > api.MaxPauseReason {
				return usageErrorf(cmd, "--reason is %d bytes: at most %d", len(o.reason), api.MaxPauseReason)
			}
			st, err := agentClient(o.server).PauseKills(cmd.Context(), api.PauseRequest{Reason: o.reason})
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), st)
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in the KillsPaused event and shown by status")
	return cmd
}

func newResumeCommand() *cobra.Command {
	var o pauseOptions
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume the kills that liveness and startup probes make, after pause",
		Long: `Ends cri-prober pause: the kills that waited go ahead if their probes still
fail (within the restart budget, if one is set). Who resumed is recorded in
a KillsResumed event. Resuming a node that is not paused changes nothing.`,
		Example: `  cri-prober resume
  cri-prober resume -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output, changeFormats...); err != nil {
				return err
			}
			st, err := agentClient(o.server).ResumeKills(cmd.Context())
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), st)
		},
	}
	o.register(cmd)
	return cmd
}

// changeFormats are the outputs of pause and resume.
var changeFormats = []string{outputTable, outputJSON, outputYAML}

func (o *pauseOptions) register(cmd *cobra.Command) {
	addServerFlag(cmd.Flags(), &o.server)
	addOutputFlag(cmd, &o.output, changeFormats...)
}

// print prints the kills' status after a pause or resume.
func (o *pauseOptions) print(stdout io.Writer, st killbudget.Status) error {
	if structured(o.output) {
		return printObject(stdout, o.output, st)
	}
	printKills(stdout, st, time.Now(), true)
	return nil
}

// printKills says whether kills are paused, the budget, and which kills
// wait and why (pause, resume, and under status). always: say so when
// kills are not paused either.
func printKills(w io.Writer, st killbudget.Status, now time.Time, always bool) {
	switch p := st.Paused; {
	case p != nil:
		reason := ""
		if p.Reason != "" {
			reason = " (" + p.Reason + ")"
		}
		safef(w, "Kills are paused on this node by %s since %s%s: liveness and startup failures kill nothing until cri-prober resume.\n",
			p.By, p.Since.Local().Format(time.RFC3339), reason)
	case always:
		safef(w, "Kills are not paused on this node.\n")
	}
	if st.NodeBudget > 0 || st.PodBudget > 0 {
		safef(w, "Restart budget: %s on the node, %s per pod, per %s (%d in the window).\n",
			budgetText(st.NodeBudget), budgetText(st.PodBudget), st.Interval, st.KillsInWindow)
	}
	if len(st.Deferred) == 0 {
		return
	}
	safef(w, "Kills waiting: %d\n", len(st.Deferred))
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	safef(tw, "POD\tCONTAINER\tPROBE\tWHY\n")
	for _, d := range st.Deferred {
		safef(tw, "%s/%s\t%s\t%s\t%s\n", d.Namespace, d.Pod, d.Container, d.Probe, api.DeferredWhy(d, now))
	}
	tw.Flush() //nolint:errcheck // stdout
}

func budgetText(n int) string {
	if n == 0 {
		return "no limit"
	}
	return fmt.Sprintf("%d kills", n)
}
