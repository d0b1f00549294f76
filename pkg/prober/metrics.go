package prober

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Label values of prober_probe_total's result label, kubelet's.
const (
	metricSuccessful = "successful"
	metricFailed     = "failed"
	metricUnknown    = "unknown"
)

// metrics are kubelet's probe series (for /metrics/probes) and the agent's
// own. Nothing here touches the global registry.
type metrics struct {
	probes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lateness prometheus.Histogram
	failures *prometheus.CounterVec
	// agentResources counts probes the agent could not run for its own
	// shortage, by which (netprobe.ResourceCause).
	agentResources *prometheus.CounterVec

	// kubelet's duration series has no pod_uid: two pods with one name
	// (re-created with a new UID) share a series, deleted when the last of
	// their workers goes.
	mu           sync.Mutex
	durationRefs map[string]int
}

func newMetrics() *metrics {
	return &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prober_probe_duration_seconds",
			Help:    "Duration in seconds for a probe response.",
			Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cri_prober_probe_lateness_seconds",
			Help:    "How late a periodic probe started after its tick was due.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		failures:       newFailures(),
		agentResources: newAgentResources(),
		durationRefs:   map[string]int{},
	}
}

// newFailures counts failed and unrunnable probes by a bounded reason,
// every series present from the start (at 0) so dashboards and alerts
// see them before the first failure.
func newFailures() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cri_prober_probe_failures_total",
		Help: "Probes that failed or could not run, by probe type and reason: " + strings.Join(FailureReasons, ", ") + ".",
	}, []string{"probe_type", "reason"})
	for _, t := range results.ProbeTypes {
		for _, r := range FailureReasons {
			v.WithLabelValues(t.String(), r)
		}
	}
	return v
}

// newAgentResources counts the agent's own shortages, every cause present
// from the start: an alert on it says the agent, not a container, needs
// attention.
func newAgentResources() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cri_prober_agent_resource_errors_total",
		Help: "Probes that could not run because the agent or its node ran out of a resource, by cause: " + strings.Join(netprobe.ResourceCauses(), ", ") + ".",
	}, []string{"cause"})
	for _, c := range netprobe.ResourceCauses() {
		v.WithLabelValues(c)
	}
	return v
}

// WithRegisterers exports kubelet's probe series to probes (kubelet serves
// them on /metrics/probes) and the agent's own to agent.
func WithRegisterers(probes, agent prometheus.Registerer) Option {
	return func(m *Manager) error {
		if err := probes.Register(m.metrics.probes); err != nil {
			return err
		}
		if err := probes.Register(m.metrics.duration); err != nil {
			return err
		}
		if err := agent.Register(m.metrics.lateness); err != nil {
			return err
		}
		if err := agent.Register(m.metrics.failures); err != nil {
			return err
		}
		if err := agent.Register(m.metrics.agentResources); err != nil {
			return err
		}
		return agent.Register(readyCollector{m: m})
	}
}

// WithLatenessObserver also sends each periodic probe's lateness (seconds)
// to o: for a load test that wants exact percentiles.
func WithLatenessObserver(o prometheus.Observer) Option {
	return func(m *Manager) error {
		m.extraLateness = o
		return nil
	}
}

// workerMetrics are one worker's series, deleted when it ends as kubelet
// deletes them.
type workerMetrics struct {
	m                           *metrics
	probeType                   string
	successful, failed, unknown prometheus.Counter
	duration                    prometheus.Observer
	resultLabels                [3][]string
	durationLabels              []string
}

func (m *metrics) forWorker(t results.ProbeType, container, pod, namespace, uid string) *workerMetrics {
	w := &workerMetrics{m: m, probeType: t.String()}
	for i, r := range []string{metricSuccessful, metricFailed, metricUnknown} {
		w.resultLabels[i] = []string{t.String(), r, container, pod, namespace, uid}
	}
	w.successful = m.probes.WithLabelValues(w.resultLabels[0]...)
	w.failed = m.probes.WithLabelValues(w.resultLabels[1]...)
	w.unknown = m.probes.WithLabelValues(w.resultLabels[2]...)
	w.durationLabels = []string{t.String(), container, pod, namespace}
	w.duration = m.duration.WithLabelValues(w.durationLabels...)
	m.mu.Lock()
	m.durationRefs[strings.Join(w.durationLabels, "\x00")]++
	m.mu.Unlock()
	return w
}

// observe counts a probe run as kubelet does: duration only for
// successful (and unknown) results. kubelet never counts "unknown"; here it
// counts probes that could not run, which kubelet drops silently.
func (w *workerMetrics) observe(o outcome, elapsed float64) {
	if o.reason != "" {
		w.m.failures.WithLabelValues(w.probeType, o.reason).Inc()
	}
	if o.resourceCause != "" {
		w.m.agentResources.WithLabelValues(o.resourceCause).Inc()
	}
	switch {
	case o.err != nil:
		w.unknown.Inc()
		w.duration.Observe(elapsed)
	case o.result == results.Success:
		w.successful.Inc()
		w.duration.Observe(elapsed)
	default:
		w.failed.Inc()
	}
}

func (w *workerMetrics) delete() {
	for _, l := range w.resultLabels {
		w.m.probes.DeleteLabelValues(l...)
	}
	key := strings.Join(w.durationLabels, "\x00")
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.durationRefs[key]--; w.m.durationRefs[key] <= 0 {
		delete(w.m.durationRefs, key)
		w.m.duration.DeleteLabelValues(w.durationLabels...)
	}
}

// readyCollector reports each container's Ready flag at scrape time.
type readyCollector struct{ m *Manager }

var readyDesc = prometheus.NewDesc("cri_prober_container_ready",
	"Whether a container is ready (1) or not (0), as kubelet would report it.",
	[]string{"namespace", "pod", "container"}, nil)

func (c readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- readyDesc }

// Collect reports each pod that its namespace and name stand for
// (pods.View.ByName): a pod re-created with a new UID while its old sandbox
// lingers would otherwise give two series with the same labels, and a
// scrape error.
func (c readyCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.m.view.Load()
	for _, pod := range v.Pods() {
		if current, _ := v.ByName(pod.Namespace, pod.Name); current != pod {
			continue
		}
		p := pods.ReportPod(pod, c.m.results)
		for _, ctr := range p.Containers {
			if ctr.ID == "" {
				continue
			}
			v := 0.0
			if ctr.Ready {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, v, p.Namespace, p.Name, ctr.Name)
		}
	}
}
