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
	l, histories := openLedger(t), results.NewHistories()
	st := newSyncTest(t, WithLedger(l), WithHistories(histories))
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	h := histories.Get(results.HistoryKey{Pod: "uid", Container: "app", Type: results.Liveness})
	h.Add(results.Observation{Time: time.Unix(1_000_000, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 1, Threshold: 2, ContainerID: id})
	h.Add(results.Observation{Time: time.Unix(1_000_001, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 2, Threshold: 2, Changed: true, ContainerID: id})
	st.fail(id, results.Liveness)
	st.sync(t, st.view(t, m, false))
	require.Len(t, l.For("ns", "web"), 1, "recorded")
	e := l.For("ns", "web")[0]
	replacement := st.rt.Containers(sb)[1]
	assert.Equal(t, ledger.Entry{Time: st.clock.Now(), Namespace: "ns", Pod: "web", PodUID: "uid", Container: "app", ContainerID: id,
		Cause: "liveness", Failures: []ledger.Failure{
			{Time: time.Unix(1_000_000, 0), Output: "sick", Consecutive: 1, Threshold: 2},
			{Time: time.Unix(1_000_001, 0), Output: "sick", Consecutive: 2, Threshold: 2},
		}, ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, Action: ledger.ActionRestarted, ReplacementID: replacement.ID, Attempt: 1}, e)

	// The replacement exits by itself: recorded as an exit, after its
	// back-off (the first exit restarts at once, after the settle time).
	st.sync(t, st.view(t, m, false))
	require.NoError(t, st.rt.SetContainerState(replacement.ID, exited, 3))
	assert.Equal(t, exitSettle, st.sync(t, st.view(t, m, false)), "the worker waits out the settle time")
	st.clock.Step(11 * time.Second) // past the settle time and the 10 s back-off of a second restart
	st.sync(t, st.view(t, m, false))
	require.Len(t, l.For("ns", "web"), 2, "the exit recorded")
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
	st := newSyncTest(t, WithLedger(l))
	m := theirPod(corev1.RestartPolicyNever, spec.Container{Name: "app"}, spec.Container{Name: "keep"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	st.rt.AddContainer(sb, "keep", running)
	st.fail(id, results.Startup)
	st.sync(t, st.view(t, m, false))
	require.Len(t, l.For("ns", "web"), 1, "recorded")
	e := l.For("ns", "web")[0]
	assert.Equal(t, ledger.ActionStopped, e.Action)
	assert.Equal(t, string(CauseStartup), e.Cause)
	assert.Empty(t, e.ReplacementID)
}

// An agent that finishes a restart another one began records it with the
// cause the replacement carries; the failures went with the other agent.
func TestLedgerRecordsAFinishedInterruptedRestart(t *testing.T) {
	l := openLedger(t)
	st := newSyncTest(t, WithLedger(l))
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	old := st.rt.AddContainer(sb, "app", exited)
	replacement := st.rt.AddContainer(sb, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old, cri.AnnotationRestartCause: "startup"}))
	st.sync(t, st.view(t, m, false))
	require.Len(t, l.For("ns", "web"), 1, "recorded")
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
