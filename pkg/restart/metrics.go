package restart

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	kills    *prometheus.CounterVec
	restarts *prometheus.CounterVec
}

// newMetrics creates the restarter's series and registers them with reg
// (nil: not exported, as in tests).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_container_kills_total",
			Help: "Containers stopped because a liveness or startup probe failed, by probe type.",
		}, []string{"probe_type"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_container_restarts_total",
			Help: "Containers re-created, by reason: liveness or startup (after a probe kill), postStart (after its hook failed), unknown (a container in an unknown state), or exit.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.kills, m.restarts)
	}
	return m
}

// WithRegisterer exports the restarter's metrics to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Restarter) error {
		r.metrics = newMetrics(reg)
		return nil
	}
}
