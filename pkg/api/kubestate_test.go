package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

var ksmT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// crashLooping is a running pod whose one container waits in
// CrashLoopBackOff after its third exit, with an init container that
// completed.
func crashLooping() pods.PodReport {
	return pods.PodReport{Namespace: "shop", Name: "web-node1", UID: "u1", IP: "10.0.0.7", Phase: corev1.PodRunning, StartTime: ksmT0,
		Owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node1", Controller: ptr.To(true)}},
		Conditions: []pods.Condition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		},
		Containers: []pods.ContainerReport{
			{Name: "setup", Kind: spec.Init, Ready: true, Status: pods.ContainerStatus{
				State: pods.ContainerState{Terminated: &pods.StateTerminated{Reason: "Completed", StartedAt: ksmT0, FinishedAt: ksmT0.Add(time.Second)}}}},
			{Name: "app", RestartCount: 3, Status: pods.ContainerStatus{
				State:     pods.ContainerState{Waiting: &pods.StateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=app"}},
				LastState: pods.ContainerState{Terminated: &pods.StateTerminated{ExitCode: 2, Reason: "Error", StartedAt: ksmT0, FinishedAt: ksmT0.Add(time.Minute)}}}},
		}}
}

// neverReady is a pod made by others (no owner) whose container runs and
// never passes its readiness probe.
func neverReady() pods.PodReport {
	return pods.PodReport{Namespace: "shop", Name: "api", UID: "u2", Phase: corev1.PodRunning, HostNetwork: true,
		Conditions: []pods.Condition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		Containers: []pods.ContainerReport{
			{Name: "api", Status: pods.ContainerStatus{State: pods.ContainerState{Running: &pods.StateRunning{StartedAt: ksmT0}}}},
		}}
}

