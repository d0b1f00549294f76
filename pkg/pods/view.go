// Package pods joins each relist of the runtime with the specs (Pod
// manifests and CRI annotations) and publishes one immutable View per
// relist: every pod with its current sandbox, each container's current
// instance and older ones, its spec, its role and its policies, resolved
// under one set of rules from the runtime and the specs alone. Pod sync
// (pkg/restart) reads the View and publishes the pods' Status, kubelet's
// status manager's: the View, with a pod a sync acts on held as the sync
// found it, and what the syncs know that the runtime does not say
// (PodStatus: waiting reasons, resets, initialized). The prober's workers,
// the state API, the CLI and the hooks read that Status; what kubelet's
// status says of a pod is made from it and the probes' results in one
// place (ReportPod), where the results meet the view. So no two readers
// can disagree about which instance is current, what a pod's policy is or
// whether it is ready.
package pods

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// View is the agent's picture of the runtime after one relist. It is
// immutable: its slices and the values they point to must not be modified.
type View struct {
	// Time is when the relist the view comes from started, and Seq its
	// number (cri.Snapshot.Seq).
	Time   time.Time
	Seq    uint64
	pods   []*Pod
	byKey  map[string]*Pod
	byName map[nsName]*Pod
	// ManifestErrors are the problems of the manifests (whether or not a
	// running pod matches them), and ManifestWarnings what the manifests'
	// pods do that their authors may not expect (spec.Pod.Warnings: a
	// credential sent to any sandbox of the pod's name); Warnings are
	// resolution notes (a manifest winning over a container's annotations).
	ManifestErrors   []*spec.Error
	ManifestWarnings []*spec.Error
	Warnings         []string
}

type nsName struct{ namespace, name string }

// index fills byKey and byName from pods (ordered by namespace, name and
// key). When two pods share a name (a pod re-created with a new UID while
// its old sandbox lingers), the name stands for the one whose current
// sandbox is ready, else the newest; a pod kept apart loses to any other
// (a sandbox someone else made with the UID and name of a pod the agent
// makes never stands for that pod).
func (v *View) index() {
	v.byKey = make(map[string]*Pod, len(v.pods))
	v.byName = make(map[nsName]*Pod, len(v.pods))
	for _, p := range v.pods {
		v.byKey[p.Key] = p
		name := nsName{p.Namespace, p.Name}
		if other, ok := v.byName[name]; !ok || currentPodFirst(p, other) < 0 {
			v.byName[name] = p
		}
	}
}

// currentPodFirst orders two pods of one name: a pod kept apart last, then
// by their current sandboxes (currentSandboxFirst); a pod with no sandbox
// yet comes after those with one.
func currentPodFirst(a, b *Pod) int {
	switch {
	case a.KeptApart() != b.KeptApart():
		if a.KeptApart() {
			return 1
		}
		return -1
	case a.Sandbox == nil && b.Sandbox == nil:
		return 0
	case a.Sandbox == nil:
		return 1
	case b.Sandbox == nil:
		return -1
	}
	return currentSandboxFirst(a.Sandbox, b.Sandbox)
}

// at returns the same view as of another listing of the runtime, which
// found nothing new.
func (v *View) at(t time.Time, seq uint64) *View {
	out := *v
	out.Time, out.Seq = t, seq
	return &out
}

// with returns a view like v in which the pods of the given keys are
// replaced by the given ones (a key v does not have is ignored): the pods'
// status shows a pod held by a sync this way (NewStatus).
func (v *View) with(replaced map[string]*Pod) *View {
	if len(replaced) == 0 {
		return v
	}
	out := *v
	out.pods = make([]*Pod, len(v.pods))
	for i, p := range v.pods {
		if r, ok := replaced[p.Key]; ok {
			p = r
		}
		out.pods[i] = p
	}
	out.index()
	return &out
}

// Pods returns every pod, ordered by namespace, name and key.
func (v *View) Pods() []*Pod {
	if v == nil {
		return nil
	}
	return v.pods
}

// Pod returns the pod with the given key (Pod.Key).
func (v *View) Pod(key string) (*Pod, bool) {
	if v == nil {
		return nil, false
	}
	p, ok := v.byKey[key]
	return p, ok
}

