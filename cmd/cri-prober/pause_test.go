package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

// A bad budget is refused before anything starts (no runtime is dialled:
// the endpoint does not exist), naming the flag.
func TestRunRefusesABadKillBudget(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--kill-budget", "-1"}, "want 0 (no budget)"},
		{[]string{"--kill-budget", "3", "--kill-budget-interval", "0s"}, "--kill-budget-interval 0s: want a positive window"},
		{[]string{"--kill-budget", "1", "--pod-kill-budget", "2"}, "--pod-kill-budget 2 is above --kill-budget 1"},
	} {
		args := append([]string{"run", "--runtime-endpoint", "unix:///nonexistent/cri.sock", "--listen", ""}, tt.args...)
		err := run(context.Background(), args, io.Discard, io.Discard)
		require.ErrorIs(t, err, errUsage, "%v", tt.args)
		assert.ErrorContains(t, err, tt.want)
	}
}

// status, pause and resume say whether kills are paused, the budget, and
// which kills wait and why.
func TestPrintKills(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	st := killbudget.Status{NodeBudget: 3, Interval: "20s", KillsInWindow: 3,
		Paused: &killbudget.Pause{By: "uid 0 (unix socket)", Reason: "failover", Since: now.Add(-time.Minute)},
		Deferred: []killbudget.DeferredKill{
			{Namespace: "shop", Pod: "web", Container: "app", Probe: "Liveness", Reason: killbudget.DeferNode, Until: now.Add(5 * time.Second)},
		}}
	var b strings.Builder
	printKills(&b, st, now, true)
	out := b.String()
	assert.Contains(t, out, "Kills are paused on this node by uid 0 (unix socket) since ")
	assert.Contains(t, out, "(failover): liveness and startup failures kill nothing until cri-prober resume.\n")
	assert.Contains(t, out, "Restart budget: 3 kills on the node, no limit per pod, per 20s (3 in the window).\n")
	assert.Contains(t, out, "Kills waiting: 1\nPOD        CONTAINER   PROBE      WHY\nshop/web   app         Liveness   node restart budget spent, frees in 5s\n")

	b.Reset()
	printKills(&b, killbudget.Status{}, now, true)
	assert.Equal(t, "Kills are not paused on this node.\n", b.String())
	b.Reset()
	printKills(&b, killbudget.Status{}, now, false)
	assert.Empty(t, b.String(), "status says nothing when there is nothing to say")
}
