package cri

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics are the CRI boundary's series: how long each CRI call takes and
// how long a relist takes. Create them with NewMetrics and pass them to
// Dial (WithMetrics) and NewPoller (PollerConfig.Metrics).
type Metrics struct {
	requests *prometheus.HistogramVec
	relist   prometheus.Histogram
}

// NewMetrics registers the CRI series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cri_prober_cri_request_duration_seconds",
			Help:    "Duration of CRI calls, by method and gRPC status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "code"}),
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cri_prober_relist_duration_seconds",
			Help:    "Duration of a relist: the list calls, status calls for what changed, and the snapshot.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.relist} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.requests.WithLabelValues(path.Base(method), status.Code(err).String()).Observe(time.Since(start).Seconds())
	return err
}

// WithMetrics times every CRI call of the client.
func WithMetrics(m *Metrics) Option { return WithUnaryInterceptor(m.intercept) }
