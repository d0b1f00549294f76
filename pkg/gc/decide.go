// Package gc is the node's garbage collection of what the agent's pods
// leave behind, as kubelet's: its pod container deletor (at a container's
// exit, its older exited instances), its container garbage collection
// (kuberuntime_gc.go: at start and every minute, the dead instances of
// each container beyond the newest, the dead sandboxes without containers
// beyond the newest of each pod, all of them for a pod that is gone or
// evicted, and under disk pressure for any terminated pod) and the teardown
// of a terminated pod's volumes and pod cgroup (kubelet's volume manager
// and SyncTerminatedPod, for a pod that finished whose manifest stays).
//
// What to collect is decided by pure functions over one pods.View's pods
// and a time (Deletions, Decide, Terminated); GC's Run loop carries it out through
// CRI, the log files (ContainerLogs) and the host side (Terminator). It
// acts only on what the agent made: every instance and sandbox of a
// static pod, and the replacements the agent created for a pod someone
// else made, and every instance of a container the agent has restarted
// (pods.Pod.Collectable); never on what another client made and keeps.
//
// It imports pkg/pods and pkg/cri; pkg/agent wires it beside pod sync
// (pkg/restart), which it never imports.
package gc

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Policy is kubelet's container GC policy (kubecontainer.GCPolicy), from
// its flags of the same names. The zero Policy is not kubelet's default
// (it keeps nothing): DefaultPolicy is.
type Policy struct {
	// MinAge is how old a dead instance must be to be collected
	// (--minimum-container-ttl-duration, 0).
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container are
	// kept (--maximum-dead-containers-per-container, 1; negative: no
	// limit).
	MaxPerPodContainer int
	// MaxContainers is how many dead instances are kept on the node
	// (--maximum-dead-containers, -1: no limit).
	MaxContainers int
}

// DefaultPolicy is kubelet's: MinAge 0, one dead instance kept per
// container, no node-wide cap.
var DefaultPolicy = Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// Removal is one dead instance to remove.
type Removal struct {
	Pod      *pods.Pod
	Instance *cri.Container
}

// SandboxRemoval is one dead sandbox to remove (stopped first, as kubelet
// makes sure).
type SandboxRemoval struct {
	Pod     *pods.Pod
	Sandbox *cri.Sandbox
}

// Decision is what one collection removes, in the order it is done.
type Decision struct {
	Containers []Removal
	Sandboxes  []SandboxRemoval
	// PodLogs are the pods whose pod log directory goes (kubelet's
	// evictPodLogsDirectories): the evicted ones; an orphan's goes with
	// its teardown by pod sync.
	PodLogs []*pods.Pod
}

// Mode is which pods lose every dead instance and sandbox: kubelet's
// GarbageCollect argument evictNonDeletedPods.
type Mode int

const (
	// Periodic is the minute's collection (evictNonDeletedPods false):
	// only the pods whose content may be removed (an orphan, an evicted
	// pod) lose them all.
	Periodic Mode = iota
	// AllUnused is DeleteAllUnusedContainers, what disk pressure asks for
	// (evictNonDeletedPods true): every terminated pod whose runtime may be
	// removed (runtimeRemovable) loses them all too.
	AllUnused
)

// contentRemovable is kubelet's ShouldPodContentBeRemoved: the pod was
// evicted, or deleted (an orphan: its manifest removed).
func contentRemovable(p *pods.Pod) bool { return p.Orphaned || p.Evicted }

// runtimeRemovable is kubelet's ShouldPodRuntimeBeRemoved: the pod
// terminated (an orphan, or a pod that finished with nothing of it
// running). kubelet's pod worker remembers that a pod terminated; the
// agent knows a static pod that keeps its manifest terminated only from
// its dead instances (pods.Pod.Phase), and removing them all would make
// it Pending and make it again: such a pod keeps what the periodic
// collection keeps. A pod others made stays terminated without them (no
// ready sandbox), and an evicted pod stays Failed (pods.Inputs.Evicted).
func runtimeRemovable(p *pods.Pod) bool {
	return p.Orphaned || p.Evicted || !p.Static && finished(p)
}

