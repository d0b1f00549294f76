package restart

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// killForCause kills one container that the plan lists, and notes it in
// the ledger: at once if the plan does not restart it, else when its
// replacement starts.
func (r *Restarter) killForCause(ctx context.Context, w *podWorker, p *pods.Pod, k containerToKill) error {
	grace, err := r.killContainer(ctx, p, k.container, k.instance, k.message, k.cause, nil)
	if err != nil {
		return err
	}
	w.state.memory.killed[k.instance.ID] = true
	if t, ok := probeOf(k.cause); ok {
		r.metrics.killed(p, k.container.Name, t.String())
	}
	e := r.entry(ctx, p, k.instance, k.cause)
	e.GracePeriodSeconds = grace
	if t, ok := probeOf(k.cause); ok {
		e.Failures = failures(r.histories.FailuresBehind(results.HistoryKey{Pod: p.Key, Container: k.container.Name, Type: t}, k.instance.ID))
	}
	if !k.restarts {
		e.Action = ledger.ActionStopped
		r.record(ctx, e)
		return nil
	}
	w.state.pending[k.instance.ID] = e // recorded when the replacement starts
	return nil
}

// probeOf returns the probe behind a kill's cause.
func probeOf(cause Cause) (results.ProbeType, bool) {
	switch cause {
	case CauseLiveness:
		return results.Liveness, true
	case CauseStartup:
		return results.Startup, true
	}
	return 0, false
}

// killContainer is kubelet's killContainer: the Killing event, the preStop
// hook (its time taken from the grace period), the wait for its turn when
// the whole pod stops (ordering), then StopContainer with what is left of
// the grace period, never below kubelet's 2 s. It returns the grace period
// the stop was given.
func (r *Restarter) killContainer(ctx context.Context, p *pods.Pod, c *pods.Container, inst *cri.Container, message string, cause Cause, ordering *terminationOrdering) (int64, error) {
	grace := gracePeriod(p, c, cause)
	if message == "" {
		message = fmt.Sprintf("Stopping container %s", c.Name)
	}
	r.eventf(p, c.Name, events.Normal, ReasonKilling, "%s", message)
	if h := c.Spec.PreStop(); h != nil && grace > 0 {
		grace -= r.runPreStop(ctx, p, c, inst, h, grace)
	}
	if ordering != nil && grace > 0 {
		grace -= ordering.waitForTurn(r.clock, c.Name, grace)
	}
	grace = max(grace, MinimumGracePeriod)
	klog.FromContext(ctx).V(2).Info("Killing container with a grace period", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID, "gracePeriod", grace)
	if err := r.runtime.StopContainer(ctx, inst.ID, grace); err != nil {
		return grace, err
	}
	if ordering != nil {
		ordering.terminated(c.Name)
	}
	return grace, nil
}

// EvictionGracePeriod is the grace period, in seconds, of the kill of an
// evicted pod's containers: kubelet's immediateEvictionGracePeriodSeconds,
// which its eviction manager gives every pod it evicts for its local
// storage limits (its preStop hooks get that long; StopContainer at least
// MinimumGracePeriod).
const EvictionGracePeriod = 1

// maxGracePeriod bounds a grace period, in seconds: a century. The API
// allows any int64, but seconds turned into a time.Duration overflow past
// 292 years, and an overflowed deadline is already past: the container
// would never be stopped at all.
const maxGracePeriod = 100 * 365 * 24 * 3600

// gracePeriod is GracePeriod for a kill of c for cause: the failed
// probe's, for a liveness or startup kill.
func gracePeriod(p *pods.Pod, c *pods.Container, cause Cause) int64 {
	if cause == CauseEvicted {
		return EvictionGracePeriod
	}
	var failed *corev1.Probe
	if t, ok := probeOf(cause); ok && c.Spec != nil {
		failed = c.Spec.Probe(t)
	}
	return GracePeriod(p.Policy.TerminationGracePeriodSeconds, failed)
}

// GracePeriod is kubelet's setTerminationGracePeriod, the grace period a
// kill starts with (its preStop hook and its turn take their time from
// it; StopContainer gets at least MinimumGracePeriod): for a liveness or
// startup kill, failed is the probe that failed, and its
// terminationGracePeriodSeconds wins if it sets one; else the pod's,
// podGrace. At most maxGracePeriod.
func GracePeriod(podGrace int64, failed *corev1.Probe) int64 {
	if failed != nil && failed.TerminationGracePeriodSeconds != nil {
		return min(*failed.TerminationGracePeriodSeconds, maxGracePeriod)
	}
	return min(podGrace, maxGracePeriod)
}

