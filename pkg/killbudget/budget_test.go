package killbudget

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

var now = time.Unix(2_000_000, 0)

// A commit made from a snapshot the budget has moved past spends nothing:
// the plan is made again (two pods racing for the last kill, a pause).
func TestCommitIsOptimistic(t *testing.T) {
	budget, err := New(Config{Node: 1, Interval: time.Minute}, "")
	require.NoError(t, err)
	s := budget.Snapshot()
	assert.True(t, budget.Commit(s.Version, "a", 1, now))
	assert.False(t, budget.Commit(s.Version, "b", 1, now), "b planned from the same snapshot: made again")
	assert.Equal(t, 1, budget.Status(now).KillsInWindow)
	assert.True(t, budget.Commit(s.Version, "b", 0, now), "nothing spent: nothing to check")

	s = budget.Snapshot()
	_, _, err = budget.setPause(&Pause{By: "test"}, func(*Pause) {})
	require.NoError(t, err)
	assert.False(t, budget.Commit(s.Version, "c", 1, now), "paused meanwhile")
}

// The pause is kept under --state-dir: a new agent starts paused; resume
// removes it.
func TestPauseSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(now)
	budget, err := New(Config{}, dir, WithClock(clk), WithRecorder(events.NewRing(10)))
	require.NoError(t, err)
	st, err := budget.PauseKills(context.Background(), "uid 0", "maintenance")
	require.NoError(t, err)
	require.NotNil(t, st.Paused)

	again, err := New(Config{}, dir, WithClock(clk), WithRecorder(events.NewRing(10)))
	require.NoError(t, err)
	restored := again.Status(now).Paused
	require.NotNil(t, restored, "paused after the agent's restart")
	assert.Equal(t, "uid 0", restored.By)
	assert.Equal(t, "maintenance", restored.Reason)
	assert.True(t, restored.Since.Equal(now), "since %s", restored.Since)

	st, err = again.ResumeKills(context.Background(), "uid 0")
	require.NoError(t, err)
	assert.Nil(t, st.Paused)
	third, err := New(Config{}, dir)
	require.NoError(t, err)
	assert.Nil(t, third.Status(now).Paused, "resumed for good")
}

// Pause and resume are audited as node events, once each, and the paused
// gauge follows; a resume signals pod sync, whose kills then go ahead.
func TestPauseAndResumeAreAudited(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	rec := events.NewRing(10)
	reg := prometheus.NewRegistry()
	budget, err := New(Config{}, "", WithClock(clk), WithRecorder(rec), WithRegisterer(reg))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = budget.PauseKills(ctx, "uid 0", "failover")
	require.NoError(t, err)
	_, err = budget.PauseKills(ctx, "uid 1", "")
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(budget.metrics.paused))
	assert.Equal(t, "uid 0", budget.Kills().Paused.By, "pausing again changes nothing")
	clk.Step(90 * time.Second)
	_, err = budget.ResumeKills(ctx, "uid 2")
	require.NoError(t, err)
	_, err = budget.ResumeKills(ctx, "uid 2")
	require.NoError(t, err)
	assert.Equal(t, 0.0, testutil.ToFloat64(budget.metrics.paused))
	select {
	case <-budget.Resumed():
	default:
		t.Fatal("resume did not signal pod sync")
	}
	assert.Equal(t, []events.Event{
		{Time: now, Type: events.Warning, Reason: ReasonKillsPaused,
			Message: "Probe-triggered kills paused on this node by uid 0: failover; liveness and startup failures are reported but no container is killed until cri-prober resume"},
		{Time: now.Add(90 * time.Second), Type: events.Normal, Reason: ReasonKillsResumed,
			Message: "Probe-triggered kills resumed on this node by uid 2 (paused by uid 0 for 1m30s)"},
	}, rec.Since(time.Time{}))
}