// finished says the pod is Succeeded or Failed and nothing of it runs.
func finished(p *pods.Pod) bool {
	return (p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed) && p.Stopped()
}

// removeAll says the collection removes every dead instance and sandbox
// of the pod (kubelet's evictContainers and evictSandboxes condition).
func removeAll(p *pods.Pod, mode Mode) bool {
	return contentRemovable(p) || mode == AllUnused && runtimeRemovable(p)
}

// unit is kubelet's evictUnit: the evictable instances of one container of
// one pod, newest first.
type unit struct {
	pod       *pods.Pod
	container *pods.Container
	instances []*cri.Container
}

// Decide is kubelet's containerGC.GarbageCollect over the pods of one
// view at now, in the given mode (Periodic: the minute's run; AllUnused:
// under disk pressure): evictable instances are those not running and
// created at least MinAge before now; a pod whose content may be removed
// (an orphan: its manifest removed; an evicted pod), and in AllUnused
// mode any terminated pod, loses every one, and every dead sandbox, and
// an evicted pod its pod log directory; any other keeps the
// newest MaxPerPodContainer of each container, then the node keeps at
// most MaxContainers (each container its share, at least one, then the
// oldest first), and each pod keeps its newest sandbox. A sandbox is dead
// when it is not ready and no container of the view is in it. Instances
// and sandboxes the agent did not make are counted as kubelet counts them
// but never removed. It is pure.
func Decide(all []*pods.Pod, now time.Time, policy Policy, mode Mode) Decision {
	var d Decision
	newest := now.Add(-policy.MinAge)
	var units []unit
	for _, p := range all {
		for _, c := range p.Containers {
			u := unit{pod: p, container: c}
			for _, i := range c.Instances {
				if i.State != cri.StateRunning && !i.CreatedAt.After(newest) {
					u.instances = append(u.instances, i)
				}
			}
			if len(u.instances) == 0 {
				continue
			}
			slices.SortStableFunc(u.instances, newestFirst)
			if removeAll(p, mode) {
				d.remove(u, 0) // the pod is gone, evicted or terminated: all of them
				continue
			}
			units = append(units, u)
		}
	}
	if policy.MaxPerPodContainer >= 0 {
		for i := range units {
			units[i] = d.remove(units[i], policy.MaxPerPodContainer)
		}
	}
	if n := count(units); policy.MaxContainers >= 0 && n > policy.MaxContainers {
		perUnit := max(policy.MaxContainers/len(units), 1)
		for i := range units {
			units[i] = d.remove(units[i], perUnit)
		}
		if n = count(units); n > policy.MaxContainers {
			var flat []*cri.Container
			for _, u := range units {
				flat = append(flat, u.instances...)
			}
			slices.SortStableFunc(flat, newestFirst)
			d.removeFlat(all, flat[policy.MaxContainers:])
		}
	}
	removed := map[string]bool{}
	for _, r := range d.Containers {
		removed[r.Instance.ID] = true
	}
	d.Sandboxes = deadSandboxes(all, removed, mode)
	for _, p := range all {
		if p.Static && p.Evicted && !p.Orphaned {
			d.PodLogs = append(d.PodLogs, p)
		}
	}
	return d
}

// remove removes the instances of u past the newest keep (kubelet's
// removeOldestN, oldest first) and returns what is left, as kubelet
// assumes them removed.
func (d *Decision) remove(u unit, keep int) unit {
	if len(u.instances) <= keep {
		return u
	}
	for _, i := range slices.Backward(u.instances[keep:]) {
		if u.pod.Collectable(u.container, i) {
			d.Containers = append(d.Containers, Removal{Pod: u.pod, Instance: i})
		}
	}
	u.instances = u.instances[:keep]
	return u
}

// removeFlat removes the given instances (newest first), oldest first,
// each with its pod.
func (d *Decision) removeFlat(all []*pods.Pod, instances []*cri.Container) {
	type owner struct {
		pod       *pods.Pod
		container *pods.Container
	}
	ownerOf := map[string]owner{}
	for _, p := range all {
		for _, c := range p.Containers {
			for _, i := range c.Instances {
				ownerOf[i.ID] = owner{p, c}
			}
		}
	}
	for _, i := range slices.Backward(instances) {
		if o := ownerOf[i.ID]; o.pod.Collectable(o.container, i) {
			d.Containers = append(d.Containers, Removal{Pod: o.pod, Instance: i})
		}
	}
}