// The series are kube-state-metrics' (internal/store/pod.go): its names,
// its labels (namespace, pod, uid first), its values, for what kubelet's
// status of these pods would say.
func TestKubeStateSeries(t *testing.T) {
	k := NewKubeState(fakePods{crashLooping(), neverReady()}, KubeStateOptions{NodeName: "node1", HostIP: "192.0.2.1"})
	want := `
# HELP kube_pod_container_status_last_terminated_exitcode Describes the exit code for the last container in terminated state.
# TYPE kube_pod_container_status_last_terminated_exitcode gauge
kube_pod_container_status_last_terminated_exitcode{container="app",namespace="shop",pod="web-node1",uid="u1"} 2
# HELP kube_pod_container_status_last_terminated_reason Describes the last reason the container was in terminated state.
# TYPE kube_pod_container_status_last_terminated_reason gauge
kube_pod_container_status_last_terminated_reason{container="app",namespace="shop",pod="web-node1",reason="Error",uid="u1"} 1
# HELP kube_pod_container_status_ready Describes whether the containers readiness check succeeded.
# TYPE kube_pod_container_status_ready gauge
kube_pod_container_status_ready{container="api",namespace="shop",pod="api",uid="u2"} 0
kube_pod_container_status_ready{container="app",namespace="shop",pod="web-node1",uid="u1"} 0
# HELP kube_pod_container_status_restarts_total The number of container restarts per container.
# TYPE kube_pod_container_status_restarts_total counter
kube_pod_container_status_restarts_total{container="api",namespace="shop",pod="api",uid="u2"} 0
kube_pod_container_status_restarts_total{container="app",namespace="shop",pod="web-node1",uid="u1"} 3
# HELP kube_pod_container_status_running Describes whether the container is currently in running state.
# TYPE kube_pod_container_status_running gauge
kube_pod_container_status_running{container="api",namespace="shop",pod="api",uid="u2"} 1
kube_pod_container_status_running{container="app",namespace="shop",pod="web-node1",uid="u1"} 0
# HELP kube_pod_container_status_waiting Describes whether the container is currently in waiting state.
# TYPE kube_pod_container_status_waiting gauge
kube_pod_container_status_waiting{container="api",namespace="shop",pod="api",uid="u2"} 0
kube_pod_container_status_waiting{container="app",namespace="shop",pod="web-node1",uid="u1"} 1
# HELP kube_pod_container_status_waiting_reason Describes the reason the container is currently in waiting state.
# TYPE kube_pod_container_status_waiting_reason gauge
kube_pod_container_status_waiting_reason{container="app",namespace="shop",pod="web-node1",reason="CrashLoopBackOff",uid="u1"} 1
# HELP kube_pod_info Information about pod.
# TYPE kube_pod_info gauge
kube_pod_info{created_by_kind="",created_by_name="",host_ip="192.0.2.1",host_network="true",namespace="shop",node="node1",pod="api",pod_ip="",priority_class="",uid="u2"} 1
kube_pod_info{created_by_kind="Node",created_by_name="node1",host_ip="192.0.2.1",host_network="false",namespace="shop",node="node1",pod="web-node1",pod_ip="10.0.0.7",priority_class="",uid="u1"} 1
# HELP kube_pod_init_container_status_ready Describes whether the init containers readiness check succeeded.
# TYPE kube_pod_init_container_status_ready gauge
kube_pod_init_container_status_ready{container="setup",namespace="shop",pod="web-node1",uid="u1"} 1
# HELP kube_pod_init_container_status_terminated_reason Describes the reason the init container is currently in terminated state.
# TYPE kube_pod_init_container_status_terminated_reason gauge
kube_pod_init_container_status_terminated_reason{container="setup",namespace="shop",pod="web-node1",reason="Completed",uid="u1"} 1
# HELP kube_pod_owner Information about the Pod's owner.
# TYPE kube_pod_owner gauge
kube_pod_owner{namespace="shop",owner_is_controller="",owner_kind="",owner_name="",pod="api",uid="u2"} 1
kube_pod_owner{namespace="shop",owner_is_controller="true",owner_kind="Node",owner_name="node1",pod="web-node1",uid="u1"} 1
# HELP kube_pod_status_phase The pods current phase.
# TYPE kube_pod_status_phase gauge
kube_pod_status_phase{namespace="shop",phase="Failed",pod="api",uid="u2"} 0
kube_pod_status_phase{namespace="shop",phase="Pending",pod="api",uid="u2"} 0
kube_pod_status_phase{namespace="shop",phase="Running",pod="api",uid="u2"} 1
kube_pod_status_phase{namespace="shop",phase="Succeeded",pod="api",uid="u2"} 0
kube_pod_status_phase{namespace="shop",phase="Unknown",pod="api",uid="u2"} 0
kube_pod_status_phase{namespace="shop",phase="Failed",pod="web-node1",uid="u1"} 0
kube_pod_status_phase{namespace="shop",phase="Pending",pod="web-node1",uid="u1"} 0
kube_pod_status_phase{namespace="shop",phase="Running",pod="web-node1",uid="u1"} 1
kube_pod_status_phase{namespace="shop",phase="Succeeded",pod="web-node1",uid="u1"} 0
kube_pod_status_phase{namespace="shop",phase="Unknown",pod="web-node1",uid="u1"} 0
# HELP kube_pod_status_ready Describes whether the pod is ready to serve requests.
# TYPE kube_pod_status_ready gauge
kube_pod_status_ready{condition="false",namespace="shop",pod="api",uid="u2"} 1
kube_pod_status_ready{condition="true",namespace="shop",pod="api",uid="u2"} 0
kube_pod_status_ready{condition="unknown",namespace="shop",pod="api",uid="u2"} 0
kube_pod_status_ready{condition="false",namespace="shop",pod="web-node1",uid="u1"} 1
kube_pod_status_ready{condition="true",namespace="shop",pod="web-node1",uid="u1"} 0
kube_pod_status_ready{condition="unknown",namespace="shop",pod="web-node1",uid="u1"} 0
`
	names := []string{"kube_pod_container_status_last_terminated_exitcode", "kube_pod_container_status_last_terminated_reason",
		"kube_pod_container_status_ready", "kube_pod_container_status_restarts_total", "kube_pod_container_status_running",
		"kube_pod_container_status_waiting", "kube_pod_container_status_waiting_reason", "kube_pod_info",
		"kube_pod_init_container_status_ready", "kube_pod_init_container_status_terminated_reason", "kube_pod_owner",
		"kube_pod_status_phase", "kube_pod_status_ready"}
	assert.Equal(t, textOf(t, parseText(t, want), names...), textOf(t, scrape(t, k), names...))

	// A running container has no reason series; one that never
	// terminated before has no last-termination series.
	assert.Equal(t, 0, countWith(t, k, "kube_pod_container_status_terminated_reason", "api"))
	assert.Equal(t, 0, countWith(t, k, "kube_pod_container_status_last_terminated_reason", "api"))
	assert.Equal(t, 1, countWith(t, k, "kube_pod_init_container_state_started", "web-node1"))
}

// scrape reads k as Prometheus does: its text format, parsed strictly
// (one block per family, no series twice).
func scrape(t *testing.T, k *KubeState) prometheus.Gatherer {
	t.Helper()
	rec := httptest.NewRecorder()
	k.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/kube-state", nil))
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", rec.Header().Get("Content-Type"))
	return parseText(t, rec.Body.String())
}

