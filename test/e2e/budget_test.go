//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// sickOnDemand is a container whose liveness fails once /tmp/sick exists
// (a replacement starts without it: healthy), killed in the probe's 2 s.
const sickOnDemand = `  - name: app
    image: localhost/busybox:test
    livenessProbe:
      exec: {command: [sh, -c, "test ! -e /tmp/sick"]}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 2
`

// Issue 23: ten containers' liveness fails at once under a node budget of
// three kills per 15 s: three are killed, the seven others wait (a
// KillDeferred event each, the probes still failing and reported), and
// the budget lets three more go each time the window frees until all ten
// are replaced; never more than three kills in any 15 s.
func TestKillBudgetDefersAStorm(t *testing.T) {
	parallel(t)
	const n, burst, interval = 10, 3, 15 * time.Second
	c := dial(t)
	a := startAgentConfig(t, c, func(cfg *engine.Config) {
		cfg.KillBudget = killbudget.Config{Node: burst, Interval: interval}
	})
	var names []string
	ids := map[string]string{}
	var all []*pod
	for i := range n {
		name := uniqueName(fmt.Sprintf("storm%d", i))
		names = append(names, name)
		a.writeManifest(t, name+".yaml", name, sickOnDemand)
		p := runPodNamed(t, c, name, nil)
		ids[name] = p.start("app", "sleep", "1000") // PID 1 ignores SIGTERM: each kill takes 2 s
		all = append(all, p)
	}
	for _, name := range names {
		a.waitFor(t, name, "app", "liveness passing", 30*time.Second, func(r pods.ContainerReport) bool {
			return livenessOf(r) == results.Success
		})
	}
	for i, p := range all { // all sick at once
		p.exec(ids[names[i]], "touch", "/tmp/sick")
	}

	killings := func() []events.Event {
		var out []events.Event
		for _, name := range names {
			out = append(out, a.events.matching(name, "app", restart.ReasonKilling, "failed liveness probe")...)
		}
		slices.SortFunc(out, func(x, y events.Event) int { return x.Time.Compare(y.Time) })
		return out
	}
	deferredPods := func() []string {
		var out []string
		for _, name := range names {
			if len(a.events.matching(name, "app", restart.ReasonKillDeferred, "the node's restart budget of 3 kills per 15s (--kill-budget) is spent")) > 0 {
				out = append(out, name)
			}
		}
		return out
	}
	eventually(t, 20*time.Second, "three killed, seven deferred", func() bool { return len(killings()) >= burst && len(deferredPods()) >= n-burst })
	first := killings()
	require.Len(t, first, burst, "exactly three killed at once")
	require.Len(t, deferredPods(), n-burst)
	for _, name := range deferredPods() {
		assert.Empty(t, a.events.matching(name, "app", restart.ReasonKilling, ""), "%s: deferred, not killed", name)
	}

	// While they wait, their probes go on failing and reporting, the
	// containers run, and the restarter says which kills wait and why.
	st := a.engine.KillBudget.Kills()
	require.Len(t, st.Deferred, n-burst, "%+v", st)
	for _, d := range st.Deferred {
		assert.Equal(t, killbudget.DeferNode, d.Reason)
		assert.WithinDuration(t, first[0].Time.Add(interval), d.Until, 2*time.Second, "frees when the first kill leaves the window")
		assert.Equal(t, ids[d.Pod], d.ContainerID, "the first instance still runs")
		r, ok := a.container(d.Pod, "app")
		require.True(t, ok)
		assert.Equal(t, results.Failure, livenessOf(r), "%s: still failing, still reported", d.Pod)
		assert.Equal(t, cri.StateRunning, r.State)
	}
	assert.Equal(t, burst, st.KillsInWindow)

	// Released as the window passes: all ten in the end.
	eventually(t, 4*interval+30*time.Second, "all ten killed", func() bool { return len(killings()) == n })
	got := killings()
	for i := range got {
		in := 0
		for _, k := range got[i:] {
			if k.Time.Sub(got[i].Time) < interval-time.Second { // the event is recorded just after the commit
				in++
			}
		}
		assert.LessOrEqual(t, in, burst, "kills in the %s after %s: %v", interval, got[i].Time.Format("15:04:05.000"), times(got))
	}
	assert.GreaterOrEqual(t, got[burst].Time.Sub(got[0].Time), interval-time.Second, "the fourth kill waited for the window: %v", times(got))
	eventually(t, 10*time.Second, "nothing waits", func() bool { return len(a.engine.KillBudget.Kills().Deferred) == 0 })
}

