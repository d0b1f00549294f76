package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

const gateLong = `Sets the conditions that pods' readiness gates wait for. Under Kubernetes a
controller (a load balancer's) writes such a condition into the pod's
status through the API server; without one, nothing could, and a pod
with spec.readinessGates would never be Ready. A pod with readiness gates
is Ready only when its containers are and each gate's condition is True,
as under kubelet: the running agent computes it, and status, /ready and
the status page show it.

POD is NAMESPACE/NAME, or NAME with -n NAMESPACE. The condition belongs to
that pod (its UID): a pod made again under another UID starts with none.
With the agent's --state-dir, conditions survive the agent's restart;
without, the agent keeps them in memory only.

Changing a condition is allowed only on the agent's unix socket (the
default when the systemd socket unit runs) or with authentication from
the agent's --web.config.file; each change is an event naming who made it.`

func newGateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Set, unset and list the conditions of pods' readiness gates",
		Long:  gateLong,
		Example: `  cri-prober gate set shop/web example.com/lb-ready=True
  cri-prober gate set -n shop web example.com/lb-ready=False
  cri-prober gate unset shop/web example.com/lb-ready
  cri-prober gate list`,
		Args:                       unknownCommand,
		RunE:                       func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SuggestionsMinimumDistance: 2,
	}
	cmd.AddCommand(newGateSetCommand(), newGateUnsetCommand(), newGateListCommand())
	return cmd
}

type gateOptions struct {
	podRef
	server string
	output string
}

func (o *gateOptions) register(cmd *cobra.Command) {
	addServerFlag(cmd.Flags(), &o.server)
	o.podRef.register(cmd.Flags())
}

func newGateSetCommand() *cobra.Command {
	var o gateOptions
	cmd := &cobra.Command{
		Use:   "set POD CONDITION=True|False...",
		Short: "Set conditions of a pod's readiness gates",
		Long: `Sets conditions of a pod, as a controller sets the condition a readiness
gate names. A condition the pod has no readiness gate of is kept and
shown, and does not change its readiness (a warning says so), as under
kubelet. kubelet's own conditions (Ready, ContainersReady, …) cannot be
set.`,
		Example: `  cri-prober gate set shop/web example.com/lb-ready=True
  cri-prober gate set -n shop web example.com/lb-ready=True example.com/warm=False
  cri-prober gate set shop/web example.com/lb-ready=True -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErrorf(cmd, "want POD CONDITION=True|False..., got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, o.output, changeFormats...); err != nil {
				return err
			}
			ns, name, err := o.parse(cmd, args[0])
			if err != nil {
				return err
			}
			type setting struct {
				t      string
				status corev1.ConditionStatus
			}
			var settings []setting
			for _, a := range args[1:] {
				t, value, ok := strings.Cut(a, "=")
				if !ok {
					return usageErrorf(cmd, "%q: want CONDITION=True or CONDITION=False (to remove one: cri-prober gate unset POD CONDITION)", a)
				}
				if err := pods.ValidateGateType(corev1.PodConditionType(t)); err != nil {
					return usageErrorf(cmd, "%v", err)
				}
				status, err := pods.ParseGateStatus(value)
				if err != nil {
					return usageErrorf(cmd, "%s: %v", t, err)
				}
				settings = append(settings, setting{t, status})
			}
			client := agentClient(o.server)
			for _, st := range settings {
				a, err := client.SetGate(cmd.Context(), ns, name, st.t, api.GateRequest{Status: string(st.status)})
				if err != nil {
					return err
				}
				if err := o.printChange(cmd.OutOrStdout(), cmd.ErrOrStderr(), a, false); err != nil {
					return err
				}
			}
			return nil
		},
	}
	o.register(cmd)
	addOutputFlag(cmd, &o.output, changeFormats...)
	return cmd
}

func newGateUnsetCommand() *cobra.Command {
	var o gateOptions
	cmd := &cobra.Command{
		Use:   "unset POD CONDITION...",
		Short: "Remove conditions of a pod's readiness gates",
		Long: `Removes conditions set with gate set: a readiness gate whose condition is
gone is not met ("corresponding condition of pod readiness gate … does
not exist."), so the pod is not Ready.`,
		Example: `  cri-prober gate unset shop/web example.com/lb-ready`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErrorf(cmd, "want POD CONDITION..., got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, o.output, changeFormats...); err != nil {
				return err
			}
			ns, name, err := o.parse(cmd, args[0])
			if err != nil {
				return err
			}
			for _, t := range args[1:] {
				if strings.Contains(t, "=") {
					return usageErrorf(cmd, "%q: want a condition type alone (to set one: cri-prober gate set POD CONDITION=True)", t)
				}
			}
			client := agentClient(o.server)
			for _, t := range args[1:] {
				a, err := client.UnsetGate(cmd.Context(), ns, name, t)
				if err != nil {
					return err
				}
				if err := o.printChange(cmd.OutOrStdout(), cmd.ErrOrStderr(), a, true); err != nil {
					return err
				}
			}
			return nil
		},
	}
	o.register(cmd)
	addOutputFlag(cmd, &o.output, changeFormats...)
	return cmd
}

