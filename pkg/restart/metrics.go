package restart

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// metrics are the restarter's series, by pod and container as
// kube-state-metrics' restart counts are, so that an alert can say which
// container restarts; a gone pod's series are deleted with it.
type metrics struct {
	kills    *prometheus.CounterVec
	restarts *prometheus.CounterVec
	// deferred and deferredTotal: the probe-triggered kills that wait (the
	// restart budget, a pause), and every deferral told; paused: 1 while
	// kills are paused.
	deferred      *prometheus.GaugeVec
	deferredTotal *prometheus.CounterVec
	paused        prometheus.Gauge

	mu   sync.Mutex
	pods map[string]prometheus.Labels // pod key → the labels its series carry
}

var podLabels = []string{"namespace", "pod", "pod_uid", "container"}

// newMetrics creates the restarter's series and registers them with reg
// (nil: not exported, as in tests).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_container_kills_total",
			Help: "Containers stopped because a liveness or startup probe failed, by pod, container and probe type.",
		}, append(podLabels, "probe_type")),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_container_restarts_total",
			Help: "Containers re-created, by pod, container and reason: liveness or startup (after a probe kill), postStart (after its hook failed), unknown (a container in an unknown state), or exit.",
		}, append(podLabels, "reason")),
		deferred: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cri_prober_kills_deferred",
			Help: "Probe-triggered kills that wait now, by reason: node-budget (--kill-budget spent), pod-budget (--pod-kill-budget spent) or paused (cri-prober pause).",
		}, []string{"reason"}),
		deferredTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_kills_deferred_total",
			Help: "Probe-triggered kills deferred (each container instance once per reason), by reason: node-budget, pod-budget or paused.",
		}, []string{"reason"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_kills_paused",
			Help: "1 while probe-triggered kills are paused on the node (cri-prober pause), else 0.",
		}),
		pods: map[string]prometheus.Labels{},
	}
	for _, reason := range []string{DeferNode, DeferPod, DeferPaused} {
		m.deferred.WithLabelValues(reason)
		m.deferredTotal.WithLabelValues(reason)
	}
	if reg != nil {
		reg.MustRegister(m.kills, m.restarts, m.deferred, m.deferredTotal, m.paused)
	}
	return m
}

// labels are the series labels of a pod's container, remembered so that
// forget can delete them.
func (m *metrics) labels(p *pods.Pod, container, key, value string) prometheus.Labels {
	m.mu.Lock()
	m.pods[p.Key] = prometheus.Labels{"namespace": p.Namespace, "pod": p.Name, "pod_uid": p.UID}
	m.mu.Unlock()
	return prometheus.Labels{"namespace": p.Namespace, "pod": p.Name, "pod_uid": p.UID, "container": container, key: value}
}

func (m *metrics) killed(p *pods.Pod, container string, probeType string) {
	m.kills.With(m.labels(p, container, "probe_type", probeType)).Inc()
}

func (m *metrics) restarted(p *pods.Pod, container string, reason Cause) {
	m.restarts.With(m.labels(p, container, "reason", string(reason))).Inc()
}

// forget deletes a gone pod's series.
func (m *metrics) forget(key string) {
	m.mu.Lock()
	labels, ok := m.pods[key]
	delete(m.pods, key)
	m.mu.Unlock()
	if ok {
		m.kills.DeletePartialMatch(labels)
		m.restarts.DeletePartialMatch(labels)
	}
}

// WithRegisterer exports the restarter's metrics to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Restarter) error {
		r.metrics = newMetrics(reg)
		return nil
	}
}
