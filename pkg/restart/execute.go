package restart

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// syncPod is one sync of a pod, as kubelet's pod worker runs SyncPod: the
// plan from the newest view of the runtime, then the plan carried out. It
// returns when to look again (0: at the next change).
func (r *Restarter) syncPod(ctx context.Context, w *podWorker) time.Duration {
	// Announced before the view is read, so that a listing published
	// meanwhile wakes the worker again.
	w.awaitingListing.Store(true)
	v := r.latestView()
	// Never act twice on one state of the runtime: the view must come from
	// a listing that started after the previous sync acted, and after
	// whatever that sync's plan waits for (kubelet's GetNewerThan).
	if v.Seq <= w.state.lastActed || (!w.needView.IsZero() && v.Time.Before(w.needView)) {
		if wait := w.needView.Sub(r.clock.Now()); wait > 0 {
			return wait // then a listing is asked for
		}
		if r.relister != nil {
			r.relister.Trigger()
		}
		return 0
	}
	w.awaitingListing.Store(false)
	p, ok := v.Pod(w.key)
	if !ok {
		return 0
	}
	w.state.prune(p)
	pl := r.plan(p, v.Time, w.state)
	if pl.initialized {
		r.setInitialized(w.key)
	}
	w.needView = pl.needView
	r.tellDeferred(w, p, pl)
	for _, c := range pl.backoffEvents {
		w.state.memory.reported[lastExit(c).ID] = true
		r.eventf(p, c.Name, events.Warning, ReasonBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, p.Name, p.Namespace, p.UID)
	}
	if r.mode == Observe {
		r.tellWhatWouldBeDone(w, p, pl)
		return 0
	}
	if pl.empty() {
		r.updateWaiting(w, p, pl)
		return pl.retry
	}
	r.hold(p)
	retry := r.execute(ctx, w, p, pl)
	// What holds a container back shows with the sync's outcome, as
	// kubelet's waiting reasons come from the sync before (reasonCache).
	r.updateWaiting(w, p, pl)
	if r.relister != nil {
		w.state.lastActed = r.relister.Relists()
		r.relister.Trigger()
	} else {
		w.state.lastActed = v.Seq
	}
	r.release(w.key, w.state.lastActed)
	if pl.retry > 0 && (retry == 0 || pl.retry < retry) {
		retry = pl.retry
	}
	return retry
}

// plan makes the pod's plan from what it reads once — the probes' results
// of its instances, its back-off (expired entries collected first, as
// kubelet's housekeeping does) and the plan's memory — and spends its
// probe-triggered kills in the restart budget; a plan made from a budget
// that changed meanwhile (kills of another pod, a pause) is made again
// from the new one.
func (r *Restarter) plan(p *pods.Pod, viewTime time.Time, state *podState) plan {
	jitter := r.jitter()
	r.backoff.GC(r.clock.Now())
	res, backoff := readResults(r.results, p), readBackoff(r.backoff, p)
	for {
		now := r.clock.Now()
		pl := makePlan(planInput{pod: p, viewTime: viewTime, results: res, backoff: backoff, memory: state.memory,
			now: now, mode: r.mode, syncFrequency: r.syncFrequency, jitter: jitter, budget: r.budget.Snapshot()})
		if r.mode == Observe || r.budget.Commit(pl.budgetVersion, p.Key, probeKills(&pl), now) {
			return pl
		}
	}
}

// tellDeferred publishes the pod's kills that wait, and tells those the
// plan says to (a KillDeferred event).
func (r *Restarter) tellDeferred(w *podWorker, p *pods.Pod, pl plan) {
	if r.mode == Observe {
		return
	}
	var list []killbudget.DeferredKill
	now := r.clock.Now()
	for _, d := range pl.deferred {
		probe, _ := probeOf(d.cause)
		list = append(list, killbudget.DeferredKill{Namespace: p.Namespace, Pod: p.Name, Container: d.container.Name, ContainerID: d.instance.ID,
			Probe: probe.String(), Reason: d.reason, Since: now, Until: d.until})
		if !d.tell {
			continue
		}
		w.state.memory.deferTold[d.instance.ID] = d.reason
		r.metrics.deferredTotal.WithLabelValues(d.reason).Inc()
		r.eventf(p, d.container.Name, events.Warning, ReasonKillDeferred, "%s, kill deferred: %s", d.message, r.deferredWhy(d.killDecision, now))
	}
	r.budget.SetDeferred(p.Key, list)
}

