package restart

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Each restart is recorded with why: the failures that reached the
// threshold and the kill's grace period, or the exit; how long the
// replacement waited; which attempt replaced which instance.
func TestLedgerRecordsWhy(t *testing.T) {
	ledger, err := OpenLedger("")
	require.NoError(t, err)
	rt := newRestartTest(t, corev1.RestartPolicyAlways, WithLedger(ledger))
	id := rt.rt.AddContainer(rt.sandbox, "app", running)
	rt.relist(t)
	h := rt.histories.Get(results.HistoryKey{Pod: "uid-web", Container: "app", Type: results.Liveness})
	h.Add(results.Observation{Time: time.Unix(1_000_000, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 1, Threshold: 2, ContainerID: id})
	h.Add(results.Observation{Time: time.Unix(1_000_001, 0), Outcome: results.OutcomeFailure, Output: "sick", Consecutive: 2, Threshold: 2, Changed: true, ContainerID: id})
	rt.fail(id, results.Liveness)
	rt.eventually(t, "recorded", func() bool { return len(ledger.For("ns", "web")) == 1 })
	e := ledger.For("ns", "web")[0]
	replacement := rt.containers()[1]
	assert.Equal(t, Entry{Time: rt.clock.Now(), Namespace: "ns", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: id,
		Cause: "liveness", Failures: []Failure{
			{Time: time.Unix(1_000_000, 0), Output: "sick", Consecutive: 1, Threshold: 2},
			{Time: time.Unix(1_000_001, 0), Output: "sick", Consecutive: 2, Threshold: 2},
		}, ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, Action: ActionRestarted, ReplacementID: replacement.ID, Attempt: 1}, e)

	// The replacement exits by itself: recorded as an exit, after its
	// back-off (the first exit restarts at once, after the settle time).
	rt.relist(t)
	require.NoError(t, rt.rt.SetContainerState(replacement.ID, exited, 3))
	rt.relist(t)
	rt.clock.Step(11 * time.Second) // past the settle time and the 10 s back-off of a second restart
	rt.eventually(t, "the exit recorded", func() bool { return len(ledger.For("ns", "web")) == 2 })
	e = ledger.For("ns", "web")[1]
	assert.Equal(t, "exit", e.Cause)
	assert.Equal(t, int32(3), e.ExitCode)
	assert.Empty(t, e.Failures)
	assert.Equal(t, uint32(2), e.Attempt)
	assert.Equal(t, replacement.ID, e.ContainerID)
	assert.Equal(t, 11.0, e.BackOffSeconds)
	assert.Empty(t, ledger.For("ns", "other"))
}

// A kill under --restart=stop, or a policy that does not restart, is
// recorded as stopped.
func TestLedgerRecordsStops(t *testing.T) {
	ledger, err := OpenLedger("")
	require.NoError(t, err)
	rt := newRestartTest(t, corev1.RestartPolicyNever, WithLedger(ledger))
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
	rt.eventually(t, "recorded", func() bool { return len(ledger.For("ns", "web")) == 1 })
	e := ledger.For("ns", "web")[0]
	assert.Equal(t, ActionStopped, e.Action)
	assert.Equal(t, "startup", e.Cause)
	assert.Empty(t, e.ReplacementID)
}

// The ledger survives the agent: it is written to the state directory and
// read back; a damaged file is set aside, said, and a new ledger begins.
func TestLedgerPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := OpenLedger(dir)
	require.NoError(t, err)
	require.NoError(t, l.Add(Entry{Namespace: "ns", Pod: "web", Container: "app", Cause: "exit", Action: ActionRestarted}))
	again, err := OpenLedger(dir)
	require.NoError(t, err)
	assert.Len(t, again.For("ns", "web"), 1)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), []byte("{half"), 0o640))
	fresh, err := OpenLedger(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not valid")
	assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, ledgerFile)+".bad")
	require.NotNil(t, fresh, "the agent goes on with a new ledger")
	assert.Empty(t, fresh.For("ns", "web"))
	assert.FileExists(t, filepath.Join(dir, ledgerFile+".bad"))

	memory, err := OpenLedger("")
	require.NoError(t, err)
	for i := range ledgerSize + 5 {
		require.NoError(t, memory.Add(Entry{Namespace: "ns", Pod: "web", ExitCode: int32(i)}))
	}
	kept := memory.For("ns", "web")
	assert.Len(t, kept, ledgerSize, "bounded")
	assert.Equal(t, int32(5), kept[0].ExitCode, "the newest kept")
}

// An agent that finishes a restart another one began records it with the
// cause the replacement carries; the failures went with the other agent.
func TestLedgerRecordsAFinishedInterruptedRestart(t *testing.T) {
	ledger, err := OpenLedger("")
	require.NoError(t, err)
	rt := newRestartTest(t, corev1.RestartPolicyAlways, WithLedger(ledger))
	old := rt.rt.AddContainer(rt.sandbox, "app", exited)
	replacement := rt.rt.AddContainer(rt.sandbox, "app", created, fakeruntime.WithAttempt(1),
		fakeruntime.WithAnnotations(map[string]string{cri.AnnotationRestartOf: old, cri.AnnotationRestartCause: "startup"}))
	rt.relist(t)
	rt.eventually(t, "recorded", func() bool { return len(ledger.For("ns", "web")) == 1 })
	e := ledger.For("ns", "web")[0]
	assert.Equal(t, "startup", e.Cause)
	assert.Equal(t, old, e.ContainerID)
	assert.Equal(t, replacement, e.ReplacementID)
	assert.Equal(t, uint32(1), e.Attempt)
	assert.Empty(t, e.Failures)
}
