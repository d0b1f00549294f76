package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

func newPodsCommand() *cobra.Command {
	var o podsOptions
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List the pods and containers the runtime reports (the poller's view)",
		Long: `Lists the pods and containers the runtime reports, as cri-prober's poller
sees them: the first thing to run to check that cri-prober reaches your
runtime. With -w it keeps running and prints every change as it happens
(containerd's event stream makes exits show within milliseconds).

The runtime is found as crictl finds it: --runtime-endpoint, else
$CONTAINER_RUNTIME_ENDPOINT, else runtime-endpoint in crictl's config file
($CRI_CONFIG_FILE, else /etc/crictl.yaml), else containerd's socket.`,
		Example: `  cri-prober pods
  cri-prober pods -o json
  cri-prober pods -n default -w
  cri-prober pods -r unix:///run/k3s/containerd/containerd.sock`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output, readFormats...); err != nil {
				return err
			}
			if _, err := netip.ParseAddr(o.hostIP); o.hostIP != "" && err != nil {
				return usageErrorf(cmd, "--host-ip %q: want the node's IP address, such as 192.0.2.10 or 2001:db8::10", o.hostIP)
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	o.register(fs)
	addOutputFlag(cmd, &o.output, readFormats...)
	o.namespaces.register(cmd, "pods")
	fs.StringVar(&o.hostIP, "host-ip", "", "the node's address, as given to run: a dual-stack pod's IP is its first address of the node's family, as run reports it (default: IPv4 first, as run's default)")
	fs.BoolVarP(&o.watch, "watch", "w", false, "keep running and print changes as they happen")
	fs.DurationVar(&o.relistPeriod, "relist-period", cri.DefaultRelistPeriod, "with --watch: how often to list the runtime")
	fs.StringVar(&o.containerdAddress, "containerd-address", "", "with --watch: containerd socket for its event stream (default: the CRI socket when the runtime is containerd; \"none\" to poll only)")
	return cmd
}

type podsOptions struct {
	runtimeFlags
	output            string
	namespaces        namespaceFilter
	hostIP            string
	watch             bool
	relistPeriod      time.Duration
	containerdAddress string
}

func (o *podsOptions) run(ctx context.Context, stdout io.Writer) error {
	client, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	poller, err := cri.NewPoller(client, cri.WithRelistPeriod(o.relistPeriod))
	if err != nil {
		return err
	}
	if !o.watch {
		snap, err := poller.Relist(ctx)
		if err != nil {
			return err
		}
		return printSnapshot(stdout, snap, o.output, o.namespaces, o.hostIP, time.Now())
	}
	return watchPods(ctx, client, poller, *o, stdout)
}

// watchPods prints the current state, then one line per change until ctx
// is done.
func watchPods(ctx context.Context, client *cri.Client, poller *cri.Poller, o podsOptions, stdout io.Writer) error {
	logger := klog.FromContext(ctx)
	sub := poller.Subscribe()
	defer sub.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { poller.Run(ctx) })

	switch addr := eventsAddress(o.containerdAddress, client); addr {
	case "":
		logger.Info("Not following containerd events; changes show at the next relist", "runtime", client.RuntimeName(), "relistPeriod", o.relistPeriod)
	default:
		watcher, err := cri.NewEventWatcher(addr, poller)
		if err != nil {
			return err
		}
		wg.Go(func() { watcher.Run(ctx) })
	}

	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Ready():
		}
		batch := sub.Next()
		if first {
			// The first batch replays everything present: show it as a table.
			first = false
			if err := printSnapshot(stdout, batch.Snapshot, o.output, o.namespaces, o.hostIP, time.Now()); err != nil {
				return err
			}
			continue
		}
		for _, ev := range batch.Events {
			if !o.namespaces.matches(ev.Sandbox.Namespace) {
				continue
			}
			if structured(o.output) {
				if err := printStreamed(stdout, o.output, eventJSON(ev)); err != nil {
					return err
				}
				continue
			}
			safeln(stdout, formatEvent(ev, o.hostIP, time.Now()))
		}
	}
}

// eventsAddress picks the containerd socket to follow: the flag, or the CRI
// socket itself when the runtime says it is containerd.
func eventsAddress(flagValue string, client *cri.Client) string {
	switch {
	case flagValue == "none":
		return ""
	case flagValue != "":
		return flagValue
	case client.RuntimeName() == "containerd":
		return client.Socket()
	default:
		return ""
	}
}

// printSnapshot prints the snapshot; a pod's IP is the one of nodeIP's
// family (cri.Sandbox.IP), as the agent reports it.
func printSnapshot(w io.Writer, snap *cri.Snapshot, output string, namespaces namespaceFilter, nodeIP string, now time.Time) error {
	if namespaces.namespace != "" {
		snap = snap.Select(func(p *cri.Sandbox) bool { return namespaces.matches(p.Namespace) })
	}
	if structured(output) {
		return printObject(w, output, snap)
	}
	wide := output == outputWide
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tIP\tCONTAINER\tID\tATTEMPT\tSTATE\tSTARTED\tEXIT\tPOD ID\tIMAGE")
	} else {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tIP\tCONTAINER\tID\tATTEMPT\tSTATE\tSTARTED\tEXIT")
	}
	for _, p := range snap.Sandboxes() {
		ctrs := snap.PodContainers(p.ID)
		extra := func(image string) string {
			if !wide {
				return ""
			}
			return "\t" + shortID(p.ID) + "\t" + dash(image)
		}
		if len(ctrs) == 0 {
			safef(tw, "%s\t%s\t%s\t<none>\t%s\t%d\tSandbox%s\t%s\t-%s\n",
				p.Namespace, p.Name, dash(p.IP(nodeIP)), shortID(p.ID), p.Attempt, p.State, ago(p.CreatedAt, now), extra(""))
			continue
		}
		for _, c := range ctrs {
			safef(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s%s\n",
				p.Namespace, p.Name, dash(p.IP(nodeIP)), c.Name, shortID(c.ID), c.Attempt, c.State, ago(c.StartedAt, now), exit(c), extra(c.Image))
		}
	}
	return tw.Flush()
}

func formatEvent(ev cri.Event, nodeIP string, now time.Time) string {
	var b strings.Builder
	safef(&b, "%s  %-16s %s/%s", now.Format("15:04:05.000"), ev.Type, ev.Sandbox.Namespace, ev.Sandbox.Name)
	if c := ev.Container; c != nil {
		safef(&b, " container=%s id=%s attempt=%d", c.Name, shortID(c.ID), c.Attempt)
		if ev.Type == cri.ContainerExited {
			safef(&b, " exit=%s", exit(c))
		}
	} else {
		safef(&b, " id=%s", shortID(ev.Sandbox.ID))
		if ip := ev.Sandbox.IP(nodeIP); ev.Type == cri.SandboxAdded && ip != "" {
			safef(&b, " ip=%s", ip)
		}
	}
	return b.String()
}

func eventJSON(ev cri.Event) any {
	return struct {
		Type      cri.EventType  `json:"type"`
		Pod       *cri.Sandbox   `json:"pod"`
		Container *cri.Container `json:"container,omitempty"`
	}{ev.Type, ev.Sandbox, ev.Container}
}

// shortID truncates IDs as crictl does.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func exit(c *cri.Container) string {
	if c.State != cri.StateExited {
		return "-"
	}
	if c.Reason != "" {
		return fmt.Sprintf("%d (%s)", c.ExitCode, c.Reason)
	}
	return fmt.Sprint(c.ExitCode)
}

// ago renders a time as kubectl renders ages.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s ago"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}