// deferredWhy says why a kill waits and until when, naming the setting.
func (r *Restarter) deferredWhy(d killDecision, now time.Time) string {
	cfg := r.budget.Config()
	switch d.reason {
	case killbudget.DeferPaused:
		return "kills are paused on this node (cri-prober pause); it goes ahead after cri-prober resume if the probe still fails"
	case killbudget.DeferNode:
		return fmt.Sprintf("the node's restart budget of %s per %s (--kill-budget) is spent; it frees at %s (in %s), and the kill goes ahead then if the probe still fails",
			plural(cfg.Node, "kill"), cfg.Interval, d.until.UTC().Format(time.RFC3339), d.until.Sub(now).Round(time.Second))
	default:
		return fmt.Sprintf("the pod's restart budget of %s per %s (--pod-kill-budget) is spent; it frees at %s (in %s), and the kill goes ahead then if the probe still fails",
			plural(cfg.Pod, "kill"), cfg.Interval, d.until.UTC().Format(time.RFC3339), d.until.Sub(now).Round(time.Second))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// updateWaiting shows why the pod's containers that are to start do not,
// when the plan decided starts: the plan's reasons (back-off), else why
// their last start failed.
func (r *Restarter) updateWaiting(w *podWorker, p *pods.Pod, pl plan) {
	if pl.waiting == nil {
		return
	}
	waiting := maps.Clone(pl.waiting)
	for name, failed := range w.state.failed {
		if _, ok := waiting[name]; !ok && !isRunning(p, name) {
			if waiting == nil {
				waiting = map[string]pods.Waiting{}
			}
			waiting[name] = failed
		}
	}
	r.setWaiting(w.key, waiting)
}

// isRunning reports whether container name of p runs.
func isRunning(p *pods.Pod, name string) bool {
	c, ok := p.Container(name)
	return ok && c.Running()
}

// execute carries a plan out through CRI in kubelet's SyncPod order: the
// pod killed (or the containers to kill), the instances no longer needed
// removed, the sandbox made, the init containers then the containers
// started. It returns when to look again after a failed call (0: at the
// next change).
func (r *Restarter) execute(ctx context.Context, w *podWorker, p *pods.Pod, pl plan) time.Duration {
	for _, c := range pl.abandon {
		if err := r.removeInstance(ctx, p, c); err != nil {
			r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot remove container %s left by an interrupted restart: %v", c.Name, err)
			return failedActionBackoff
		}
		r.eventf(p, c.Name, events.Normal, ReasonAbandoned,
			"Removed container %s (attempt %d) left by an interrupted restart: the instance it was to replace is still running and will be probed again", c.Name, c.Attempt)
	}
	switch {
	case pl.killPod || pl.teardown:
		if pl.killPod && !r.killPod(ctx, p, pl) {
			return failedActionBackoff
		}
		if pl.teardown {
			return r.teardown(ctx, p)
		}
	case len(pl.reset) > 0:
		return r.reset(ctx, p, pl.reset)
	default:
		for _, k := range pl.kill {
			if err := r.killForCause(ctx, w, p, k); err != nil {
				r.eventf(p, k.container.Name, events.Warning, ReasonFailed, "Stopping container %s failed: %v", k.container.Name, err)
				return failedActionBackoff
			}
		}
	}
	for _, c := range pl.remove {
		if err := r.removeInstance(ctx, p, c); err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot remove an old instance", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", c.ID, "err", err)
		}
	}
	sandbox := p.Sandbox
	if pl.createSandbox {
		var err error
		if sandbox, err = r.createSandbox(ctx, p, pl.sandboxAttempt); err != nil {
			return failedActionBackoff
		}
	}
	var retry time.Duration
	for _, s := range pl.starts {
		if err := r.startContainer(ctx, w, p, sandbox, s); err != nil {
			retry = failedActionBackoff
			if s.container.Kind.IsInit() && s.container.Kind != spec.Sidecar {
				break // the pod cannot go on until this one runs
			}
		}
	}
	return retry
}

// tellWhatWouldBeDone is --restart=none: each kill is told once, nothing
// is done.
func (r *Restarter) tellWhatWouldBeDone(w *podWorker, p *pods.Pod, pl plan) {
	for _, k := range pl.kill {
		if w.state.told[k.instance.ID] {
			continue
		}
		w.state.told[k.instance.ID] = true
		r.eventf(p, k.container.Name, events.Normal, ReasonWouldKill, "%s (--restart=none: nothing done)", k.message)
	}
	if pl.killPod && p.Sandbox != nil && !w.state.told[p.Sandbox.ID] {
		w.state.told[p.Sandbox.ID] = true
		r.eventf(p, "", events.Normal, ReasonWouldKill, "No container of pod %s/%s is left running or to be restarted: the pod would be stopped (--restart=none: nothing done)", p.Namespace, p.Name)
	}
}