// The kills that wait are kept per pod, each with when it began to wait
// (kept across syncs), and counted by reason in the gauge; the prober asks
// whether an instance's kill waits.
func TestDeferredKills(t *testing.T) {
	budget, err := New(Config{Pod: 1, Interval: time.Minute}, "")
	require.NoError(t, err)
	budget.SetDeferred("web", []DeferredKill{{Pod: "web", ContainerID: "a", Reason: DeferPod, Since: now}})
	budget.SetDeferred("web", []DeferredKill{{Pod: "web", ContainerID: "a", Reason: DeferPod, Since: now.Add(time.Second)},
		{Pod: "web", ContainerID: "b", Reason: DeferPod, Since: now.Add(time.Second)}})
	assert.True(t, budget.Waits("a"))
	assert.False(t, budget.Waits("c"))
	assert.True(t, budget.HasDeferred("web"))
	assert.Equal(t, []string{"web"}, budget.DeferredPods())
	st := budget.Status(now)
	require.Len(t, st.Deferred, 2)
	assert.Equal(t, now, st.Deferred[0].Since, "when it began to wait")
	assert.Equal(t, 2.0, testutil.ToFloat64(budget.metrics.deferred.WithLabelValues(DeferPod)))

	budget.SetDeferred("web", nil)
	assert.False(t, budget.Waits("a"))
	assert.Empty(t, budget.DeferredPods())
	assert.Equal(t, 0.0, testutil.ToFloat64(budget.metrics.deferred.WithLabelValues(DeferPod)))
}

// The budget's series exist at 0 from the start, so that an alert on them
// works before the first deferral.
func TestSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New(Config{}, "", WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cri_prober_kills_deferred Probe-triggered kills that wait now, by reason: node-budget (--kill-budget spent), pod-budget (--pod-kill-budget spent) or paused (cri-prober pause).
# TYPE cri_prober_kills_deferred gauge
cri_prober_kills_deferred{reason="node-budget"} 0
cri_prober_kills_deferred{reason="paused"} 0
cri_prober_kills_deferred{reason="pod-budget"} 0
# HELP cri_prober_kills_paused 1 while probe-triggered kills are paused on the node (cri-prober pause), else 0.
# TYPE cri_prober_kills_paused gauge
cri_prober_kills_paused 0
`)))
}

func TestConfigCheck(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Node: 3, Pod: 1, Interval: time.Minute}, ""},
		{Config{Node: -1, Interval: time.Minute}, "want 0 (no budget)"},
		{Config{Node: 3}, "--kill-budget-interval 0s: want a positive window"},
		{Config{Node: 1, Pod: 2, Interval: time.Minute}, "--pod-kill-budget 2 is above --kill-budget 1"},
	} {
		err := tt.cfg.Check()
		if tt.want == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, tt.want)
		}
	}
}

// A pause file written by today's agent (testdata/kills-paused.json)
// restores the pause.
func TestPauseLoadsTodaysFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", pauseFile))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, pauseFile), raw, 0o600))
	b, err := New(Config{}, dir)
	require.NoError(t, err)
	p := b.Status(now).Paused
	require.NotNil(t, p)
	assert.Equal(t, Pause{By: "uid 0 (pid 1) on the unix socket", Reason: "maintenance", Since: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}, *p)
}

// A pause file that cannot be read is not set aside, as the other state
// files are (statefile's Keep): that would resume the node's kills by
// itself. The agent does not start, and the error says what to do.
func TestPauseBadFileIsKept(t *testing.T) {
	for _, tt := range []struct{ name, content string }{
		{name: "not JSON", content: "{"},
		{name: "a list", content: "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, pauseFile), []byte(tt.content), 0o600))
			b, err := New(Config{}, dir)
			require.Error(t, err)
			assert.Nil(t, b)
			assert.ErrorContains(t, err, "remove it to resume kills, or run cri-prober pause again")
			var w *statefile.Warning
			assert.False(t, errors.As(err, &w), "an error, not a warning")
			assertFile(t, filepath.Join(dir, pauseFile), tt.content)
			assert.NoFileExists(t, filepath.Join(dir, pauseFile+".bad"))
		})
	}
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(raw))
}
