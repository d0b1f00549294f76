package prober

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// ProbeMetrics is how kubelet's probe series are kept (--probe-metrics).
type ProbeMetrics string

const (
	// PerProbeMetrics keeps kubelet's series: prober_probe_total by
	// probe_type, result, container, pod, namespace and pod_uid, and
	// prober_probe_duration_seconds by probe_type, container, pod and
	// namespace. The default.
	PerProbeMetrics ProbeMetrics = "per-probe"
	// AggregateMetrics keeps the same two metrics by probe_type (and
	// result) only: a few series for the whole node, whatever the number
	// of probes.
	AggregateMetrics ProbeMetrics = "aggregate"
)

// ParseProbeMetrics reads a --probe-metrics value.
func ParseProbeMetrics(s string) (ProbeMetrics, error) {
	switch m := ProbeMetrics(s); m {
	case PerProbeMetrics, AggregateMetrics:
		return m, nil
	}
	return "", fmt.Errorf("%q is not per-probe or aggregate", s)
}

// Label values of prober_probe_total's result label, kubelet's, in the
// order of uidCounts.counts.
var resultLabels = [...]string{"successful", "failed", "unknown"}

const (
	resultSuccessful = iota
	resultFailed
	resultUnknown
)

// metrics are kubelet's probe series (for /metrics/probes) and the agent's
// own. Nothing here touches the global registry.
type metrics struct {
	// probes and duration are kubelet's prober_probe_total and
	// prober_probe_duration_seconds, two views of one probeSeries.
	probes   probeTotals
	duration probeDurations
	lateness prometheus.Histogram
	failures *prometheus.CounterVec
	// agentResources counts probes the agent could not run for its own
	// shortage, by which (probe.ResourceCause).
	agentResources *prometheus.CounterVec
	// probeRegisterer has probes and duration (nil: not registered).
	probeRegisterer prometheus.Registerer
}

