package restart

import (
	"context"
	"regexp"
	"strconv"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// startContainer starts container c of pod p again, as kubelet's start()
// in SyncPod: back-off first (measured from the newest exit the view
// shows, kubelet's doBackOff), then a new attempt created from the last
// instance's CRI config, started, and its postStart hook run. It returns
// when to look again (0: at the next change).
//
// What kubelet would create from the Pod spec the agent can only create
// from an earlier instance: a container with no instance yet, or whose
// newest instance its creator has created but not started, is left to its
// creator.
func (r *Restarter) startContainer(ctx context.Context, w *podWorker, p *pods.Pod, c *pods.Container, fresh *listing) time.Duration {
	list := fresh.byName[c.Name]
	if len(list) == 0 {
		return 0 // never created: its creator's to create
	}
	newest := list[0]
	switch newest.State {
	case cri.StateRunning:
		return 0 // started meanwhile
	case cri.StateCreated:
		if newest.Annotations[cri.AnnotationRestartOf] == "" {
			return 0 // created by someone else, who will start it
		}
		// Ours, created before an interruption (an agent restart)
		// between create and start.
		return r.finishInterrupted(ctx, w, p, c, list)
	}
	key := containerKey{p.Key, c.Name}
	now := r.clock.Now()
	if !w.acted[newest.ID] {
		// An exit the restarter did not cause: not while the pod is being
		// stopped by someone else.
		finished, err := r.finishedAt(ctx, c, newest)
		if err != nil {
			return failedActionBackoff
		}
		if settle := exitSettle - now.Sub(finished); settle > 0 {
			return settle
		}
		sb, err := r.runtime.PodSandboxStatus(ctx, p.Sandbox.ID, false)
		if err != nil {
			return failedActionBackoff // the runtime is away: ask again later
		}
		if sb.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			return 0
		}
	}
	if prev := fresh.lastExit(c.Name); prev != nil {
		finished, err := r.finishedAt(ctx, c, prev)
		if err != nil {
			return failedActionBackoff
		}
		if wait := r.backoff.Wait(key, finished, now); wait > 0 {
			if !w.reported[prev.ID] {
				w.reported[prev.ID] = true
				r.eventf(p, c.Name, events.Warning, ReasonBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, p.Name, p.Namespace, p.UID)
			}
			r.setWaiting(key, &Waiting{Reason: WaitingCrashLoop, Until: finished.Add(r.backoff.Delay(key))})
			// kubelet's pod worker comes back after the remaining wait
			// times a jitter in [1, 1.5].
			return time.Duration(float64(wait) * (1 + backoffRetryJitter*r.jitter()))
		}
		r.backoff.Next(key, finished, now)
	}

	entry, killed := w.pending[newest.ID]
	if !killed {
		entry = r.entry(ctx, p, newest, CauseExit)
	}
	cfg, err := r.runtime.ContainerConfig(ctx, newest.ID)
	if err != nil {
		r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot restart container %s: %v", c.Name, err)
		return failedActionBackoff
	}
	sandboxCfg, err := r.sandboxConfig(ctx, p.Sandbox.ID)
	if err != nil {
		r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot restart container %s: %v", c.Name, err)
		return failedActionBackoff
	}
	attempt := fresh.maxAttempt(c.Name, p.Sandbox.ID) + 1
	cfg.Metadata.Attempt = attempt
	cfg.LogPath = nextLogPath(cfg.GetLogPath(), attempt)
	annotations := make(map[string]string, len(cfg.Annotations)+2)
	for k, v := range cfg.Annotations {
		annotations[k] = v
	}
	annotations[cri.AnnotationRestartOf] = newest.ID
	annotations[cri.AnnotationRestartCause] = entry.Cause
	cfg.Annotations = annotations

	// Until its start is over the replacement is not current: the old
	// instance stays the one reported (and probed, were it running).
	inst := pods.Instance{SandboxID: p.Sandbox.ID, Name: c.Name, Attempt: attempt}
	r.starting.SetStarting(inst, true)
	defer r.starting.SetStarting(inst, false)
	id, err := r.runtime.CreateContainer(ctx, p.Sandbox.ID, cfg, sandboxCfg)
	if err != nil {
		r.eventf(p, c.Name, events.Warning, ReasonFailed, "Error: cannot create container %s: %v", c.Name, err)
		return failedActionBackoff
	}
	r.eventf(p, c.Name, events.Normal, ReasonCreated, "Container created") // kubelet 1.36's text
	created := &cri.Container{ID: id, SandboxID: p.Sandbox.ID, Name: c.Name, Attempt: attempt, State: cri.StateCreated, CreatedAt: now}
	if !r.run(ctx, w, p, c, created, Cause(entry.Cause)) {
		return failedActionBackoff
	}
	delete(w.pending, newest.ID)
	entry.Action, entry.ReplacementID, entry.Attempt, entry.Time = ActionRestarted, id, attempt, r.clock.Now()
	if !fresh.killedNow[newest.ID] {
		if f, err := r.finishedAt(ctx, c, newest); err == nil {
			entry.BackOffSeconds = now.Sub(f).Seconds()
		}
	}
	r.record(ctx, entry)
	r.removeOlderExited(ctx, c, list, newest)
	return 0
}

