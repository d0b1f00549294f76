package exec

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	inFlight  prometheus.Gauge
	waiting   prometheus.Gauge
	queueWait prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_exec_in_flight",
			Help: "Exec probe commands running now.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_exec_waiting",
			Help: "Exec probe commands waiting for a slot of their pod under --max-concurrent-exec-per-pod.",
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cri_prober_exec_queue_wait_seconds",
			Help:    "How long exec probe commands waited for a slot of their pod (--max-concurrent-exec-per-pod).",
			Buckets: []float64{.0001, .001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.inFlight, m.waiting, m.queueWait} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
