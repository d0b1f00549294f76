package explain

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/restart"
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
	ex := Probes(pod)
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
	ex := Probes(pod)
	require.Len(t, ex, 2)
	startup := ex[0]
	assert.Equal(t, Window{290 * time.Second, 301 * time.Second}, startup.Detect, "the start budget: F·P")
	assert.Equal(t, int64(5), startup.GracePeriod, "the probe's own grace")
	assert.Equal(t, Window{290 * time.Second, 306 * time.Second}, startup.Act)
	assert.Equal(t, time.Duration(0), ex[1].FirstRun.Earliest, "liveness waits for startup")
}

// A probe kill's grace period is the restarter's rule, read where it is
// decided: the probe's own over the pod's, capped as the restarter caps
// it, never below kubelet's floor.
func TestExplainGraceIsTheRestartersRule(t *testing.T) {
	one, huge := int64(1), int64(math.MaxInt64)
	tests := []struct {
		name       string
		podGrace   int64
		probeGrace *int64
		want       int64
	}{
		{name: "the pod's", podGrace: 30, want: 30},
		{name: "the probe's own", podGrace: 30, probeGrace: &one, want: restart.MinimumGracePeriod},
		{name: "never below the floor", podGrace: 0, want: restart.MinimumGracePeriod},
		{name: "capped as the restarter caps it", podGrace: 30, probeGrace: &huge, want: restart.GracePeriod(30, &corev1.Probe{TerminationGracePeriodSeconds: &huge})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := httpProbe(func(p *corev1.Probe) { p.TerminationGracePeriodSeconds = tt.probeGrace })
			ex := Probes(&spec.Pod{TerminationGracePeriodSeconds: tt.podGrace, Containers: []spec.Container{{Name: "app", Liveness: p}}})
			require.Len(t, ex, 1)
			assert.Equal(t, tt.want, ex[0].GracePeriod)
			assert.Less(t, ex[0].GracePeriod, huge, "a grace period the restarter never gives")
		})
	}
}

func TestExplainWarnings(t *testing.T) {
	tests := []struct {
		name string
		c    spec.Container
		pod  int64
		want string
	}{
		{"timeout > period", spec.Container{Readiness: httpProbe(func(p *corev1.Probe) { p.TimeoutSeconds = 12 })}, 30, "timeoutSeconds (12) > periodSeconds (10): a probe that hangs runs to its timeout and only then does the next one start, so a hung app is detected up to 4s later than the period suggests; set timeoutSeconds to at most 10"},
		{"failureThreshold 1", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 1; p.InitialDelaySeconds = 5 })}, 30, "failureThreshold 1: a single slow or failed probe restarts the container"},
		{"liveness = readiness", spec.Container{Liveness: httpProbe(nil), Readiness: httpProbe(nil)}, 30, "liveness probes what readiness probes"},
		{"long initial delay", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 60 })}, 30, "initialDelaySeconds 60 with no startupProbe"},
		{"no protection at start", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.PeriodSeconds = 2 })}, 30, "the app must answer within 4s of starting"},
		{"exec every second", spec.Container{Readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}, 30, "exec probe every 1 s"},
		{"long pod grace", spec.Container{Liveness: httpProbe(nil)}, 600, "waits the pod's terminationGracePeriodSeconds (600 s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "app"
			ex := Probes(&spec.Pod{TerminationGracePeriodSeconds: tt.pod, Containers: []spec.Container{tt.c}})
			var all []string
			for _, e := range ex {
				for _, w := range e.Warnings {
					all = append(all, w.String())
				}
			}
			assert.Contains(t, strings.Join(all, "\n"), tt.want)
		})
	}
}

// allWarnings are the warnings of every probe, by kind.
func allWarnings(ex []Explanation) map[WarningKind][]string {
	out := map[WarningKind][]string{}
	for _, e := range ex {
		for _, w := range e.Warnings {
			out[w.Kind] = append(out[w.Kind], w.Message)
		}
	}
	return out
}

