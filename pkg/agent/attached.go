package agent

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/hooks"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// What is attached to the engine: the state directory's files, where
// events go (the hooks among them), and the state API.

// openState opens what Config.StateDir keeps across the agent's restarts:
// the restart ledger (kept when someone reads it: a state directory or
// the API) and the readiness gates. A file that does not load is set
// aside, said in the log, and begun again.
func (a *Agent) openState(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	dir := a.cfg.StateDir
	if dir != "" || a.cfg.API != nil {
		restarts, warning, err := ledger.Open(dir, ledger.WithNode(a.cfg.NodeName))
		if err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		if warning != nil {
			logger.Error(warning, "Restart ledger") // set aside; a new one begins
		}
		a.Ledger = restarts
	}
	if dir == "" {
		a.Gates = pods.NewGateStore(nil) // in memory: an agent restart forgets them
		return nil
	}
	gates, warning, err := pods.OpenGateStore(dir, nil)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	if warning != nil {
		logger.Error(warning, "Readiness gates") // set aside; none set
	}
	a.Gates = gates
	return nil
}

// events is where every event goes: Config.Recorder, the API's ring and
// the transition hooks, each event marked with who reported it.
func (a *Agent) events(ctx context.Context) interface{ Record(events.Event) } {
	cfg := a.cfg
	to := recorders{}
	if cfg.Recorder != nil {
		to = append(to, cfg.Recorder)
	} else if cfg.API != nil || cfg.OnTransition != "" || cfg.Webhook != "" || cfg.NodeName != "" {
		to = append(to, events.Log(klog.FromContext(ctx)))
	}
	if cfg.API != nil {
		a.ring = events.NewRing(1000)
		to = append(to, a.ring)
	}
	if a.hooks = a.newHooks(); a.hooks != nil {
		to = append(to, a.hooks)
	}
	switch {
	case cfg.NodeName != "":
		return reported{instance: cfg.NodeName, to: to}
	case len(to) == 1:
		return to[0]
	case len(to) == 0:
		return nil
	}
	return to
}

// newHooks returns the transition hooks Config asks for (nil: none); they
// read pod IPs from the engine's view.
func (a *Agent) newHooks() *hooks.Hooks {
	var opts []hooks.Option
	if a.cfg.OnTransition != "" {
		opts = append(opts, hooks.WithCommand([]string{"/bin/sh", "-c", a.cfg.OnTransition}))
	}
	if a.cfg.Webhook != "" {
		opts = append(opts, hooks.WithWebhook(a.cfg.Webhook))
	}
	if len(opts) == 0 {
		return nil
	}
	podIP := func(namespace, pod string) string {
		if p, ok := a.View().ByName(namespace, pod); ok {
			return p.IP()
		}
		return ""
	}
	podExists := func(namespace, pod string) bool {
		_, ok := a.View().ByName(namespace, pod)
		return ok
	}
	if a.cfg.AgentRegistry != nil {
		opts = append(opts, hooks.WithRegisterer(a.cfg.AgentRegistry))
	}
	return hooks.New(append(opts, hooks.WithPodIP(podIP), hooks.WithPodExists(podExists))...)
}

// serveAPI makes the state API over the engine and takes its sockets
// (systemd's, or --listen's address bound now, so that the API is served
// before the agent says it probes).
func (a *Agent) serveAPI(c APIConfig) error {
	var all, probes prometheus.Gatherers
	for _, r := range []*prometheus.Registry{a.cfg.AgentRegistry, a.cfg.ProbeRegistry} {
		if r != nil {
			all = append(all, r)
		}
	}
	if a.cfg.ProbeRegistry != nil {
		probes = append(probes, a.cfg.ProbeRegistry)
	}
	var reg prometheus.Registerer
	if a.cfg.AgentRegistry != nil {
		reg = a.cfg.AgentRegistry
	}
	var kills api.KillController
	if a.KillBudget != nil {
		kills = a.KillBudget
	}
	server := api.New(api.Config{
		Pods: a, History: a.Histories, Ledger: a.Ledger, Gates: a, Events: a.ring, Health: a.Health, Live: a.live.err,
		Metrics:          api.MetricsHandler(all),
		ProbeMetrics:     api.MetricsHandler(probes),
		KubeStateMetrics: api.NewKubeState(a, api.KubeStateOptions{NodeName: a.cfg.NodeName, HostIP: a.cfg.Resolver.HostIP, Namespaces: c.KubeStateNamespaces}),
		NodeName:         a.cfg.NodeName,
		Profiling:        c.Profiling,
		Registerer:       reg, MaxEventStreams: c.MaxEventStreams,
		Kills: kills,
		Node:  a.nodeReporter(),
	})
	var err error
	a.listeners, err = newAPIListeners(server, c.Serve, c.Serve.Address, c.Systemd, c.Retry, reg)
	return err
}

// APIAddresses are what the state API is served on (nil: none).
func (a *Agent) APIAddresses() []string {
	if a.listeners == nil {
		return nil
	}
	return a.listeners.addresses()
}

// reported says who reported each event (events.k8s.io/v1's
// reportingController and reportingInstance: cri-prober and the node's
// name) before it is logged, kept or sent.
type reported struct {
	instance string
	to       recorders
}

func (r reported) Record(e events.Event) {
	e.ReportingController, e.ReportingInstance = events.ReportingController, r.instance
	r.to.Record(e)
}

// recorders sends each event to several recorders.
type recorders []interface{ Record(events.Event) }

func (rs recorders) Record(e events.Event) {
	for _, r := range rs {
		r.Record(e)
	}
}