func newMetrics() *metrics {
	m := &metrics{
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cri_prober_probe_lateness_seconds",
			Help:    "How late a periodic probe started after its tick was due.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		failures:       newFailures(),
		agentResources: newAgentResources(),
	}
	p := newProbeSeries(PerProbeMetrics, m)
	m.probes, m.duration = probeTotals{p}, probeDurations{p}
	return m
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
		Help: "Probes that could not run because the agent or its node ran out of a resource, by cause: " + strings.Join(resourceCauses(), ", ") + " (the agent's goroutines starved: a network probe's timeout is not the target's).",
	}, []string{"cause"})
	for _, c := range resourceCauses() {
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
		m.metrics.probeRegisterer = probes
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

// WithProbeMetrics says how kubelet's probe series are kept (default:
// PerProbeMetrics). It comes before WithRegisterers: a registry never
// takes a metric's name again with other labels.
func WithProbeMetrics(mode ProbeMetrics) Option {
	return func(m *Manager) error {
		if _, err := ParseProbeMetrics(string(mode)); err != nil {
			return err
		}
		if mode == m.metrics.probes.mode {
			return nil
		}
		if m.metrics.probeRegisterer != nil {
			return errors.New("prober: WithProbeMetrics must come before WithRegisterers")
		}
		p := newProbeSeries(mode, m.metrics)
		m.metrics.probes, m.metrics.duration = probeTotals{p}, probeDurations{p}
		return nil
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
	m         *metrics
	p         *probeSeries
	probeType string
	s         *series
	u         *uidCounts
	deleted   bool // guarded by p.mu
}

// forWorker makes a worker's series, at 0 (per probe), or gives it its
// type's (aggregate: all the workers of a type share them).
func (m *metrics) forWorker(t results.ProbeType, container, pod, namespace, uid string) *workerMetrics {
	p := m.probes.probeSeries
	if p.mode == AggregateMetrics {
		return p.shared[t]
	}
	w := &workerMetrics{m: m, p: p, probeType: t.String()}
	w.s, w.u = p.add(seriesKey{t, container, pod, namespace}, uid)
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
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case o.err != nil:
		w.u.counts[resultUnknown]++
		s.observe(elapsed)
	case o.result == results.Success:
		w.u.counts[resultSuccessful]++
		s.observe(elapsed)
	default:
		w.u.counts[resultFailed]++
	}
}

// delete ends the worker's series (per probe; aggregate series stay).
func (w *workerMetrics) delete() {
	if w.p.mode == AggregateMetrics {
		return
	}
	w.p.remove(w)
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
	st := c.m.status.Load()
	for _, pod := range st.Pods() {
		if current, _ := st.ByName(pod.Namespace, pod.Name); current != pod {
			continue
		}
		p := pods.ReportPod(pod, st.For(pod.Key), c.m.results, pods.GateSet{})
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

// probeSeries holds kubelet's two probe metrics, collected by its two
// views (probeTotals, probeDurations). It does not use client_golang's
// vectors: their children cost about 5 KiB per probe (a Desc's label pairs
// as protobuf messages for each of four children, a histogram's two
// hot/cold count sets with native-histogram maps), where the same series
// here take a few hundred bytes (docs/api.md); what a scrape sees is the
// same (TestProbeSeriesAsVectors).
type probeSeries struct {
	mode            ProbeMetrics
	total, duration *prometheus.Desc

	mu sync.Mutex
	m  map[seriesKey]*series
	// shared are the aggregate mode's workerMetrics, by probe type.
	shared map[results.ProbeType]*workerMetrics
}

// seriesKey is a duration series' labels (per probe); the probe type
// alone in aggregate mode.
type seriesKey struct {
	probeType                 results.ProbeType
	container, pod, namespace string
}

// durationBuckets are kubelet's, prometheus.DefBuckets (TestProbeSeriesAsVectors).
var durationBuckets = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// series is one duration histogram and the prober_probe_total counters of
// the pods (by UID) under it: kubelet's duration series has no pod_uid,
// so that two pods with one name (re-created with a new UID) share it; it
// goes when the last of their workers goes.
type series struct {
	key     seriesKey
	refs    int32
	mu      sync.Mutex // guards what follows, and the counts of uids
	created int64      // unix ns
	sum     float64
	buckets [len(durationBuckets) + 1]uint64 // by bucket (not cumulative), the last above the highest bound
	uids    []*uidCounts
}

// uidCounts are one pod UID's prober_probe_total counters.
type uidCounts struct {
	uid     string
	refs    int32
	created int64 // unix ns
	counts  [len(resultLabels)]uint64
}

func newProbeSeries(mode ProbeMetrics, m *metrics) *probeSeries {
	p := &probeSeries{mode: mode, m: map[seriesKey]*series{}}
	if mode == AggregateMetrics {
		p.total = prometheus.NewDesc("prober_probe_total", totalHelp, []string{"probe_type", "result"}, nil)
		p.duration = prometheus.NewDesc("prober_probe_duration_seconds", durationHelp, []string{"probe_type"}, nil)
		// Every type's series from the start, never deleted: counters
		// that go on across the probes that come and go.
		p.shared = map[results.ProbeType]*workerMetrics{}
		for _, t := range results.ProbeTypes {
			w := &workerMetrics{m: m, p: p, probeType: t.String()}
			w.s, w.u = p.add(seriesKey{probeType: t}, "")
			p.shared[t] = w
		}
		return p
	}
	p.total = prometheus.NewDesc("prober_probe_total", totalHelp,
		[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}, nil)
	p.duration = prometheus.NewDesc("prober_probe_duration_seconds", durationHelp,
		[]string{"probe_type", "container", "pod", "namespace"}, nil)
	return p
}

// kubelet's help texts.
const (
	totalHelp    = "Cumulative number of a liveness, readiness or startup probe for a container by result."
	durationHelp = "Duration in seconds for a probe response."
)

// add takes a reference to k's series and its uid's counters, made at 0
// if new.
func (p *probeSeries) add(k seriesKey, uid string) (*series, *uidCounts) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[k]
	if s == nil {
		s = &series{key: k, created: now}
		p.m[k] = s
	}
	s.refs++
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.uids {
		if u.uid == uid {
			u.refs++
			return s, u
		}
	}
	u := &uidCounts{uid: uid, refs: 1, created: now}
	s.uids = append(s.uids, u)
	return s, u
}

// remove drops w's references taken by add, once: the counters go with
// their last worker, the histogram with the last worker of its pod name.
func (p *probeSeries) remove(w *workerMetrics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.deleted {
		return
	}
	w.deleted = true
	s, u := w.s, w.u
	s.mu.Lock()
	if u.refs--; u.refs == 0 {
		s.uids = slices.DeleteFunc(s.uids, func(v *uidCounts) bool { return v == u })
	}
	s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(p.m, s.key)
	}
}

// observe adds a duration; s.mu is held.
func (s *series) observe(v float64) {
	i, _ := slices.BinarySearch(durationBuckets[:], v) // the first bound ≥ v: le
	s.buckets[i]++
	s.sum += v
}

// durationLabels are k's label values in the duration series.
func (p *probeSeries) durationLabels(k seriesKey) []string {
	if p.mode == AggregateMetrics {
		return []string{k.probeType.String()}
	}
	return []string{k.probeType.String(), k.container, k.pod, k.namespace}
}

// totalLabels are the label values of one prober_probe_total series.
func (p *probeSeries) totalLabels(k seriesKey, result, uid string) []string {
	if p.mode == AggregateMetrics {
		return []string{k.probeType.String(), result}
	}
	return []string{k.probeType.String(), result, k.container, k.pod, k.namespace, uid}
}

// each calls f with every series, s.mu held.
func (p *probeSeries) each(f func(*series)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.m {
		s.mu.Lock()
		f(s)
		s.mu.Unlock()
	}
}

// histogram is s as a client_golang metric; s.mu is held.
func (p *probeSeries) histogram(s *series) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(durationBuckets))
	var count uint64
	for i, le := range durationBuckets {
		count += s.buckets[i]
		cumulative[le] = count
	}
	count += s.buckets[len(durationBuckets)]
	return prometheus.MustNewConstHistogramWithCreatedTimestamp(p.duration, count, s.sum, cumulative,
		time.Unix(0, s.created), p.durationLabels(s.key)...)
}

// probeTotals collects prober_probe_total.
type probeTotals struct{ *probeSeries }

func (c probeTotals) Describe(ch chan<- *prometheus.Desc) { ch <- c.total }

func (c probeTotals) Collect(ch chan<- prometheus.Metric) {
	c.each(func(s *series) {
		for _, u := range s.uids {
			for r, n := range u.counts {
				ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.total, prometheus.CounterValue, float64(n),
					time.Unix(0, u.created), c.totalLabels(s.key, resultLabels[r], u.uid)...)
			}
		}
	})
}

// probeDurations collects prober_probe_duration_seconds.
type probeDurations struct{ *probeSeries }

func (c probeDurations) Describe(ch chan<- *prometheus.Desc) { ch <- c.duration }

func (c probeDurations) Collect(ch chan<- prometheus.Metric) {
	c.each(func(s *series) { ch <- c.histogram(s) })
}