// No warning that cannot be acted on: a timeout equal to the period (1 and
// 1 are the least the API allows), a timeout longer than a startInterval
// (1 s is the least timeout). Fails on the old code: "timeoutSeconds (1) ≥
// periodSeconds (1)".
func TestExplainNoWarningAtTheMinimums(t *testing.T) {
	fast := func(p *corev1.Probe) { p.PeriodSeconds, p.TimeoutSeconds = 1, 1 }
	pod := &spec.Pod{Name: "web", TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{
		Name:      "app",
		Readiness: httpProbe(fast),
		Startup:   httpProbe(func(p *corev1.Probe) { p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold = 2, 1, 30 }),
		Liveness:  httpProbe(func(p *corev1.Probe) { p.PeriodSeconds, p.TimeoutSeconds = 2, 2 }),
		Extensions: map[results.ProbeType]*spec.Extensions{
			results.Startup: {StartInterval: &metav1.Duration{Duration: 200 * time.Millisecond}},
		},
	}}}
	assert.Empty(t, allWarnings(Probes(pod)))
}

// startInterval paces a startup or readiness probe until it first
// succeeds: the first run, the start budget and the time to pass follow
// it; detection once up follows periodSeconds. Fails on the old code: it
// ignored startInterval.
func TestExplainStartInterval(t *testing.T) {
	pod := &spec.Pod{Name: "web", TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{
		Name:      "app",
		Startup:   httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 5 }),
		Readiness: httpProbe(func(p *corev1.Probe) { p.SuccessThreshold = 2 }),
		Liveness:  httpProbe(nil),
		Extensions: map[results.ProbeType]*spec.Extensions{
			results.Startup:   {StartInterval: &metav1.Duration{Duration: 2 * time.Second}},
			results.Readiness: {StartInterval: &metav1.Duration{Duration: 500 * time.Millisecond}},
		},
	}}}
	ex := Probes(pod, WithStartTime(5*time.Second))
	require.Len(t, ex, 3)
	startup, ready, live := ex[0], ex[1], ex[2]

	assert.Equal(t, 2*time.Second, startup.StartInterval)
	assert.Equal(t, 10*time.Second, startup.Period)
	assert.Equal(t, Window{0, 2 * time.Second}, startup.FirstRun)
	assert.Equal(t, Window{8 * time.Second, 11 * time.Second}, startup.Detect, "(F−1)·SI to SI + (F−1)·SI + T")
	assert.Equal(t, 8*time.Second, startup.StartBudget, "not (F−1)·periodSeconds = 40s")
	assert.Equal(t, Window{0, 2 * time.Second}, startup.Pass)
	assert.Empty(t, startup.Warnings, "8s covers a start time of 5s")

	assert.Equal(t, 500*time.Millisecond, ready.StartInterval)
	assert.Equal(t, Window{0, 11*time.Second + 500*time.Millisecond}, ready.FirstRun, "after startup, at its last chance, then the start pace")
	assert.Equal(t, Window{500 * time.Millisecond, 1500 * time.Millisecond}, ready.Pass, "two successes: SI, and at worst a hung probe's timeout first")
	assert.Equal(t, Window{20 * time.Second, 31 * time.Second}, ready.Detect, "once ready: periodSeconds")

	assert.Zero(t, live.StartInterval)
	assert.Equal(t, Window{0, 21 * time.Second}, live.FirstRun)
	assert.Zero(t, live.StartBudget, "startup guards the start")
	assert.Equal(t, Window{}, live.Pass)
}