// livenessOf is a container's stable liveness result.
func livenessOf(r pods.ContainerReport) results.Result {
	for _, p := range r.Probes {
		if p.Type == results.Liveness {
			return p.Result
		}
	}
	return results.Unknown
}

func times(list []events.Event) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.Pod+"@"+e.Time.Format("15:04:05.000"))
	}
	return out
}

// Issue 23: `cri-prober pause` through the real binary and API (a unix
// socket): while paused, no container is killed though every liveness
// fails (a KillDeferred event each, status says so); `cri-prober resume`
// lets the kills go ahead. Both are audited with the caller's uid.
func TestPauseStopsEveryKill(t *testing.T) {
	const n = 3
	c := dial(t)
	dir := t.TempDir()
	manifests := t.TempDir()
	var names []string
	for i := range n {
		name := uniqueName(fmt.Sprintf("paused%d", i))
		names = append(names, name)
		require.NoError(t, os.WriteFile(filepath.Join(manifests, name+".yaml"), []byte(podManifest(name, `  - name: app
    image: localhost/busybox:test
    livenessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 2
`)), 0o644))
	}
	server := startUnixAgent(t, manifests, filepath.Join(dir, "api.sock"), "--state-dir", filepath.Join(dir, "state")).server

	out, err := runBinary(t, "pause", "--server", server, "--reason", "e2e maintenance")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Kills are paused on this node by uid ")
	assert.Contains(t, out, "(e2e maintenance)")

	for _, name := range names {
		runPodNamed(t, c, name, nil).start("app", "sleep", "1000")
	}
	eventsOf := func(reason string) []events.Event {
		out, err := runBinary(t, "events", "-A", "--server", server, "-o", "json")
		require.NoError(t, err, out)
		var all api.EventList
		require.NoError(t, json.Unmarshal([]byte(out), &all), out)
		var list []events.Event
		for _, e := range all.Events {
			if e.Reason == reason {
				list = append(list, e)
			}
		}
		return list
	}
	deferredPods := func() map[string]bool {
		m := map[string]bool{}
		for _, e := range eventsOf(restart.ReasonKillDeferred) {
			if strings.Contains(e.Message, "kills are paused on this node") {
				m[e.Pod] = true
			}
		}
		return m
	}
	eventually(t, 30*time.Second, "every kill deferred", func() bool { return len(deferredPods()) == n })
	// Each liveness failed a few more times, still nothing is killed.
	for _, name := range names {
		eventually(t, 15*time.Second, name+": failing on while paused", func() bool {
			n := 0
			for _, e := range eventsOf("Unhealthy") {
				if e.Pod == name {
					n++
				}
			}
			return n >= 4
		})
	}
	assert.Empty(t, eventsOf(restart.ReasonKilling), "none killed while paused")
	out, err = runBinary(t, "status", "-A", "--server", server)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Kills are paused on this node")
	assert.Contains(t, out, fmt.Sprintf("Kills waiting: %d", n))
	paused := eventsOf(killbudget.ReasonKillsPaused)
	require.Len(t, paused, 1)
	assert.Contains(t, paused[0].Message, "by uid ")
	assert.Contains(t, paused[0].Message, "e2e maintenance")

	out, err = runBinary(t, "resume", "--server", server)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Kills are not paused on this node.")
	eventually(t, 30*time.Second, "every kill goes ahead after resume", func() bool {
		killed := map[string]bool{}
		for _, e := range eventsOf(restart.ReasonKilling) {
			killed[e.Pod] = true
		}
		return len(killed) == n
	})
	resumed := eventsOf(killbudget.ReasonKillsResumed)
	require.Len(t, resumed, 1)
	assert.Contains(t, resumed[0].Message, "by uid ")
	first := eventsOf(restart.ReasonKilling)[0]
	assert.True(t, !first.Time.Before(resumed[0].Time), "killed after the resume")
}