// ByName returns the pod a namespace and name stand for. When a pod was
// re-created with a new UID while its old sandbox lingers, two pods share
// the name: the one with a ready sandbox wins, then the one whose current
// sandbox is newest; a pod kept apart (KeptApart) loses to any other. The
// state API, the CLI, the hooks and /ready all ask this, so they all mean
// the same pod.
func (v *View) ByName(namespace, name string) (*Pod, bool) {
	if v == nil {
		return nil, false
	}
	p, ok := v.byName[nsName{namespace, name}]
	return p, ok
}

// Pod is one pod: a UID and a namespace/name, or a sandbox created
// without a UID.
type Pod struct {
	// Key identifies the pod across its sandboxes: its UID (cri.Sandbox.Key),
	// or the OwnKey ("sandbox:<id>") of a sandbox created without one, or
	// of the oldest sandbox of a pod kept apart because another pod holds
	// its UID (KeptApart).
	Key       string
	Namespace string
	Name      string
	UID       string
	// Static says the pod is a static pod: the agent makes it from a
	// static pod manifest (--static-pod-path, or play's files), as kubelet
	// makes static pods, and keeps a pod record of it on disk; its sandbox
	// and every container are created from the spec (Manifest.Object).
	// Otherwise someone else made the pod and the agent only acts on what
	// the runtime has.
	Static bool
	// Orphaned is a static pod whose manifest is gone (or changed, which
	// makes it another pod), known by its pod record alone (kubelet's
	// orphaned pod): it is to be stopped and removed.
	Orphaned bool
	// Sandbox is the current sandbox: a ready one if any, else the newest;
	// nil for a static pod whose sandbox is not made yet.
	Sandbox *cri.Sandbox
	// Sandboxes are all of the pod's sandboxes, the current one first,
	// then newest first.
	Sandboxes []*cri.Sandbox
	// Source is the manifest (file:line) or "annotations" the pod's specs
	// come from; "" when nothing covers it.
	Source string
	// Manifest is the manifest that applies to the pod (nil: none).
	Manifest *spec.Pod
	// Policy is the pod's restart policy, grace period and probe network
	// (defaulted: Always, 30 s).
	Policy spec.PodPolicy
	// Problems are pod-level configuration errors. With an invalid
	// manifest (ManifestInvalid) nothing of the pod is probed or restarted
	// and no container is ready: what was asked to be checked is not.
	Problems        []*spec.Error
	ManifestInvalid bool
	// Conflicts say that sandboxes of another namespace/name, or not made
	// by the agent for a pod it makes, have this pod's UID: one of the two
	// pods is kept apart (KeptApart). Nothing else changes for either.
	Conflicts []*spec.Error
	// Containers are in kubelet's order: the spec's init containers, then
	// its regular containers, then containers the runtime has that no
	// spec lists, by name.
	Containers []*Container
	// Phase is kubelet's pod phase from the runtime and the specs alone,
	// every running sidecar taken as started: the report (ReportPod)
	// computes the phase with the startup probes' results, which move it
	// only between Pending and Running, never in or out of Succeeded and
	// Failed (phase). What reads it here, the prober's workers and pod
	// sync, reads only whether it is terminal.
	Phase corev1.PodPhase
	// Reason and Message say why a pod failed as a whole, as kubelet's
	// status does: DeadlineExceeded ("Pod was active on the node longer
	// than the specified deadline").
	Reason, Message string
	// Evicted says the agent's eviction manager evicted the pod
	// (Inputs.Evicted): kubelet's pod worker marks it so, and a pod
	// evicted may lose its content at once (ShouldPodContentBeRemoved):
	// every dead instance and sandbox, and its pod log directory.
	Evicted bool
	// StartTime is when the pod started on the node (kubelet's
	// status.startTime): its first sandbox's creation. Zero before.
	StartTime time.Time
	// Terminating is set while the pod is being torn down (no sandbox
	// ready, some container still running): kubelet's deletion timestamp.
	Terminating bool
	// ProbeHost is the address network probes go to (the pod IP, or the
	// node's address for a host-network pod; 127.0.0.1 with InPodNetwork)
	// and InPodNetwork says they are dialled from inside the pod's network
	// namespace (Sandbox.NetNS).
	ProbeHost    string
	InPodNetwork bool
	// PodIP is kubelet's status.podIP: of the sandbox's addresses, the
	// first of the node's IP family, else the first of the other (PodIP).
	PodIP string
}