// Liveness without readiness: the container is ready while it runs, before
// the app answers and while liveness failures build up.
func TestExplainLivenessWithoutReadiness(t *testing.T) {
	tests := []struct {
		name string
		c    spec.Container
		want string
	}{
		{"liveness alone", spec.Container{Liveness: httpProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 10 })},
			"livenessProbe without readinessProbe: the container counts as ready as soon as it runs, before the app may answer, and stays ready while liveness failures build up to a restart; add a readinessProbe"},
		{"with a startup probe", spec.Container{Liveness: httpProbe(nil), Startup: httpProbe(nil)},
			"the container counts as ready as soon as it runs and its startupProbe has passed"},
		{"with a readiness probe", spec.Container{Liveness: httpProbe(nil), Readiness: httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 1 })}, ""},
		{"readiness alone", spec.Container{Readiness: httpProbe(nil)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "app"
			got := allWarnings(Probes(&spec.Pod{TerminationGracePeriodSeconds: 30, Containers: []spec.Container{tt.c}}))
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got[WarnLivenessWithoutReadiness], 1, "%v", got)
			assert.Contains(t, got[WarnLivenessWithoutReadiness][0], tt.want)
		})
	}
}

// Given the app's start time, a start budget shorter than it is a warning
// that says what to set; the guess at a short budget gives way to it.
func TestExplainStartTime(t *testing.T) {
	startInterval := map[results.ProbeType]*spec.Extensions{results.Startup: {StartInterval: &metav1.Duration{Duration: time.Second}}}
	tests := []struct {
		name  string
		c     spec.Container
		start time.Duration
		want  string // "": no start-time warning
	}{
		{name: "startup too short", c: spec.Container{Startup: httpProbe(nil)}, start: 30 * time.Second,
			want: "the startup probe gives up on an app that does not answer yet 20s after the container starts (initialDelaySeconds 0 + (failureThreshold 3 − 1) × periodSeconds 10s), before its start time of 30s: set failureThreshold to at least 4"},
		{name: "startup just long enough", c: spec.Container{Startup: httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 4 })}, start: 30 * time.Second},
		{name: "startup's initial delay counts", c: spec.Container{Startup: httpProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 10 })}, start: 30 * time.Second},
		{name: "startup at its startInterval", c: spec.Container{Startup: httpProbe(nil), Extensions: startInterval}, start: 5 * time.Second,
			want: "2s after the container starts (initialDelaySeconds 0 + (failureThreshold 3 − 1) × startInterval 1s), before its start time of 5s: set failureThreshold to at least 6"},
		{name: "liveness alone, too short", c: spec.Container{Liveness: httpProbe(nil)}, start: 30 * time.Second,
			want: "with no startupProbe, liveness restarts an app that does not answer yet 20s after the container starts (initialDelaySeconds 0 + (failureThreshold 3 − 1) × periodSeconds 10s), before its start time of 30s: add a startupProbe with the same check, periodSeconds 10 and failureThreshold 4 (it waits 30s)"},
		{name: "liveness alone, long enough", c: spec.Container{Liveness: httpProbe(nil)}, start: 15 * time.Second},
		{name: "liveness behind a startup probe", c: spec.Container{Liveness: httpProbe(nil), Startup: httpProbe(func(p *corev1.Probe) { p.FailureThreshold = 30 })}, start: time.Minute},
		{name: "readiness restarts nothing", c: spec.Container{Readiness: httpProbe(nil)}, start: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "app"
			pod := &spec.Pod{TerminationGracePeriodSeconds: 30, Containers: []spec.Container{tt.c}}
			got := allWarnings(Probes(pod, WithStartTime(tt.start)))
			assert.Empty(t, got[WarnShortStartBudget], "a start time given replaces the guess")
			if tt.want == "" {
				assert.Empty(t, got[WarnStartBudgetUnderStartTime])
				return
			}
			require.Len(t, got[WarnStartBudgetUnderStartTime], 1, "%v", got)
			assert.Contains(t, got[WarnStartBudgetUnderStartTime][0], tt.want)
		})
	}

	// Without a start time, the guess: liveness alone leaves under 10s.
	pod := &spec.Pod{TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{Name: "app", Liveness: httpProbe(func(p *corev1.Probe) { p.PeriodSeconds = 4 })}}}
	got := allWarnings(Probes(pod))
	assert.Len(t, got[WarnShortStartBudget], 1)
	assert.Empty(t, got[WarnStartBudgetUnderStartTime])
}
