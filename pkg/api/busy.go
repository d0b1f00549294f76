package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// MaxBusyRequests bounds the expensive requests served at once (the pod
// list, the status page, events, histories, restarts): each builds and
// writes up to megabytes, and a flood of them from any local client would
// take the CPU the probes need. Beyond it a client gets 503 with
// Retry-After, as promhttp's in-flight limit answers /metrics.
const MaxBusyRequests = 4

// MetricsHandler serves a scrape of g, at most 2 at once: a scrape writes
// megabytes at thousands of probes, and a flood of them from any local
// client is answered 503 beyond that, not with the CPU the probes need
// (as MaxBusyRequests bounds the rest).
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second, ErrorHandling: promhttp.ContinueOnError})
}

// busyRetryAfter is the Retry-After of a busy answer, in seconds.
const busyRetryAfter = 1

// busyMessage is the body of a busy answer.
const busyMessage = "cri-prober: the state API is answering as many expensive requests as it serves at once; try again in a second\n"

// bounded serves h for at most MaxBusyRequests requests at once.
func (s *Server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.busy <- struct{}{}:
			defer func() { <-s.busy }()
			h(w, r)
		default:
			s.m.rejected.WithLabelValues(rejectedBusy).Inc()
			w.Header().Set("Retry-After", strconv.Itoa(busyRetryAfter))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(busyMessage)) //nolint:errcheck // the client went away
		}
	}
}

// Versioned is a Reporter that says what its report would show, so that
// the pod list is made once per state and sent to every client asking
// meanwhile: the pods' status (their view and what the pod sync adds),
// and the results store's versions (results.Store.Versions).
type Versioned interface {
	ReportVersion() (status *pods.Status, results, observations uint64)
}

// podListFresh is how long a pod list stays in use after probe runs it
// does not show were observed (a probe's time and output): a list made
// for every run of 300 probes a second would be made for every request.
// A new view (pods, containers, states) or a stable result's change makes
// a new list at once.
const podListFresh = time.Second

// podListCache is the last pod list made, in JSON.
type podListCache struct {
	mu           sync.Mutex // held while a list is made: clients asking meanwhile wait for it
	status       *pods.Status
	results      uint64
	observations uint64
	health       string
	made         time.Time
	body         []byte
}

// podListJSON is the pod list as JSON, made anew only when what it shows
// changed.
func (s *Server) podListJSON() []byte {
	health := ""
	if err := s.health(); err != nil {
		health = err.Error()
	}
	v, ok := s.pods.(Versioned)
	if !ok {
		return s.makePodList(health)
	}
	c := &s.podList
	c.mu.Lock()
	defer c.mu.Unlock()
	status, results, observations := v.ReportVersion()
	now := s.clock.Now()
	if c.body != nil && c.status == status && c.results == results && c.health == health &&
		(c.observations == observations || now.Sub(c.made) < podListFresh) {
		return c.body
	}
	c.body = s.makePodList(health)
	c.status, c.results, c.observations, c.health, c.made = status, results, observations, health, now
	return c.body
}

func (s *Server) makePodList(health string) []byte {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(PodList{Pods: s.snapshot(), RuntimeError: health}) //nolint:errcheck // plain data
	return b.Bytes()
}