// run starts a created instance and runs the container's postStart hook
// (kubelet's startContainer, steps 3 and 4). A failed hook kills the
// instance (with the pod's grace period); its exit is then restarted with
// back-off. It reports whether the container started and its hook passed.
func (r *Restarter) run(ctx context.Context, w *podWorker, p *pods.Pod, c *pods.Container, inst *cri.Container, cause Cause) bool {
	if err := r.runtime.StartContainer(ctx, inst.ID); err != nil {
		r.eventf(p, c.Name, events.Warning, ReasonFailed, "Error: cannot start container %s: %v", c.Name, err)
		return false
	}
	r.recorder.Record(events.Event{Time: r.clock.Now(), Type: events.Normal, Reason: ReasonStarted, Transition: events.TransitionRestarted,
		Namespace: p.Namespace, Pod: p.Name, Container: c.Name, Message: "Container started"})
	r.metrics.restarted(p, c.Name, cause)
	r.setWaiting(containerKey{p.Key, c.Name}, nil)
	h := c.Spec.PostStart()
	if h == nil {
		return true
	}
	msg, err := r.hooks.Run(ctx, h, r.hookTarget(p, c, inst.ID))
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false // the agent is stopping: not the container's failure
	}
	// The hook's output only at -v=1, as kubelet: it may hold secrets.
	logger := klog.FromContext(ctx)
	logger.Error(err, "Failed to execute PostStartHook", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID)
	logger.V(1).Info("PostStartHook output", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "message", msg)
	// Not the hook's output: it may hold secrets (kubelet's rule).
	r.eventf(p, c.Name, events.Warning, ReasonFailedPostStartHook, "PostStartHook failed")
	inst.State = cri.StateRunning
	w.acted[inst.ID] = true
	w.pending[inst.ID] = Entry{Time: r.clock.Now(), Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: c.Name, ContainerID: inst.ID, Cause: string(CausePostStart)}
	if _, err := r.killContainer(ctx, p, c, inst, "FailedPostStartHook", CausePostStart, nil); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to kill container", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID)
	}
	return false
}