// runPreStop runs the preStop hook for at most grace seconds (kubelet's
// executePreStopHook) and returns the whole seconds it took. A hook still
// running then is cancelled: the stop goes on.
func (r *Restarter) runPreStop(ctx context.Context, p *pods.Pod, c *pods.Container, inst *cri.Container, h *corev1.LifecycleHandler, grace int64) int64 {
	start := r.clock.Now()
	hookCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if msg, err := r.hooks.Run(hookCtx, h, r.hookTarget(p, c, inst.ID)); err != nil && hookCtx.Err() == nil {
			// The hook's output only at -v=1, as kubelet: it may hold secrets.
			logger := klog.FromContext(ctx)
			logger.Error(err, "PreStop hook failed", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID)
			logger.V(1).Info("PreStop hook output", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "message", msg)
			// Not the hook's output: it may hold secrets (kubelet's rule).
			r.eventf(p, c.Name, events.Warning, ReasonFailedPreStopHook, "PreStopHook failed")
		}
	}()
	deadline := r.clock.NewTimer(time.Duration(grace) * time.Second)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C():
		klog.FromContext(ctx).V(2).Info("PreStop hook not completed in grace period", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "gracePeriod", grace)
		cancel()
		<-done
	case <-ctx.Done():
		cancel()
		<-done
	}
	return int64(r.clock.Since(start).Seconds())
}

func (r *Restarter) hookTarget(p *pods.Pod, c *pods.Container, id string) lifecycle.Target {
	return lifecycle.Target{ContainerID: id, Container: c.Spec, PodIP: p.IP(), OnHTTPFallback: func(host string) {
		r.eventf(p, c.Name, events.Warning, ReasonHTTPFallback, "request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", host)
	}}
}