func count(units []unit) int {
	n := 0
	for _, u := range units {
		n += len(u.instances)
	}
	return n
}

// deadSandboxes is kubelet's evictSandboxes: of each pod's sandboxes,
// those not ready and with no container in them, oldest first; the newest
// sandbox of a pod is kept unless the pod loses them all (removeAll). The containers removed
// before (removed) are not counted, as kubelet lists the containers again
// after removing them. Only the agent's are removed: a static pod's (the
// view gives a static pod only the sandboxes the agent made).
func deadSandboxes(all []*pods.Pod, removed map[string]bool, mode Mode) []SandboxRemoval {
	used := map[string]bool{}
	for _, p := range all {
		for _, c := range p.Containers {
			for _, i := range c.Instances {
				if !removed[i.ID] {
					used[i.SandboxID] = true
				}
			}
		}
	}
	var out []SandboxRemoval
	for _, p := range all {
		if !p.Static || len(p.Sandboxes) == 0 {
			continue
		}
		sbs := slices.SortedStableFunc(slices.Values(p.Sandboxes), func(a, b *cri.Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
		keep := 1
		if removeAll(p, mode) {
			keep = 0
		}
		for _, sb := range slices.Backward(sbs[min(keep, len(sbs)):]) {
			if sb.State != cri.SandboxReady && !used[sb.ID] {
				out = append(out, SandboxRemoval{Pod: p, Sandbox: sb})
			}
		}
	}
	return out
}

// newestFirst orders instances by creation, newest first (kubelet's
// byCreated), then by ID so that the order is total.
func newestFirst(a, b *cri.Container) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// minDeadContainerInPod is kubelet's: its pod container deletor keeps at
// least one dead instance of a container, whatever the policy.
const minDeadContainerInPod = 1

// Deletions is kubelet's pod container deletor (pod_container_deletor.go,
// run by cleanUpContainersInPod at each ContainerDied event of its PLEG):
// once an instance of a container has exited, the exited instances of
// that container beyond the newest keep (max(MaxPerPodContainer, 1)) are
// removed at once, with their log files, without waiting for the
// minute's collection. Each exit is one more exited instance, so over a
// view this is every container with more than keep of them. An evicted
// pod (its content may be removed) loses every exited instance of every
// container (kubelet's removeAll). Only the agent's instances are
// removed; an orphan is torn down by pod sync. It is pure.
func Deletions(all []*pods.Pod, policy Policy) []Removal {
	keep := max(policy.MaxPerPodContainer, minDeadContainerInPod)
	var out []Removal
	for _, p := range all {
		if p.Orphaned {
			continue
		}
		keep := keep
		if p.Evicted {
			keep = 0
		}
		for _, c := range p.Containers {
			var exited []*cri.Container
			for _, i := range c.Instances {
				if i.State == cri.StateExited {
					exited = append(exited, i)
				}
			}
			if len(exited) <= keep {
				continue
			}
			slices.SortStableFunc(exited, newestFirst)
			for _, i := range exited[keep:] {
				if p.Collectable(c, i) {
					out = append(out, Removal{Pod: p, Instance: i})
				}
			}
		}
	}
	return out
}

// Terminated are the static pods whose volumes and pod cgroup are to be
// torn down now (kubelet's volume manager once the pod's runtime may be
// removed, and SyncTerminatedPod): pods that finished (Succeeded or
// Failed) with their manifest still there, nothing of them running, and
// not done already (done, by UID). An orphan is torn down whole by pod
// sync instead. It is pure.
func Terminated(all []*pods.Pod, done map[string]bool) []*pods.Pod {
	var out []*pods.Pod
	for _, p := range all {
		if p.Static && !p.Orphaned && !done[p.UID] && finished(p) {
			out = append(out, p)
		}
	}
	return out
}
