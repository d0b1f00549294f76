package restart

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Restarts and kills are counted by pod and container, as
// kube-state-metrics counts restarts, so that an alert names the
// container; a gone pod's series go with it, other pods' stay.
func TestRestartMetricsNameThePodAndContainer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	web := &pods.Pod{Key: "uid-web", Namespace: "shop", Name: "web", UID: "uid-web"}
	db := &pods.Pod{Key: "uid-db", Namespace: "shop", Name: "db", UID: "uid-db"}
	m.killed(web, "app", "Liveness")
	m.restarted(web, "app", CauseLiveness)
	m.restarted(web, "app", CauseLiveness)
	m.restarted(db, "postgres", CauseExit)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cri_prober_container_kills_total Containers stopped because a liveness or startup probe failed, by pod, container and probe type.
# TYPE cri_prober_container_kills_total counter
cri_prober_container_kills_total{container="app",namespace="shop",pod="web",pod_uid="uid-web",probe_type="Liveness"} 1
# HELP cri_prober_container_restarts_total Containers re-created, by pod, container and reason: liveness or startup (after a probe kill), postStart (after its hook failed), unknown (a container in an unknown state), or exit.
# TYPE cri_prober_container_restarts_total counter
cri_prober_container_restarts_total{container="app",namespace="shop",pod="web",pod_uid="uid-web",reason="liveness"} 2
cri_prober_container_restarts_total{container="postgres",namespace="shop",pod="db",pod_uid="uid-db",reason="exit"} 1
`), "cri_prober_container_kills_total", "cri_prober_container_restarts_total"))

	m.forget("uid-web")
	m.forget("uid-unknown") // never counted: nothing to delete
	assert.Equal(t, 0, testutil.CollectAndCount(m.kills))
	assert.Equal(t, 1, testutil.CollectAndCount(m.restarts), "db's series stays")
}

// The deferrals' series exist at 0 from the start, so that an alert on
// them works before the first deferral (the kills that wait now, and the
// pause, are pkg/killbudget's series).
func TestKillsDeferredSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cri_prober_kills_deferred_total Probe-triggered kills deferred (each container instance once per reason), by reason: node-budget, pod-budget or paused.
# TYPE cri_prober_kills_deferred_total counter
cri_prober_kills_deferred_total{reason="node-budget"} 0
cri_prober_kills_deferred_total{reason="paused"} 0
cri_prober_kills_deferred_total{reason="pod-budget"} 0
`)))
}
