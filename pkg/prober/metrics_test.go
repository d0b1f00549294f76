package prober

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// WithLabelValues is the prober_probe_total series of lvs (kubelet's label
// order) as a collector of it alone, in the shape of a CounterVec's, for
// tests.
func (c probeTotals) WithLabelValues(lvs ...string) prometheus.Collector {
	return collectorFunc{desc: c.total, collect: func(ch chan<- prometheus.Metric) {
		c.each(func(s *series) {
			for _, u := range s.uids {
				for r, n := range u.counts {
					if l := c.totalLabels(s.key, resultLabels[r], u.uid); slices.Equal(l, lvs) {
						ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(n), l...)
					}
				}
			}
		})
	}}
}

// WithLabelValues is the duration series of lvs as a prometheus.Histogram
// (Observe does nothing), in the shape of a HistogramVec's, for tests.
func (c probeDurations) WithLabelValues(lvs ...string) prometheus.Observer {
	return durationView{collectorFunc{desc: c.duration, collect: func(ch chan<- prometheus.Metric) {
		c.each(func(s *series) {
			if slices.Equal(c.durationLabels(s.key), lvs) {
				ch <- c.histogram(s)
			}
		})
	}}}
}

type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

type durationView struct{ collectorFunc }

func (v durationView) Desc() *prometheus.Desc { return v.desc }
func (durationView) Observe(float64)          {}

func (v durationView) Write(out *dto.Metric) error {
	ch := make(chan prometheus.Metric, 1)
	go func() { v.collect(ch); close(ch) }()
	m, ok := <-ch
	if !ok {
		return errors.New("no such series")
	}
	for range ch {
	}
	return m.Write(out)
}

// vectorMetrics are kubelet's probe series as client_golang's vectors, as
// this package kept them before probeSeries: the reference a scrape of
// probeSeries must match.
type vectorMetrics struct {
	probes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newVectorMetrics() *vectorMetrics {
	return &vectorMetrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: totalHelp},
			[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds", Help: durationHelp, Buckets: prometheus.DefBuckets},
			[]string{"probe_type", "container", "pod", "namespace"}),
	}
}

type vectorWorker struct {
	v      *vectorMetrics
	labels [3][]string
	dur    []string
}

func (v *vectorMetrics) forWorker(t results.ProbeType, container, pod, namespace, uid string) *vectorWorker {
	w := &vectorWorker{v: v, dur: []string{t.String(), container, pod, namespace}}
	for i, r := range resultLabels {
		w.labels[i] = []string{t.String(), r, container, pod, namespace, uid}
		v.probes.WithLabelValues(w.labels[i]...)
	}
	v.duration.WithLabelValues(w.dur...)
	return w
}

func (w *vectorWorker) observe(o outcome, elapsed float64) {
	switch {
	case o.err != nil:
		w.v.probes.WithLabelValues(w.labels[resultUnknown]...).Inc()
		w.v.duration.WithLabelValues(w.dur...).Observe(elapsed)
	case o.result == results.Success:
		w.v.probes.WithLabelValues(w.labels[resultSuccessful]...).Inc()
		w.v.duration.WithLabelValues(w.dur...).Observe(elapsed)
	default:
		w.v.probes.WithLabelValues(w.labels[resultFailed]...).Inc()
	}
}

// scrape is what a registry of cs gives, without created timestamps
// (client_golang's vectors and probeSeries take theirs at different
// instants).
func scrape(t *testing.T, cs ...prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		require.NoError(t, reg.Register(c))
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, f := range families {
		for _, m := range f.Metric {
			if m.Counter != nil {
				m.Counter.CreatedTimestamp = nil
			}
			if m.Histogram != nil {
				m.Histogram.CreatedTimestamp = nil
			}
		}
		out = append(out, strings.Join(strings.Fields(f.String()), " "))
	}
	return out
}

