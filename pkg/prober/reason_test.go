package prober

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Every cause a network probe reports has its reason.
func TestEveryCauseHasAReason(t *testing.T) {
	for c := probe.CauseNone; c <= probe.CauseNotServing; c++ {
		assert.Contains(t, FailureReasons, failureReason[c], "cause %d", c)
	}
}

// Every reason's series exists from the start; each failure counts once.
func TestFailuresMetric(t *testing.T) {
	m := newMetrics()
	assert.Equal(t, len(results.ProbeTypes)*len(FailureReasons), testutil.CollectAndCount(m.failures))
	w := m.forWorker(results.Liveness, "app", "web", "shop", "uid")
	w.observe(outcome{result: results.Failure, raw: results.OutcomeFailure, reason: ReasonTimeout}, 1)
	w.observe(outcome{result: results.Success, raw: results.OutcomeSuccess}, 0.1)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.failures.WithLabelValues("Liveness", ReasonTimeout)))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.failures.WithLabelValues("Readiness", ReasonTimeout)))
}
