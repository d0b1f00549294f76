package gc

import "github.com/prometheus/client_golang/prometheus"

// metrics are the collection's series: kubelet has none for its container
// garbage collection, so these are the agent's own.
type metrics struct {
	containers, sandboxes        prometheus.Counter
	terminated, terminatedErrors prometheus.Counter
}

// newMetrics creates the series and registers them with reg (nil: not
// exported).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		containers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cri_prober_containers_garbage_collected_total",
			Help: "Dead container instances the agent's garbage collection removed (kubelet's container GC policy), with their log files.",
		}),
		sandboxes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cri_prober_sandboxes_garbage_collected_total",
			Help: "Dead pod sandboxes without containers the agent's garbage collection removed (the newest of each pod kept).",
		}),
		terminated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cri_prober_terminated_pods_torn_down_total",
			Help: "Static pods that finished (Succeeded or Failed) whose volumes and pod cgroup the agent tore down, as kubelet does.",
		}),
		terminatedErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cri_prober_terminated_pod_teardown_errors_total",
			Help: "Failed attempts to tear down the volumes and pod cgroup of a terminated static pod (each retried at the next collection).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.containers, m.sandboxes, m.terminated, m.terminatedErrors)
	}
	return m
}
