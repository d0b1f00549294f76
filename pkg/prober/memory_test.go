package prober

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// memState is what one configured probe keeps in steady state, besides
// its worker: its metric series, its history and its entry in the store.
type memState struct {
	metrics *workerMetrics
	history *results.History
}

// probeLabels are a probe's names, owned by the pod view in the agent:
// made before the measurement, so that only the state is counted.
type probeLabels struct{ container, pod, namespace, uid, id string }

func makeLabels(n int) []probeLabels {
	out := make([]probeLabels, n)
	for i := range out {
		out[i] = probeLabels{
			container: "app", pod: fmt.Sprintf("web-%d", i), namespace: "shop",
			uid: fmt.Sprintf("6d9c0b2e-5a4f-4c8e-9a7b-%012d", i),
			id:  fmt.Sprintf("%064x", i),
		}
	}
	return out
}

// runs are a probe's runs in steady state: a full history (failing: 10
// failures first, then 20 successes), each run's output a new string as a
// probe makes it.
func runs(failing bool) []outcome {
	var out []outcome
	if failing {
		for range results.HistoryFailures {
			out = append(out, outcome{result: results.Failure, raw: results.OutcomeFailure, reason: ReasonHTTPStatus})
		}
	}
	for range results.HistoryRecent {
		out = append(out, outcome{result: results.Success, raw: results.OutcomeSuccess})
	}
	return out
}

func output(o outcome) string {
	if o.result == results.Failure {
		return strings.Clone("HTTP probe failed with statuscode: 503")
	}
	return strings.Clone("ok\n")
}

// The three parts of a probe's state, each made for every probe at once so
// that each can be measured. mode "vectors" is the reference: kubelet's
// series as client_golang's vectors, as they were kept before probeSeries.
func fillMetrics(mode string, labels []probeLabels, list []outcome) any {
	if mode == "vectors" {
		v := newVectorMetrics()
		out := make([]*vectorWorker, len(labels))
		for i, l := range labels {
			out[i] = v.forWorker(results.Readiness, l.container, l.pod, l.namespace, l.uid)
			for _, o := range list {
				out[i].observe(o, 0.0012)
			}
		}
		return out
	}
	m := newMetrics()
	if mode == string(AggregateMetrics) {
		p := newProbeSeries(AggregateMetrics, m)
		m.probes, m.duration = probeTotals{p}, probeDurations{p}
	}
	out := make([]*workerMetrics, len(labels))
	for i, l := range labels {
		out[i] = m.forWorker(results.Readiness, l.container, l.pod, l.namespace, l.uid)
		for _, o := range list {
			out[i].observe(o, 0.0012)
		}
	}
	return out
}

func fillHistories(hs *results.Histories, labels []probeLabels, list []outcome) {
	at := time.Unix(1_800_000_000, 0)
	for _, l := range labels {
		h := hs.Get(results.HistoryKey{Pod: l.uid, Container: l.container, Type: results.Readiness})
		run := 0
		for i, o := range list {
			if i > 0 && o.raw != list[i-1].raw {
				run = 0
			}
			run++
			at = at.Add(time.Second)
			h.Add(results.Observation{Time: at, Duration: 1234567 * time.Nanosecond, Outcome: o.raw, Output: output(o),
				Consecutive: run, Threshold: 3, ContainerID: l.id})
		}
	}
}

func fillStore(store *results.Store, labels []probeLabels, list []outcome) {
	at := time.Unix(1_800_000_000, 0)
	for _, l := range labels {
		key := results.Key{ContainerID: l.id, Type: results.Readiness}
		store.Set(key, results.Success, l.uid)
		for i, o := range list {
			at = at.Add(time.Second)
			store.Observe(key, results.Observation{Time: at, Duration: 1234567 * time.Nanosecond, Outcome: o.raw, Output: output(o),
				Consecutive: i + 1, Threshold: 3, ContainerID: l.id})
		}
	}
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkProbeMemory reports the heap bytes that each configured probe
// keeps in steady state (B/probe), without its worker and goroutine: its
// kubelet series (--probe-metrics: per-probe, the default, or aggregate;
// vectors: client_golang's, for reference), its full history and its
// result store entry. healthy: no failure ever (the failure ring is never
// made); failing: both rings full. Run with -benchtime=1x: it is a
// measurement, not a timing (docs/api.md, docs/performance.md).
func BenchmarkProbeMemory(b *testing.B) {
	const n = 10_000
	for _, mode := range []string{string(PerProbeMetrics), string(AggregateMetrics), "vectors"} {
		for _, failing := range []bool{false, true} {
			name := mode + "/healthy"
			if failing {
				name = mode + "/failing"
			}
			b.Run(name, func(b *testing.B) {
				labels := makeLabels(n)
				list := runs(failing)
				var metricsB, historyB, storeB float64
				for range b.N {
					at := heapAlloc()
					step := func() float64 {
						now := heapAlloc()
						d := float64(int64(now)-int64(at)) / n
						at = now
						return d
					}
					workers := fillMetrics(mode, labels, list)
					metricsB = step()
					hs := results.NewHistories()
					fillHistories(hs, labels, list)
					historyB = step()
					store := results.NewStore()
					fillStore(store, labels, list)
					storeB = step()
					runtime.KeepAlive(workers)
					runtime.KeepAlive(hs)
					runtime.KeepAlive(store)
				}
				runtime.KeepAlive(labels)
				b.ReportMetric(metricsB+historyB+storeB, "B/probe")
				b.ReportMetric(metricsB, "metrics-B/probe")
				b.ReportMetric(historyB, "history-B/probe")
				b.ReportMetric(storeB, "store-B/probe")
			})
		}
	}
}
