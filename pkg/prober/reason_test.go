package prober

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// The outputs are kubelet's (netprobe's tests pin them) and Go's transport
// errors.
func TestNetworkFailureReason(t *testing.T) {
	for output, want := range map[string]string{
		"HTTP probe failed with statuscode: 503":                                                                  ReasonHTTPStatus,
		`Get "http://10.0.0.1:8080/": dial tcp 10.0.0.1:8080: connect: connection refused`:                        ReasonConnectionRefused,
		`Get "http://10.0.0.1:8080/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`: ReasonTimeout,
		"dial tcp 10.0.0.1:80: i/o timeout":                                                                       ReasonTimeout,
		`service unhealthy (responded with "NOT_SERVING")`:                                                        ReasonGRPCNotServing,
		"error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service": ReasonGRPCNotServing,
		`timeout: failed to connect service "10.0.0.1:5000" within 1s: context deadline exceeded`:                 ReasonTimeout,
		"timeout: health rpc did not complete within 1s":                                                          ReasonTimeout,
		`Get "http://10.0.0.1:8080/": stopped after 10 redirects`:                                                 ReasonNetwork,
		"read tcp 10.0.0.2:40000->10.0.0.1:8080: read: connection reset by peer":                                  ReasonNetwork,
	} {
		assert.Equal(t, want, networkFailureReason(output), output)
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
