package restart

import (
	"time"

	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// ReasonKillDeferred is the event of a probe-triggered kill that waits
// for the restart budget or a pause (pkg/killbudget).
const ReasonKillDeferred = "KillDeferred"

// killDecision is a kill that a plan defers.
type killDecision struct {
	reason string
	until  time.Time // zero: paused
}

// deferKills decides which of a pod's probe-triggered kills go ahead at
// now under the budget snapshot s: in order, each goes while the node and
// the pod have kills left in the window; the others wait (paused: all
// wait). It is pure. It returns a decision per kill, nil for a kill that
// goes ahead.
func deferKills(s killbudget.Snapshot, pod string, now time.Time, kills []containerToKill) []*killDecision {
	out := make([]*killDecision, len(kills))
	var nodeWindow, podWindow []time.Time
	if s.Config.Limited() {
		from := now.Add(-s.Config.Interval)
		for _, k := range s.Kills {
			if k.At.After(from) {
				nodeWindow = append(nodeWindow, k.At)
				if k.Pod == pod {
					podWindow = append(podWindow, k.At)
				}
			}
		}
	}
	for i, k := range kills {
		if _, ok := probeOf(k.cause); !ok {
			continue // exits and unknown states keep kubelet's behaviour
		}
		switch {
		case s.Paused:
			out[i] = &killDecision{reason: killbudget.DeferPaused}
		case s.Config.Node > 0 && len(nodeWindow) >= s.Config.Node:
			out[i] = &killDecision{reason: killbudget.DeferNode, until: frees(nodeWindow, s.Config.Node, s.Config.Interval)}
		case s.Config.Pod > 0 && len(podWindow) >= s.Config.Pod:
			out[i] = &killDecision{reason: killbudget.DeferPod, until: frees(podWindow, s.Config.Pod, s.Config.Interval)}
		default:
			nodeWindow = append(nodeWindow, now)
			podWindow = append(podWindow, now)
		}
	}
	return out
}

// frees is when a window holding kills (oldest first, at least limit of
// them) has room for one more: when all but limit-1 have left it.
func frees(kills []time.Time, limit int, interval time.Duration) time.Time {
	return kills[len(kills)-limit].Add(interval)
}

// probeKills counts the probe-triggered kills of a plan (what it spends).
func probeKills(pl *plan) int {
	n := 0
	for _, k := range pl.kill {
		if _, ok := probeOf(k.cause); ok {
			n++
		}
	}
	return n
}

// withheld returns res without the liveness and startup failures of the
// instances ids, whose kill waits: to the pod's actions they run as if
// their probes had not failed.
func withheld(res podResults, ids map[string]bool) podResults {
	out := podResults{}
	for k, r := range res {
		if r == results.Failure && ids[k.ContainerID] && (k.Type == results.Liveness || k.Type == results.Startup) {
			continue
		}
		out[k] = r
	}
	return out
}

// WithKillBudget sets the node's restart budget and pause (default: no
// budget, not paused, nothing kept). The prober and the API hold the same
// budget.
func WithKillBudget(b *killbudget.Budget) Option {
	return func(r *Restarter) error { r.budget = b; return nil }
}
