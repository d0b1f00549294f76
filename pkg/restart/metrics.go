package restart

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// metrics are the restarter's series, by pod and container as
// kube-state-metrics' restart counts are, so that an alert can say which
// container restarts; a gone pod's series are deleted with it.
type metrics struct {
	kills    *prometheus.CounterVec
	restarts *prometheus.CounterVec
	// deferredTotal: every deferral of a probe-triggered kill told (the
	// restart budget, a pause); the kills that wait now are the budget's
	// (pkg/killbudget).
	deferredTotal *prometheus.CounterVec

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
		deferredTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_kills_deferred_total",
			Help: "Probe-triggered kills deferred (each container instance once per reason), by reason: node-budget, pod-budget or paused.",
		}, []string{"reason"}),
		pods: map[string]prometheus.Labels{},
	}
	for _, reason := range []string{killbudget.DeferNode, killbudget.DeferPod, killbudget.DeferPaused} {
		m.deferredTotal.WithLabelValues(reason)
	}
	if reg != nil {
		reg.MustRegister(m.kills, m.restarts, m.deferredTotal)
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