// printChange prints what one change (unset: an unset) did, kubectl's
// way: a line on stdout (-o json|yaml: the agent's answer, one document
// per condition), a warning on stderr.
func (o *gateOptions) printChange(stdout, stderr io.Writer, a api.GateAnswer, unset bool) error {
	if a.Warning != "" {
		safef(stderr, "Warning: %s\n", a.Warning)
	}
	if !a.Persistent && a.Changed {
		safef(stderr, "Warning: the agent runs without --state-dir: it forgets this condition when it restarts\n")
	}
	if structured(o.output) {
		return printStreamed(stdout, o.output, a)
	}
	ready := "not ready"
	if a.Ready {
		ready = "ready"
	}
	switch {
	case unset && a.Changed:
		safef(stdout, "pod %s/%s: %s unset (was %s); the pod is %s\n", a.Namespace, a.Name, a.ConditionType, a.Previous, ready)
	case unset:
		safef(stdout, "pod %s/%s: %s was not set; the pod is %s\n", a.Namespace, a.Name, a.ConditionType, ready)
	case a.Changed && a.Previous != "":
		safef(stdout, "pod %s/%s: %s=%s (was %s); the pod is %s\n", a.Namespace, a.Name, a.ConditionType, a.Status, a.Previous, ready)
	case a.Changed:
		safef(stdout, "pod %s/%s: %s=%s; the pod is %s\n", a.Namespace, a.Name, a.ConditionType, a.Status, ready)
	default:
		safef(stdout, "pod %s/%s: %s=%s (unchanged); the pod is %s\n", a.Namespace, a.Name, a.ConditionType, a.Status, ready)
	}
	return nil
}

func newGateListCommand() *cobra.Command {
	var o gateOptions
	cmd := &cobra.Command{
		Use:   "list [POD]",
		Short: "List the conditions set with gate set",
		Long: `Lists the conditions set with gate set, on every pod of the node or on
one (POD is NAMESPACE/NAME, or NAME with -n NAMESPACE).`,
		Example: `  cri-prober gate list
  cri-prober gate list shop/web -o json`,
		Args: rangeArgs(0, 1, "[POD]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, o.output, readFormats...); err != nil {
				return err
			}
			var ns, name string
			if len(args) == 1 {
				var err error
				if ns, name, err = o.parse(cmd, args[0]); err != nil {
					return err
				}
			}
			list, err := agentClient(o.server).Gates(cmd.Context())
			if err != nil {
				return err
			}
			kept := list.Gates[:0]
			for _, g := range list.Gates {
				if (name == "" && (o.namespace == "" || g.Namespace == o.namespace)) || (g.Namespace == ns && g.Name == name) {
					kept = append(kept, g)
				}
			}
			list.Gates = kept
			if structured(o.output) {
				return printObject(cmd.OutOrStdout(), o.output, list)
			}
			printGates(cmd.OutOrStdout(), list, time.Now(), o.output == outputWide)
			return nil
		},
	}
	o.register(cmd)
	addOutputFlag(cmd, &o.output, readFormats...)
	return cmd
}

func printGates(w io.Writer, list api.GateList, now time.Time, wide bool) {
	if len(list.Gates) == 0 {
		safeln(w, "No readiness gate conditions set.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONDITION\tSTATUS\tSINCE\tUID\tBY")
	} else {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONDITION\tSTATUS\tSINCE")
	}
	for _, g := range list.Gates {
		if wide {
			safef(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Namespace, g.Name, g.ConditionType, g.Status, api.Age(g.LastTransitionTime, now), g.UID, dash(g.By))
			continue
		}
		safef(tw, "%s\t%s\t%s\t%s\t%s\n", g.Namespace, g.Name, g.ConditionType, g.Status, api.Age(g.LastTransitionTime, now))
	}
	tw.Flush()
}