// KeptApart reports whether another pod holds the pod's UID: its
// sandboxes reuse that UID (Conflicts), and it is keyed by its own.
func (p *Pod) KeptApart() bool { return len(p.Conflicts) > 0 && p.Key != p.UID }

// Stopped reports whether nothing of the pod runs: no sandbox ready and
// no instance running or in an unknown state (which could be running).
func (p *Pod) Stopped() bool {
	if slices.ContainsFunc(p.Sandboxes, func(sb *cri.Sandbox) bool { return sb.State == cri.SandboxReady }) {
		return false
	}
	return !slices.ContainsFunc(p.Containers, func(c *Container) bool {
		return slices.ContainsFunc(c.Instances, func(i *cri.Container) bool { return i.State == cri.StateRunning || i.State == cri.StateUnknown })
	})
}

// SandboxReady reports whether the pod's current sandbox is ready.
func (p *Pod) SandboxReady() bool { return p.Sandbox != nil && p.Sandbox.State == cri.SandboxReady }

// IP is the pod's primary IP, kubelet's status.podIP ("" for a
// host-network pod).
func (p *Pod) IP() string { return p.PodIP }

// Container returns the container with the given name.
func (p *Pod) Container(name string) (*Container, bool) {
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// Managed reports whether the agent may stop and restart some container of
// the pod.
func (p *Pod) Managed() bool {
	for _, c := range p.Containers {
		if c.Managed {
			return true
		}
	}
	return false
}

// Probed reports whether some container of the pod is probed.
func (p *Pod) Probed() bool {
	for _, c := range p.Containers {
		if c.Probed() {
			return true
		}
	}
	return false
}

// Container is one container of a pod, by name, across its instances.
type Container struct {
	Name string
	// Kind is its role: regular, init container or sidecar.
	Kind spec.Kind
	// Spec is what the manifest or the container's annotations say (nil:
	// nothing covers it; it is only observed).
	Spec *spec.Container
	// Managed: the agent may stop and restart it (a manifest lists it, it
	// has probe annotations, or its sandbox has a restart-policy
	// annotation). Others are never touched.
	Managed bool
	// Problems make its spec invalid: it is not probed and never ready.
	Problems []*spec.Error
	// Current is the newest instance (kubelet's order); nil before any
	// instance exists.
	Current *cri.Container
	// Instances are all of its instances, newest first.
	Instances []*cri.Container
}

// Probed reports whether the container is probed.
func (c *Container) Probed() bool {
	return c.Spec != nil && c.Spec.HasProbes() && len(c.Problems) == 0
}

// Probe returns the container's probe of type t, or nil when it is not
// probed that way.
func (c *Container) Probe(t results.ProbeType) *corev1.Probe {
	if !c.Probed() {
		return nil
	}
	return c.Spec.Probe(t)
}

// Running reports whether the current instance runs.
func (c *Container) Running() bool {
	return c.Current != nil && c.Current.State == cri.StateRunning
}

// MadeByAgent reports whether the agent made instance i of the pod, and so
// may remove it once it is no longer needed: every instance of a static
// pod (the agent makes all of them), and of a pod someone else made only
// the replacements the agent created when it restarted a container
// (cri.AnnotationRestartOf). What another client made is never removed.
func (p *Pod) MadeByAgent(i *cri.Container) bool {
	return p.Static || i.Annotations[cri.AnnotationRestartOf] != ""
}

// Collectable reports whether instance i of container c may be removed
// once no longer needed (the dead instances pod sync prunes, the pod
// container deletor and the garbage collection remove): what the agent
// made, and every instance of a container the agent has restarted (one
// of its instances is the agent's replacement): from its first restart
// that container's instances are the agent's to keep, as a kubelet's are.
// A container the agent never restarted keeps its creator's.
func (p *Pod) Collectable(c *Container, i *cri.Container) bool {
	return p.MadeByAgent(i) || slices.ContainsFunc(c.Instances, func(o *cri.Container) bool { return o.Annotations[cri.AnnotationRestartOf] != "" })
}
