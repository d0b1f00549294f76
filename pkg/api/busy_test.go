package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// slowPods reports once release is closed, counting the reports made.
type slowPods struct {
	fakePods
	release chan struct{}
	made    atomic.Int32
}

func (s *slowPods) Report() []pods.PodReport {
	<-s.release
	s.made.Add(1)
	return s.fakePods
}

// Expensive requests beyond MaxBusyRequests at once get 503 with
// Retry-After, counted, instead of taking the CPU the probes need (the
// review's flood of /api/v1/pods timed out 83 probes of a healthy
// target); cheap ones (/healthz, /ready) are served meanwhile. Fails on
// the old code: every request was served at once.
func TestExpensiveRequestsAreBounded(t *testing.T) {
	p := &slowPods{fakePods: testPods(), release: make(chan struct{})}
	s := New(Config{Pods: p, Events: events.NewRing(1), Health: healthy})
	h := s.Handler()
	var wg sync.WaitGroup
	codes := make(chan int, MaxBusyRequests)
	for range MaxBusyRequests {
		wg.Go(func() {
			code, _ := get(t, h, "/api/v1/pods")
			codes <- code
		})
	}
	require.Eventually(t, func() bool { return len(s.busy) == MaxBusyRequests }, 10*time.Second, time.Millisecond)

	for _, path := range []string{"/api/v1/pods", "/", "/api/v1/events"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, path)
		assert.Equal(t, "1", rec.Header().Get("Retry-After"), path)
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(s.m.rejected.WithLabelValues(rejectedBusy)))
	code, _ := get(t, h, "/healthz")
	assert.Equal(t, http.StatusOK, code, "cheap requests are served meanwhile")
	code, _ = get(t, h, "/api/v1/pods/shop/db/ready")
	assert.Equal(t, http.StatusOK, code)

	close(p.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		assert.Equal(t, http.StatusOK, c)
	}
	code, _ = get(t, h, "/api/v1/pods")
	assert.Equal(t, http.StatusOK, code, "served again once the others are done")
}

// versionedPods says what its report would show.
type versionedPods struct {
	fakePods
	status                *pods.Status
	results, observations uint64
	made                  int
}

func (v *versionedPods) Report() []pods.PodReport { v.made++; return v.fakePods }
func (v *versionedPods) ReportVersion() (*pods.Status, uint64, uint64) {
	return v.status, v.results, v.observations
}

// The pod list is made once per state of what it shows and sent to every
// client meanwhile: a new view or a stable result's change makes it anew
// at once; probe runs it does not show make it anew a second later at
// most. Compact, unless ?pretty.
func TestPodListMadeOncePerState(t *testing.T) {
	v := &versionedPods{fakePods: testPods(), status: &pods.Status{}}
	s := New(Config{Pods: v, Events: events.NewRing(1), Health: healthy})
	clk := testingclock.NewFakeClock(t0)
	s.clock = clk
	h := s.Handler()
	for range 10 {
		code, _ := get(t, h, "/api/v1/pods")
		require.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, 1, v.made, "one state, one list")

	v.observations++
	get(t, h, "/api/v1/pods")
	assert.Equal(t, 1, v.made, "probe runs: the list of a moment ago")
	clk.Step(podListFresh)
	get(t, h, "/api/v1/pods")
	assert.Equal(t, 2, v.made, "a second later: anew")

	v.results++
	get(t, h, "/api/v1/pods")
	assert.Equal(t, 3, v.made, "a stable result changed: at once")
	v.status = &pods.Status{}
	_, body := get(t, h, "/api/v1/pods")
	assert.Equal(t, 4, v.made, "a new status (view): at once")
	assert.NotContains(t, body, "\n  ", "compact")
	_, body = get(t, h, "/api/v1/pods?pretty")
	assert.Contains(t, body, "\n  \"pods\"", "indented when asked")
	assert.True(t, strings.HasSuffix(body, "\n"))
}