// finishInterrupted deals with a replacement created by a restart that was
// interrupted (the agent killed) before its start. The replacement is
// started only when no instance of the container runs. If one does, the
// replacement is removed and the running instance is probed afresh, never
// started beside it.
func (r *Restarter) finishInterrupted(ctx context.Context, w *podWorker, p *pods.Pod, c *pods.Container, list []*cri.Container) time.Duration {
	created := list[0]
	for _, other := range list[1:] {
		if other.State != cri.StateRunning {
			continue
		}
		if err := r.runtime.RemoveContainer(ctx, created.ID); err != nil {
			r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot remove container %s left by an interrupted restart: %v", c.Name, err)
			return failedActionBackoff
		}
		r.eventf(p, c.Name, events.Normal, ReasonAbandoned,
			"Removed container %s (attempt %d) left by an interrupted restart: the instance it was to replace is still running and will be probed again", c.Name, created.Attempt)
		return 0
	}
	inst := pods.InstanceOf(created)
	r.starting.SetStarting(inst, true)
	defer r.starting.SetStarting(inst, false)
	cause := Cause(created.Annotations[cri.AnnotationRestartCause])
	// The agent that decided this restart is gone, and the failures it saw
	// with it; the cause and the old instance's exit are on record.
	if !r.run(ctx, w, p, c, created, cause) {
		return failedActionBackoff
	}
	for _, old := range list[1:] {
		if old.ID == created.Annotations[cri.AnnotationRestartOf] {
			e := r.entry(ctx, p, old, cause)
			e.Action, e.ReplacementID, e.Attempt = ActionRestarted, created.ID, created.Attempt
			r.record(ctx, e)
		}
	}
	r.removeOlderExited(ctx, c, list, nil)
	return 0
}

// removeOlderExited removes exited instances but the newest (kubelet keeps
// one dead container per container name, for its logs).
func (r *Restarter) removeOlderExited(ctx context.Context, c *pods.Container, list []*cri.Container, keep *cri.Container) {
	for _, old := range list {
		if old.State != cri.StateExited {
			continue
		}
		if keep == nil {
			keep = old
			continue
		}
		if old.ID == keep.ID {
			continue
		}
		if err := r.runtime.RemoveContainer(ctx, old.ID); err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot remove an old instance", "containerName", c.Name, "containerID", old.ID, "err", err)
		}
	}
}

// finishedAt is when an instance exited: as the view knows it (the poller
// reads each exit's status), else asked of the runtime (a listing does not
// say).
func (r *Restarter) finishedAt(ctx context.Context, c *pods.Container, inst *cri.Container) (time.Time, error) {
	for _, i := range c.Instances {
		if i.ID == inst.ID && !i.FinishedAt.IsZero() {
			return i.FinishedAt, nil
		}
	}
	st, err := r.runtime.ContainerStatus(ctx, inst.ID, false)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, st.GetStatus().GetFinishedAt()), nil
}

// sandboxConfig returns a sandbox's CRI config, read once per sandbox.
func (r *Restarter) sandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error) {
	if cached, ok := r.configs.Load(id); ok {
		return cached.(*runtimeapi.PodSandboxConfig), nil
	}
	cfg, err := r.runtime.SandboxConfig(ctx, id)
	if err != nil {
		return nil, err
	}
	r.configs.Store(id, cfg)
	return cfg, nil
}

var logAttempt = regexp.MustCompile(`^(.*?)(\d+)\.log$`)

// nextLogPath gives a new attempt its own log file, as kubelet names them
// (<name>/<attempt>.log); another path gets the attempt appended.
func nextLogPath(path string, attempt uint32) string {
	if path == "" {
		return ""
	}
	if m := logAttempt.FindStringSubmatch(path); m != nil {
		return m[1] + strconv.FormatUint(uint64(attempt), 10) + ".log"
	}
	return path + "." + strconv.FormatUint(uint64(attempt), 10)
}

// entry starts a ledger entry about an instance that is to be, or was,
// replaced, with its exit as the runtime records it.
func (r *Restarter) entry(ctx context.Context, p *pods.Pod, old *cri.Container, cause Cause) Entry {
	e := Entry{Time: r.clock.Now(), Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: old.Name, ContainerID: old.ID, Cause: string(cause)}
	if r.ledger == nil {
		return e
	}
	if st, err := r.runtime.ContainerStatus(ctx, old.ID, false); err == nil {
		e.ExitCode, e.ExitReason = st.GetStatus().GetExitCode(), st.GetStatus().GetReason()
	}
	return e
}

func (r *Restarter) record(ctx context.Context, e Entry) {
	if r.ledger == nil {
		return
	}
	if err := r.ledger.Add(e); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot record a restart", "pod", klog.KRef(e.Namespace, e.Pod), "container", e.Container)
	}
}
