package pods

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The conditions kubelet 1.36 gives a pod of its node with no API server
// to add others (generateAPIPodStatus, pkg/kubelet/kubelet_pods.go), in
// its order, with pkg/kubelet/status/generate.go's reasons and messages.

// Kubelet's condition reasons (pkg/kubelet/status/generate.go).
const (
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	ReasonRestartAllStarted        = "RestartAllContainersStarted"
)

// Condition is a v1.PodCondition.
//
// LastTransitionTime is the agent's view of when the condition became so,
// kept simple and stateless (the agent keeps no previous status, as
// kubelet's status manager does): the time of the newest runtime change
// the condition rests on, as the View holds it — PodScheduled, the pod's
// start; PodReadyToStartContainers, its current sandbox's creation;
// Initialized, the newest exit of a completed init container (else the
// pod's start), or when not initialized the current sandbox's creation;
// ContainersReady and Ready, the newest start (ready) or change (not
// ready: start or exit) of the containers they name. A probe's result
// carries no time in the View: a readiness probe that passed after its
// container started shows the start. Zero when the View has none.
type Condition struct {
	Type               corev1.PodConditionType
	Status             corev1.ConditionStatus
	Reason, Message    string
	LastTransitionTime time.Time
}

// containerFacts are what the conditions read of one container: its
// status and kubelet's Ready and Started flags.
type containerFacts struct {
	c              *Container
	status         apiStatus
	ready, started bool
}

// conditions is generateAPIPodStatus's conditions for pod p in phase:
// first the conditions kubelet does not own that the pod's status has
// (gates: those set with `cri-prober gate set`, as a controller sets them
// through the API server; GateStore), then "set all Kubelet-owned
// conditions". facts are its containers', in p.Containers' order;
// wasInitialized: the pod sync saw the pod initialized before
// (PodStatus.Initialized). As in
// kubelet, Ready finds a readiness gate's condition among those before
// it: the gates, PodReadyToStartContainers and Initialized.
func conditions(p *Pod, phase corev1.PodPhase, facts []containerFacts, gates []Condition, wasInitialized bool) []Condition {
	start := p.StartTime
	toStart := readyToStartContainers(p)
	initialized := initializedCondition(p, phase, facts, start, wasInitialized)
	containersReady := containersReadyCondition(p, phase, facts, start)
	before := append(slices.Clip(gates), toStart, initialized)
	ready := readyCondition(p, containersReady, before, start)
	scheduled := Condition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start}
	out := append(slices.Clip(gates), toStart, initialized, ready, containersReady, scheduled)
	if couldRestartAll(p) {
		out = append(out, allContainersRestarting(p, phase, start))
	}
	return out
}

// couldRestartAll is podutil's AllContainersCouldRestart: some container
// of the spec has a RestartAllContainers rule.
func couldRestartAll(p *Pod) bool {
	for _, c := range p.Containers {
		if inSpec(p, c) && c.Spec.CanRestartAll() {
			return true
		}
	}
	return false
}

// allContainersRestarting is GenerateAllContainersRestartingCondition:
// true from the exit that restarts every container until the pod sync has
// removed them all; false otherwise, with the terminal phase's reason.
func allContainersRestarting(p *Pod, phase corev1.PodPhase, start time.Time) Condition {
	c := Condition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse, LastTransitionTime: start}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = ReasonPodCompleted
	case phase == corev1.PodFailed:
		c.Reason = ReasonPodFailed
	default:
		if exit := restartAllExit(p); exit != nil {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, ReasonRestartAllStarted, "container exited with restart policy rule"
			c.LastTransitionTime = exit.FinishedAt
		}
	}
	return c
}

// readyToStartContainers is GeneratePodReadyToStartContainersCondition:
// true when kubelet would not make a new sandbox (kuberuntime's
// PodSandboxChanged): the newest sandbox is the one ready one, in the
// network namespace the spec asks for, with an IP unless on the node's
// network.
func readyToStartContainers(p *Pod) Condition {
	c := Condition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}
	if changed, _ := SandboxChanged(p); !changed {
		c.Status, c.LastTransitionTime = corev1.ConditionTrue, newestSandbox(p).CreatedAt
	}
	return c
}

// SandboxChanged is kuberuntime's PodSandboxChanged: the pod needs a new
// sandbox when it has none, when more than one is ready, when the newest
// is not ready, when the newest is not on the network the spec asks for,
// or when one that is not on the host's network has no IP. attempt is the
// new sandbox's (the newest one's plus one; 0 for the first).
func SandboxChanged(p *Pod) (changed bool, attempt uint32) {
	newest := newestSandbox(p)
	if newest == nil {
		return true, 0
	}
	ready := 0
	for _, sb := range p.Sandboxes {
		if sb.State == cri.SandboxReady {
			ready++
		}
	}
	hostNetwork := newest.HostNetwork
	if p.Manifest != nil && p.Manifest.Object != nil {
		hostNetwork = p.Manifest.Object.Spec.HostNetwork
	}
	if ready > 1 || newest.State != cri.SandboxReady || newest.HostNetwork != hostNetwork || !hostNetwork && len(newest.IPs) == 0 {
		return true, newest.Attempt + 1
	}
	return false, newest.Attempt
}