// A scrape of the per-probe series gives what client_golang's vectors
// gave, through workers coming and going, two pods of one name sharing the
// duration series, and values on bucket bounds.
func TestProbeSeriesAsVectors(t *testing.T) {
	assert.Equal(t, prometheus.DefBuckets, durationBuckets[:], "kubelet's buckets")
	m, v := newMetrics(), newVectorMetrics()
	type pair struct {
		w   *workerMetrics
		ref *vectorWorker
	}
	add := func(tp results.ProbeType, container, pod, uid string) pair {
		return pair{m.forWorker(tp, container, pod, "shop", uid), v.forWorker(tp, container, pod, "shop", uid)}
	}
	observe := func(p pair, o outcome, elapsed float64) {
		p.w.observe(o, elapsed)
		p.ref.observe(o, elapsed)
	}
	ok := outcome{result: results.Success, raw: results.OutcomeSuccess}
	failed := outcome{result: results.Failure, raw: results.OutcomeFailure, reason: ReasonHTTPStatus}
	unknown := outcome{err: errors.New("no"), raw: results.OutcomeUnknown}

	live := add(results.Liveness, "app", "web", "uid-1")
	ready := add(results.Readiness, "app", "web", "uid-1")
	other := add(results.Readiness, "sidecar", "db", "uid-2")
	for i, d := range []float64{0.005, 0.0051, 0.1, 10, 11, 0} {
		observe(live, ok, d)
		observe(ready, []outcome{ok, failed, unknown}[i%3], d)
	}
	observe(other, failed, 1)
	assert.Equal(t, scrape(t, v.probes, v.duration), scrape(t, m.probes, m.duration))

	// The pod re-created with a new UID: its worker shares the duration
	// series, which stays when the old one goes.
	again := add(results.Readiness, "app", "web", "uid-3")
	observe(again, ok, 0.3)
	ready.w.delete()
	for _, l := range ready.ref.labels {
		v.probes.DeleteLabelValues(l...)
	}
	other.w.delete()
	for _, l := range other.ref.labels {
		v.probes.DeleteLabelValues(l...)
	}
	v.duration.DeleteLabelValues(other.ref.dur...)
	assert.Equal(t, scrape(t, v.probes, v.duration), scrape(t, m.probes, m.duration))
	assert.Equal(t, 6, testutil.CollectAndCount(m.probes), "two workers' three results")
	assert.Equal(t, 2, testutil.CollectAndCount(m.duration))
}

// A worker replaced by one with the same labels (a spec edit) shares its
// series: the old one going does not end them.
func TestProbeSeriesOfAReplacedWorker(t *testing.T) {
	m := newMetrics()
	old := m.forWorker(results.Liveness, "app", "web", "shop", "uid")
	old.observe(outcome{result: results.Success, raw: results.OutcomeSuccess}, 0.1)
	newer := m.forWorker(results.Liveness, "app", "web", "shop", "uid")
	old.delete()
	old.delete() // once only
	newer.observe(outcome{result: results.Success, raw: results.OutcomeSuccess}, 0.1)
	assert.Equal(t, 2.0, testutil.ToFloat64(m.probes.WithLabelValues("Liveness", "successful", "app", "web", "shop", "uid")))
	newer.delete()
	assert.Zero(t, testutil.CollectAndCount(m.probes))
	assert.Zero(t, testutil.CollectAndCount(m.duration))
}

// --probe-metrics=aggregate: the same two metrics by probe type (and
// result), every type's from the start, kept when the workers go.
func TestAggregateProbeMetrics(t *testing.T) {
	probes, agent := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	mgr, err := NewManager(nil, results.NewStore(), Config{ProbeMetrics: AggregateMetrics}, WithRegisterers(probes, agent), withRunner(&fakeRunner{}))
	require.NoError(t, err)
	m := mgr.metrics
	a := m.forWorker(results.Readiness, "app", "web", "shop", "uid-1")
	b := m.forWorker(results.Readiness, "app", "db", "shop", "uid-2")
	assert.Same(t, a, b, "one type's workers share their series")
	a.observe(outcome{result: results.Success, raw: results.OutcomeSuccess}, 0.1)
	b.observe(outcome{result: results.Failure, raw: results.OutcomeFailure, reason: ReasonHTTPStatus}, 0.1)
	a.delete()
	b.delete()
	families, err := probes.Gather()
	require.NoError(t, err)
	require.Len(t, families, 2)
	assert.Equal(t, "prober_probe_duration_seconds", families[0].GetName())
	assert.Len(t, families[0].Metric, len(results.ProbeTypes))
	assert.Equal(t, "prober_probe_total", families[1].GetName())
	assert.Len(t, families[1].Metric, len(results.ProbeTypes)*len(resultLabels))
	for _, r := range []string{"successful", "failed"} {
		assert.Equal(t, 1.0, testutil.ToFloat64(m.probes.WithLabelValues("Readiness", r)), r)
	}
	assert.Equal(t, 0.0, testutil.ToFloat64(m.probes.WithLabelValues("Liveness", "successful")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.failures.WithLabelValues("Readiness", ReasonHTTPStatus)))

	_, err = NewManager(nil, results.NewStore(), Config{ProbeMetrics: "per-container"}, withRunner(&fakeRunner{}))
	assert.ErrorContains(t, err, "not per-probe or aggregate")
}