// killPod stops every running container of the pod with the pod's grace
// period — regular containers first, sidecars after them in reverse order,
// as kubelet orders a pod's termination — and then its sandboxes
// (kubelet's killPodWithSyncResult). It reports whether everything
// stopped.
func (r *Restarter) killPod(ctx context.Context, p *pods.Pod, pl plan) bool {
	var running []*pods.Container
	for _, c := range p.Containers {
		if c.Running() {
			running = append(running, c)
		}
	}
	switch pl.why {
	case killSandboxChanged:
		if p.Sandbox != nil {
			r.eventf(p, "", events.Normal, ReasonSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
	case killRemoved:
		r.eventf(p, "", events.Normal, ReasonStoppingPod, "Stopping pod %s/%s: its manifest was removed, edited or no longer loads", p.Namespace, p.Name)
	case killDeadline:
		r.eventf(p, "", events.Normal, pods.ReasonDeadlineExceeded, "%s", pods.MessageDeadlineExceeded)
	case killEvicted:
		// The eviction told it (kubelet's eviction manager records Evicted).
	case killCompleted:
		r.eventf(p, "", events.Normal, ReasonStoppingPod, "Stopping pod %s/%s: it completed (phase %s)", p.Namespace, p.Name, p.Phase)
	default:
		r.eventf(p, "", events.Normal, ReasonStoppingPod, "Stopping pod %s/%s: no container is left running or to be restarted (restartPolicy %s)", p.Namespace, p.Name, p.Policy.RestartPolicy)
	}
	ordering := newTerminationOrdering(p, running)
	var wg sync.WaitGroup
	failed := make(chan error, len(running))
	for _, c := range running {
		wg.Go(func() {
			cause := CausePodKill
			if pl.why == killEvicted {
				cause = CauseEvicted
			}
			if _, err := r.killContainer(ctx, p, c, c.Current, "", cause, ordering); err != nil {
				failed <- fmt.Errorf("container %s: %w", c.Name, err)
				ordering.terminated(c.Name) // do not hold up the others
			}
		})
	}
	wg.Wait()
	close(failed)
	ok := true
	for err := range failed {
		ok = false
		r.eventf(p, "", events.Warning, ReasonFailed, "Stopping pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	for _, sb := range p.Sandboxes {
		if sb.State != cri.SandboxReady {
			continue
		}
		if err := r.runtime.StopPodSandbox(ctx, sb.ID); err != nil {
			ok = false
			r.eventf(p, "", events.Warning, ReasonFailed, "Stopping pod sandbox %s failed: %v", sb.ID, err)
		}
	}
	return ok
}

// teardown removes a stopped orphan: its containers, its sandboxes, then
// what it left on the host (kubelet's removal of a pod whose manifest is
// gone: container and sandbox garbage collection, pod directory cleanup).
func (r *Restarter) teardown(ctx context.Context, p *pods.Pod) time.Duration {
	for _, c := range p.Containers {
		for _, i := range c.Instances {
			if err := r.removeInstance(ctx, p, i); err != nil {
				r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot remove container %s: %v", c.Name, err)
				return failedActionBackoff
			}
		}
	}
	for _, sb := range p.Sandboxes {
		if err := r.runtime.RemovePodSandbox(ctx, sb.ID); err != nil && !cri.IsNotFound(err) {
			r.eventf(p, "", events.Warning, ReasonFailed, "Cannot remove pod sandbox %s: %v", sb.ID, err)
			return failedActionBackoff
		}
	}
	if r.maker != nil {
		if err := r.maker.TearDown(ctx, p); err != nil {
			r.eventf(p, "", events.Warning, ReasonFailed, "Cannot remove what pod %s/%s left on the host: %v", p.Namespace, p.Name, err)
			return failedActionBackoff
		}
	}
	return 0
}

// reset is kubelet's RestartAllContainers in place: every running
// container of the pod killed with no grace period, then every instance
// removed (those that triggered it last), so that the next sync starts
// the pod over from its first init container in the same sandbox.
func (r *Restarter) reset(ctx context.Context, p *pods.Pod, instances []*cri.Container) time.Duration {
	for _, i := range instances {
		c, ok := p.Container(i.Name)
		if !ok {
			continue
		}
		if i.State == cri.StateRunning || i.State == cri.StateUnknown {
			r.eventf(p, c.Name, events.Normal, ReasonKilling, "Stopping container %s: a container's exit restarts every container of the pod (RestartAllContainers)", c.Name)
			if err := r.runtime.StopContainer(ctx, i.ID, 0); err != nil {
				r.eventf(p, c.Name, events.Warning, ReasonFailed, "Stopping container %s failed: %v", c.Name, err)
				return failedActionBackoff
			}
			r.metrics.killed(p, c.Name, string(CauseRestartAll))
		}
		// kubelet removes them keeping their logs (removeContainer with
		// keepLogs): they go with the pod.
		if err := r.runtime.RemoveContainer(ctx, i.ID); err != nil && !cri.IsNotFound(err) {
			r.eventf(p, c.Name, events.Warning, ReasonFailed, "Removing container %s failed: %v", c.Name, err)
			return failedActionBackoff
		}
	}
	r.setResets(p.Key, resetsOf(p, r.resetsOf(p.Key)))
	return 0
}

// resetsOf is what kubelet's status keeps of the containers a reset of p
// removes: each that had run (its status was not waiting) counts one more
// restart than it showed (its instance's count, or the previous reset's
// when higher).
func resetsOf(p *pods.Pod, prev map[string]pods.Reset) map[string]pods.Reset {
	out := map[string]pods.Reset{}
	for _, c := range p.Containers {
		cur := c.Current
		if cur == nil || cur.State != cri.StateRunning && cur.State != cri.StateExited {
			continue
		}
		out[c.Name] = pods.Reset{RestartCount: max(c.RestartCount(), prev[c.Name].RestartCount) + 1}
	}
	return out
}

// terminationOrdering is kubelet's: when a pod stops, each sidecar waits
// until every regular container and every later sidecar has stopped.
type terminationOrdering struct {
	mu      sync.Mutex
	stopped map[string]chan struct{}
	prereqs map[string][]chan struct{}
}

func newTerminationOrdering(p *pods.Pod, running []*pods.Container) *terminationOrdering {
	o := &terminationOrdering{stopped: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, c := range running {
		isRunning[c.Name] = true
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch)
		}
		o.stopped[name] = ch
		return ch
	}
	var regular []chan struct{}
	var inits []*pods.Container
	for _, c := range p.Containers {
		switch {
		case c.Kind == spec.Regular:
			regular = append(regular, channel(c.Name))
		default:
			inits = append(inits, c)
		}
	}
	previousSidecar := ""
	for i := len(inits) - 1; i >= 0; i-- {
		c := inits[i]
		channel(c.Name)
		if c.Kind != spec.Sidecar {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], regular...)
		if previousSidecar != "" {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], o.stopped[previousSidecar])
		}
		previousSidecar = c.Name
	}
	return o
}

// waitForTurn waits until the container's prerequisites have stopped or
// grace seconds passed, and returns the whole seconds waited.
func (o *terminationOrdering) waitForTurn(clk clock.Clock, name string, grace int64) int64 {
	start := clk.Now()
	timer := clk.NewTimer(time.Duration(grace) * time.Second)
	defer timer.Stop()
	deadline := timer.C()
	o.mu.Lock()
	prereqs := o.prereqs[name]
	o.mu.Unlock()
	for _, ch := range prereqs {
		select {
		case <-ch:
		case <-deadline:
			return int64(clk.Now().Sub(start).Seconds())
		}
	}
	return int64(clk.Now().Sub(start).Seconds())
}

// terminated says that the container has stopped.
func (o *terminationOrdering) terminated(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.stopped[name]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

func failures(list []results.Observation) []ledger.Failure {
	out := make([]ledger.Failure, 0, len(list))
	for _, o := range list {
		out = append(out, ledger.Failure{Time: o.Time, Output: o.Output, Consecutive: o.Consecutive, Threshold: o.Threshold})
	}
	return out
}
