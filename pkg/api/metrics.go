package api

import "github.com/prometheus/client_golang/prometheus"

// Why a client was refused (cri_prober_api_rejected_total's reason).
const (
	// rejectedConnectionLimit: a new connection closed at once, every
	// connection being busy with a request or a stream.
	rejectedConnectionLimit = "connection_limit"
	// rejectedStreamLimit: an event stream answered 503.
	rejectedStreamLimit = "stream_limit"
	// rejectedHost: a Host header that names none of the agent's
	// addresses (DNS rebinding), answered 421.
	rejectedHost = "host"
	// rejectedSourceLimit: a new connection closed at once, its source
	// holding as many as one source may, none of them idle.
	rejectedSourceLimit = "source_limit"
	// rejectedAuthFailures: a new connection closed at once, its source's
	// requests having failed before reaching the API (authentication)
	// too often lately.
	rejectedAuthFailures = "auth_failures"
	// rejectedBusy: an expensive request (the pod list, the status page,
	// events, histories) beyond MaxBusyRequests at once, answered 503.
	rejectedBusy = "busy"
)

// Why the server closed a connection it had accepted
// (cri_prober_api_dropped_total's reason).
const (
	// droppedIdleAtLimit: an idle connection (none or no more requests
	// on it) closed to make room for a new one.
	droppedIdleAtLimit = "idle_at_limit"
	// droppedSlowStream: an event stream whose client stopped reading.
	droppedSlowStream = "slow_stream"
)

type metrics struct {
	connections prometheus.Gauge
	streams     prometheus.Gauge
	rejected    *prometheus.CounterVec
	dropped     *prometheus.CounterVec
}

// newMetrics makes the API's metrics and registers them with reg (nil:
// kept, not exported). Every reason's series exists from the start, so
// that a rate() over it works before the first rejection.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cri_prober_api_connections",
			Help: "Connections to the state API open now (capped by --web.max-connections)."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cri_prober_api_event_streams",
			Help: "Event streams (/api/v1/events?watch=1) served now (capped by --web.max-event-streams)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cri_prober_api_rejected_total",
			Help: "Clients of the state API refused, by reason: connection_limit (every connection busy), source_limit (a source holding as many connections as one may, none idle), auth_failures (a source whose requests kept failing authentication, for 30 s), stream_limit (503), host (a Host header not the agent's, 421), busy (as many expensive requests as are served at once, 503)."},
			[]string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cri_prober_api_dropped_total",
			Help: "Connections to the state API the agent closed, by reason: idle_at_limit (idle, to make room for a new one), slow_stream (an event stream whose client stopped reading)."},
			[]string{"reason"}),
	}
	for _, r := range []string{rejectedConnectionLimit, rejectedSourceLimit, rejectedAuthFailures, rejectedStreamLimit, rejectedHost, rejectedBusy} {
		m.rejected.WithLabelValues(r)
	}
	for _, r := range []string{droppedIdleAtLimit, droppedSlowStream} {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.connections, m.streams, m.rejected, m.dropped)
	}
	return m
}