// parseText parses the text format into families sorted by name, their
// series by label values, each series' labels by name.
func parseText(t *testing.T, text string) prometheus.Gatherer {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, "%s", text)
	out := make([]*dto.MetricFamily, 0, len(families))
	for _, f := range families {
		for _, m := range f.GetMetric() {
			seen := map[string]bool{}
			for _, l := range m.GetLabel() {
				require.False(t, seen[l.GetName()], "%s: label %s twice", f.GetName(), l.GetName())
				seen[l.GetName()] = true
			}
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		}
		slices.SortFunc(f.Metric, func(a, b *dto.Metric) int { return strings.Compare(labelString(a), labelString(b)) })
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return out, nil })
}

// textOf is the families of g named in names, in the text format.
func textOf(t *testing.T, g prometheus.Gatherer, names ...string) string {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range families {
		if slices.Contains(names, f.GetName()) {
			_, err := expfmt.MetricFamilyToText(&b, f)
			require.NoError(t, err)
		}
	}
	return b.String()
}

// labelString is a series' label values in the order of their names.
func labelString(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString(l.GetValue() + "\xff")
	}
	return b.String()
}

// countWith counts name's series of pod.
func countWith(t *testing.T, k *KubeState, name, pod string) int {
	t.Helper()
	families, err := scrape(t, k).Gather()
	require.NoError(t, err)
	n := 0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod" && l.GetValue() == pod {
					n++
				}
			}
		}
	}
	return n
}

func TestKubeStateNamespacesAndDuplicates(t *testing.T) {
	other := neverReady()
	other.Namespace = "other"
	tests := []struct {
		name       string
		reports    fakePods
		namespaces []string
		wantPods   int
	}{
		{name: "every pod", reports: fakePods{crashLooping(), neverReady(), other}, wantPods: 3},
		{name: "kube-state-metrics' --namespaces", reports: fakePods{crashLooping(), neverReady(), other}, namespaces: []string{"other", " "}, wantPods: 1},
		{name: "one pod reported twice (sandboxes kept apart) is one", reports: fakePods{neverReady(), neverReady()}, wantPods: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKubeState(tt.reports, KubeStateOptions{Namespaces: tt.namespaces})
			n, err := testutil.GatherAndCount(scrape(t, k), "kube_pod_info")
			require.NoError(t, err)
			assert.Equal(t, tt.wantPods, n)
		})
	}
}

// The series of 1,000 pods of two containers (one crash looping), at
// every scrape: the report is made by the agent (its cost is
// /api/v1/pods'), this is what the collector adds.
func BenchmarkKubeState1000Pods(b *testing.B) {
	reports := make(fakePods, 0, 1000)
	for i := range 1000 {
		p := crashLooping()
		p.Name, p.UID = fmt.Sprintf("web-%d", i), fmt.Sprintf("uid-%d", i)
		reports = append(reports, p)
	}
	k := NewKubeState(reports, KubeStateOptions{NodeName: "node1"})
	req := httptest.NewRequest("GET", "/metrics/kube-state", nil)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		k.ServeHTTP(rec, req)
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// What leaves the node says which node: /api/v1/pods carries the node's
// name on every pod; /metrics/kube-state is served beside /metrics,
// bounded as the other expensive requests.
func TestNodeNameAndKubeStateOnTheAPI(t *testing.T) {
	reports := testPods()
	s := New(Config{Pods: reports, Events: events.NewRing(10), Health: healthy, NodeName: "node1",
		KubeStateMetrics: NewKubeState(reports, KubeStateOptions{NodeName: "node1"})})
	code, body := get(t, s.Handler(), "/api/v1/pods")
	require.Equal(t, http.StatusOK, code)
	var list PodList
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Pods, 2)
	for _, p := range list.Pods {
		assert.Equal(t, "node1", p.Node, p.Name)
	}
	code, body = get(t, s.Handler(), "/api/v1/pods/shop/web")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"node": "node1"`)

	code, body = get(t, s.Handler(), "/metrics/kube-state")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `kube_pod_container_status_waiting_reason{namespace="shop",pod="web",uid="uid-web",container="worker",reason="CrashLoopBackOff"} 1`)
	assert.Contains(t, body, `kube_pod_info{namespace="shop",pod="web",uid="uid-web",host_ip="",pod_ip="10.0.0.5",node="node1",`)

	for range MaxBusyRequests {
		s.busy <- struct{}{}
	}
	code, _ = get(t, s.Handler(), "/metrics/kube-state")
	assert.Equal(t, http.StatusServiceUnavailable, code, "bounded")
}
