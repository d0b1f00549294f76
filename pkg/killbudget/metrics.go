package killbudget

import "github.com/prometheus/client_golang/prometheus"

// metrics are the budget's gauges: the probe-triggered kills that wait
// now, by reason, and whether kills are paused.
type metrics struct {
	deferred *prometheus.GaugeVec
	paused   prometheus.Gauge
}

// newMetrics creates the budget's series and registers them with reg
// (nil: not exported, as in tests). The deferred series exist at 0 from
// the start, so that an alert on them works before the first deferral.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deferred: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cri_prober_kills_deferred",
			Help: "Probe-triggered kills that wait now, by reason: node-budget (--kill-budget spent), pod-budget (--pod-kill-budget spent) or paused (cri-prober pause).",
		}, []string{"reason"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_kills_paused",
			Help: "1 while probe-triggered kills are paused on the node (cri-prober pause), else 0.",
		}),
	}
	for _, reason := range []string{DeferNode, DeferPod, DeferPaused} {
		m.deferred.WithLabelValues(reason)
	}
	if reg != nil {
		reg.MustRegister(m.deferred, m.paused)
	}
	return m
}
