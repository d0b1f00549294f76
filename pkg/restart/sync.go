package restart

import (
	"context"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// syncPod decides for the pod (computePodActions) and carries the actions
// out as kubelet's SyncPod does: the whole pod killed, or the containers to
// kill killed one by one (each stop waits for the exit), then the init
// containers and the containers to start started, in spec order. It
// returns when to look again (0: at the next change).
func (r *Restarter) syncPod(ctx context.Context, w *podWorker) time.Duration {
	p, ok := r.view.Load().Pod(w.key)
	if !ok || !p.Managed() || p.ManifestInvalid {
		return 0
	}
	w.prune(p)
	if !p.SandboxReady() {
		return 0 // nothing is started into a stopped pod (kubelet would make a new sandbox)
	}
	a := computePodActions(p, r.results)
	if r.mode == Observe {
		r.tellWhatWouldBeDone(w, p, a)
		return 0
	}
	if a.killPod {
		// Once: the view may still show the pod running while it stops.
		if w.acted[p.Sandbox.ID] {
			return 0
		}
		w.acted[p.Sandbox.ID] = true
		if !r.killPod(ctx, p) {
			delete(w.acted, p.Sandbox.ID)
			return failedActionBackoff
		}
		return 0
	}
	if len(a.kill) == 0 && len(a.startInit) == 0 && len(a.start) == 0 {
		return 0
	}
	// Decisions were taken on the view; the runtime may have moved on
	// since (someone else's crictl, an exit): every action is re-checked
	// against a fresh listing first.
	fresh, err := r.listInstances(ctx, p)
	if err != nil {
		r.eventf(p, "", events.Warning, ReasonFailed, "Cannot re-check pod %s/%s before acting on it: %v", p.Namespace, p.Name, err)
		return failedActionBackoff
	}
	for _, k := range a.kill {
		if w.acted[k.instance.ID] || !fresh.newestIs(k.container.Name, k.instance.ID, cri.StateRunning, cri.StateUnknown) {
			continue // one failure, one action; or it already changed
		}
		if err := r.killForCause(ctx, w, p, k); err != nil {
			r.eventf(p, k.container.Name, events.Warning, ReasonFailed, "Stopping container %s failed: %v", k.container.Name, err)
			return failedActionBackoff
		}
		fresh.killed(k.instance.ID)
	}
	if r.mode == StopOnly {
		return 0
	}
	var retry time.Duration
	later := func(d time.Duration) {
		if d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}
	// Regular containers are to start only once the pod has initialized,
	// so an init container that cannot start yet holds nothing up here.
	for _, c := range append(a.startInit, a.start...) {
		later(r.startContainer(ctx, w, p, c, fresh))
	}
	return retry
}

// prune drops what the worker keeps about instances the view no longer
// has.
func (w *podWorker) prune(p *pods.Pod) {
	live := map[string]bool{}
	for _, sb := range p.Sandboxes {
		live[sb.ID] = true
	}
	for _, c := range p.Containers {
		for _, i := range c.Instances {
			live[i.ID] = true
		}
	}
	for _, m := range []map[string]bool{w.acted, w.reported} {
		for id := range m {
			if !live[id] {
				delete(m, id)
			}
		}
	}
	for id := range w.pending {
		if !live[id] {
			delete(w.pending, id)
		}
	}
}

// tellWhatWouldBeDone is --restart=none: each kill is told once, nothing
// is done.
func (r *Restarter) tellWhatWouldBeDone(w *podWorker, p *pods.Pod, a podActions) {
	for _, k := range a.kill {
		if w.acted[k.instance.ID] {
			continue
		}
		w.acted[k.instance.ID] = true
		r.eventf(p, k.container.Name, events.Normal, ReasonWouldKill, "%s (--restart=none: nothing done)", k.message)
	}
	if a.killPod && !w.acted[p.Sandbox.ID] {
		w.acted[p.Sandbox.ID] = true
		r.eventf(p, "", events.Normal, ReasonWouldKill, "No container of pod %s/%s is left running or to be restarted: the pod would be stopped (--restart=none: nothing done)", p.Namespace, p.Name)
	}
}

// listing is a fresh listing of a pod's containers, by name, newest first,
// and the instances the current pass killed.
type listing struct {
	byName    map[string][]*cri.Container
	killedNow map[string]bool
}

// listInstances lists the pod's containers from the runtime, in every
// sandbox of the pod.
func (r *Restarter) listInstances(ctx context.Context, p *pods.Pod) (*listing, error) {
	out := &listing{byName: map[string][]*cri.Container{}, killedNow: map[string]bool{}}
	for _, sb := range p.Sandboxes {
		list, err := r.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb.ID})
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			name := c.GetMetadata().GetName()
			out.byName[name] = append(out.byName[name], cri.ContainerFromList(c))
		}
	}
	for name := range out.byName {
		slices.SortFunc(out.byName[name], pods.NewestFirst)
	}
	return out, nil
}

// newestIs reports whether the newest instance of name is id in one of the
// states.
func (l *listing) newestIs(name, id string, states ...cri.ContainerState) bool {
	list := l.byName[name]
	return len(list) > 0 && list[0].ID == id && slices.Contains(states, list[0].State)
}

// killed records that this pass stopped an instance.
func (l *listing) killed(id string) {
	l.killedNow[id] = true
	for name, list := range l.byName {
		for i, c := range list {
			if c.ID == id {
				cp := *c
				cp.State = cri.StateExited
				l.byName[name][i] = &cp
			}
		}
	}
}

// lastExit returns the instance of name whose exit the back-off is
// measured from: the newest that has exited, as kubelet's doBackOff reads
// it from the status the pass began with — so not one this very pass
// killed (the first kills restart at once, as on kubelet).
func (l *listing) lastExit(name string) *cri.Container {
	for _, c := range l.byName[name] {
		if c.State == cri.StateExited && !l.killedNow[c.ID] {
			return c
		}
	}
	return nil
}

// maxAttempt is the highest attempt among the instances of name in sandbox
// (attempts name containers: the next one must be new).
func (l *listing) maxAttempt(name, sandbox string) uint32 {
	var n uint32
	for _, c := range l.byName[name] {
		if c.SandboxID == sandbox {
			n = max(n, c.Attempt)
		}
	}
	return n
}
