package prober

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func httpProbe(tune func(*corev1.Probe)) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt(8080), Path: "/healthz"}}}
	if tune != nil {
		tune(p)
	}
	spec.DefaultProbe(p)
	return p
}

func TestExplainDefaults(t *testing.T) {
	pod := &spec.Pod{Name: "web", TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{
		Name: "app", Liveness: httpProbe(nil), Readiness: httpProbe(func(p *corev1.Probe) { p.HTTPGet.Path = "/ready" }),
	}}}
	ex := Explain(pod)
	require.Len(t, ex, 2)
	ready, live := ex[0], ex[1]
	assert.Equal(t, results.Readiness, ready.Type)
	assert.Equal(t, Window{0, 10 * time.Second}, ready.FirstRun)
	assert.Equal(t, Window{20 * time.Second, 31 * time.Second}, ready.Detect, "(F−1)·P to F·P + T")
	assert.Equal(t, ready.Detect, ready.Act)
	assert.Equal(t, results.Liveness, live.Type)
	assert.Equal(t, Window{20 * time.Second, 61 * time.Second}, live.Act, "plus the pod's 30 s grace")
	assert.Equal(t, int64(30), live.GracePeriod)
	assert.Equal(t, "httpGet 8080 /healthz", live.Handler)
	assert.Empty(t, live.Warnings)
}

func TestExplainStartupBudgetAndProbeGrace(t *testing.T) {
	five := int64(5)
	pod := &spec.Pod{Name: "slow", TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{
		Name:     "app",
		Startup:  httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 30; p.TerminationGracePeriodSeconds = &five }),
		Liveness: httpProbe(nil),
	}}}
	ex := Explain(pod)
	require.Len(t, ex, 2)
	startup := ex[0]
	assert.Equal(t, Window{290 * time.Second, 301 * time.Second}, startup.Detect, "the start budget: F·P")
	assert.Equal(t, int64(5), startup.GracePeriod, "the probe's own grace")
	assert.Equal(t, Window{290 * time.Second, 306 * time.Second}, startup.Act)
	assert.Equal(t, time.Duration(0), ex[1].FirstRun.Earliest, "liveness waits for startup")
}

func TestExplainWarnings(t *testing.T) {
	tests := []struct {
		name string
		c    spec.Container
		pod  int64
		want string
	}{
		{"timeout ≥ period", spec.Container{Readiness: httpProbe(func(p *corev1.Probe) { p.TimeoutSeconds = 10 })}, 30, "timeoutSeconds (10) ≥ periodSeconds (10)"},
		{"failureThreshold 1", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 1; p.InitialDelaySeconds = 5 })}, 30, "failureThreshold 1: a single slow or failed probe restarts the container"},
		{"liveness = readiness", spec.Container{Liveness: httpProbe(nil), Readiness: httpProbe(nil)}, 30, "liveness probes what readiness probes"},
		{"long initial delay", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 60 })}, 30, "initialDelaySeconds 60 with no startupProbe"},
		{"no protection at start", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.PeriodSeconds = 2 })}, 30, "the app must answer within 6 s of starting"},
		{"exec every second", spec.Container{Readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}, 30, "exec probe every 1 s"},
		{"long pod grace", spec.Container{Liveness: httpProbe(nil)}, 600, "waits the pod's terminationGracePeriodSeconds (600 s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "app"
			ex := Explain(&spec.Pod{TerminationGracePeriodSeconds: tt.pod, Containers: []spec.Container{tt.c}})
			var all []string
			for _, e := range ex {
				all = append(all, e.Warnings...)
			}
			assert.Contains(t, strings.Join(all, "\n"), tt.want)
		})
	}
}