// initializedCondition is GeneratePodInitializedCondition. An init
// container is initialized once it completed (a regular one: kubelet's
// Ready) or started (a sidecar); a pod that initialized before
// (wasInitialized) stays initialized.
func initializedCondition(p *Pod, phase corev1.PodPhase, facts []containerFacts, start time.Time, wasInitialized bool) Condition {
	c := Condition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: start}
	var incomplete []string
	var completedAt time.Time
	regularStarted := false
	for _, f := range facts {
		if !inSpec(p, f.c) {
			continue
		}
		switch f.c.Kind {
		case spec.Init:
			if !f.ready {
				incomplete = append(incomplete, f.c.Name)
			} else if f.status.of != nil && f.status.of.FinishedAt.After(completedAt) {
				completedAt = f.status.of.FinishedAt
			}
		case spec.Sidecar:
			if !f.started {
				incomplete = append(incomplete, f.c.Name)
			}
		default:
			// HasAnyRegularContainerStarted: running or terminated.
			regularStarted = regularStarted || f.status.running() || f.status.terminated()
		}
	}
	if !completedAt.IsZero() {
		c.LastTransitionTime = completedAt
	}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = ReasonPodCompleted
	case regularStarted, wasInitialized:
		// The pod initialized before: its sidecars may be restarting, or
		// it restarts in place or in a new sandbox, and kubelet (with
		// RestartAllContainersOnContainerExits) never turns Initialized
		// back to False.
	case len(incomplete) > 0:
		c.Status, c.Reason = corev1.ConditionFalse, ReasonContainersNotInitialized
		c.Message = fmt.Sprintf("containers with incomplete status: %s", incomplete)
		c.LastTransitionTime = start
		if p.Sandbox != nil {
			c.LastTransitionTime = p.Sandbox.CreatedAt // initialization begins again in each sandbox
		}
	}
	return c
}

// containersReadyCondition is GenerateContainersReadyCondition: the
// sidecars, then the regular containers, each ready. A pod with none of
// them in the View has no status to be ready with (kubelet's
// UnknownContainerStatuses); a completed or failed pod is not ready.
func containersReadyCondition(p *Pod, phase corev1.PodPhase, facts []containerFacts, start time.Time) Condition {
	c := Condition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse}
	var unready []string
	var all, readyAt, unreadyAt time.Time
	counted := 0
	for _, kind := range []spec.Kind{spec.Sidecar, spec.Regular} {
		for _, f := range facts {
			if f.c.Kind != kind || !inSpec(p, f.c) {
				continue
			}
			counted++
			changed := lastChange(f.c.Current)
			all = later(all, changed)
			if f.ready {
				readyAt = later(readyAt, changed)
			} else {
				unready = append(unready, f.c.Name)
				unreadyAt = later(unreadyAt, changed)
			}
		}
	}
	switch {
	case counted == 0:
		c.Reason = ReasonUnknownContainerStatuses
		c.LastTransitionTime = start
	case phase == corev1.PodSucceeded:
		c.Reason, c.LastTransitionTime = ReasonPodCompleted, all
	case phase == corev1.PodFailed:
		c.Reason, c.LastTransitionTime = ReasonPodFailed, all
	case len(unready) > 0:
		c.Reason = ReasonContainersNotReady
		c.Message = fmt.Sprintf("containers with unready status: %s", unready)
		c.LastTransitionTime = unreadyAt
		if c.LastTransitionTime.IsZero() && p.Sandbox != nil {
			c.LastTransitionTime = p.Sandbox.CreatedAt // none has an instance yet
		}
	default:
		c.Status, c.LastTransitionTime = corev1.ConditionTrue, readyAt
	}
	return c
}

// readyCondition is GeneratePodReadyCondition: ContainersReady, and every
// readiness gate's condition True, found among the conditions before
// Ready (the gates set with `cri-prober gate set`, then kubelet's
// PodReadyToStartContainers and Initialized, which a gate may name too).
// A condition set that no readiness gate names is shown and changes
// nothing, as under kubelet. Ready's time when the gates hold it back is
// the pod's start (the agent keeps no earlier status).
func readyCondition(p *Pod, containersReady Condition, before []Condition, start time.Time) Condition {
	c := containersReady
	c.Type = corev1.PodReady
	if c.Status != corev1.ConditionTrue || p.Manifest == nil || p.Manifest.Object == nil {
		return c
	}
	var unready []string
	for _, rg := range p.Manifest.Object.Spec.ReadinessGates {
		found := false
		for _, b := range before {
			if b.Type != rg.ConditionType {
				continue
			}
			found = true
			if b.Status != corev1.ConditionTrue {
				unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), b.Status))
			}
		}
		if !found {
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		}
	}
	if len(unready) > 0 {
		return Condition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: ReasonReadinessGatesNotReady,
			Message: strings.Join(unready, ", "), LastTransitionTime: start}
	}
	return c
}

// lastChange is the newest time the runtime gives for an instance: its
// exit, start or creation; zero for none.
func lastChange(i *cri.Container) time.Time {
	if i == nil {
		return time.Time{}
	}
	return later(later(i.CreatedAt, i.StartedAt), i.FinishedAt)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// conditionTrue reports whether the conditions have t with status True.
func conditionTrue(list []Condition, t corev1.PodConditionType) bool {
	for _, c := range list {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
