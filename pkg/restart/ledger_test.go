package restart

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Each restart is recorded with why: the failures that reached the
// threshold and the kill's grace period, or the exit; how long the
// replacement waited; which attempt replaced which instance.
func TestLedgerRecordsWhy(t *testing.T) {
	l := openLedger(t)
	rt := newRestartTest(t, corev1.RestartPolicyAlways, WithLedger(l))
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	h := rt.histories.Get(results.HistoryKey{Pod: "uid-web", Container: "app", Type: results.Liveness})
	h.Add(results.Observation{Time: time.Unix(1_000_000, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 1, Threshold: 2, ContainerID: id})
	h.Add(results.Observation{Time: time.Unix(1_000_001, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 2, Threshold: 2, Changed: true, ContainerID: id})
	rt.fail(id, results.Liveness)
	rt.eventually(t, "recorded", func() bool { return len(l.For("ns", "web")) == 1 })
	e := l.For("ns", "web")[0]
	replacement := rt.containers()[1]
	assert.Equal(t, ledger.Entry{Time: rt.clock.Now(), Namespace: "ns", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: id,
		Cause: "liveness", Failures: []ledger.Failure{
			{Time: time.Unix(1_000_000, 0), Output: "sick", Consecutive: 1, Threshold: 2},
			{Time: time.Unix(1_000_001, 0), Output: "sick", Consecutive: 2, Threshold: 2},
		}, ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, Action: ledger.ActionRestarted, ReplacementID: replacement.ID, Attempt: 1}, e)

	// The replacement exits by itself: recorded as an exit, after its
	// back-off (the first exit restarts at once, after the settle time).
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(replacement.ID, exited, 3))
	rt.relist(t)
	rt.eventually(t, "the worker waits out the settle time", rt.clock.HasWaiters)
	rt.clock.Step(11 * time.Second) // past the settle time and the 10 s back-off of a second restart
	rt.eventually(t, "the exit recorded", func() bool { return len(l.For("ns", "web")) == 2 })
	e = l.For("ns", "web")[1]
	assert.Equal(t, string(CauseExit), e.Cause)
	assert.Equal(t, int32(3), e.ExitCode)
	assert.Empty(t, e.Failures)
	assert.Equal(t, uint32(2), e.Attempt)
	assert.Equal(t, replacement.ID, e.ContainerID)
	assert.Equal(t, 11.0, e.BackOffSeconds)
	assert.Empty(t, l.For("ns", "other"))
}

// A kill under --restart=stop, or a policy that does not restart, is
// recorded as stopped.
func TestLedgerRecordsStops(t *testing.T) {
	l := openLedger(t)
	rt := newRestartTest(t, corev1.RestartPolicyNever, WithLedger(l))
	rt.setSpec(func(p *spec.Pod) { p.Containers = append(p.Containers, spec.Container{Name: "keep"}) })
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.rt.AddContainer(rt.sandbox, "keep", running)
	rt.relist(t)
	rt.eventually(t, "the spec seen", func() bool {
		p, ok := rt.resolver.View().Pod("uid-web")
		if !ok {
			return false
		}
		c, ok := p.Container("keep")
		return ok && c.Managed
	})
	rt.fail(id, results.Startup)
	rt.eventually(t, "recorded", func() bool { return len(l.For("ns", "web")) == 1 })
	e := l.For("ns", "web")[0]
	assert.Equal(t, ledger.ActionStopped, e.Action)
	assert.Equal(t, string(CauseStartup), e.Cause)
	assert.Empty(t, e.ReplacementID)
}

// An agent that finishes a restart another one began records it with the
// cause the replacement carries; the failures went with the other agent.
func TestLedgerRecordsAFinishedInterruptedRestart(t *testing.T) {
	l := openLedger(t)
	rt := newRestartTest(t, corev1.RestartPolicyAlways, WithLedger(l))
	old := rt.rt.AddContainer(rt.sandbox, "app", exited)
	replacement := rt.rt.AddContainer(rt.sandbox, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old, cri.AnnotationRestartCause: "startup"}))
	rt.relist(t)
	rt.eventually(t, "recorded", func() bool { return len(l.For("ns", "web")) == 1 })
	e := l.For("ns", "web")[0]
	assert.Equal(t, string(CauseStartup), e.Cause)
	assert.Equal(t, old, e.ContainerID)
	assert.Equal(t, replacement, e.ReplacementID)
	assert.Equal(t, uint32(1), e.Attempt)
	assert.Empty(t, e.Failures)
}

// openLedger is a ledger in memory, opened without a warning.
func openLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, warning, err := ledger.Open("")
	require.NoError(t, err)
	require.NoError(t, warning)
	return l
}
