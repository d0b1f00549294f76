package pods

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// PodReport is a pod as the agent sees it: runtime state, where its specs
// come from, its phase and readiness, and each container's flags.
type PodReport struct {
	// Key identifies the pod across its sandboxes (Pod.Key).
	Key       string
	Namespace string
	Name      string
	UID       string
	SandboxID string
	IP        string
	CreatedAt time.Time // the current sandbox's creation
	// Source is the manifest (file:line) or "annotations" the specs come
	// from; empty for a pod nothing covers.
	Source string
	Phase  corev1.PodPhase
	// Reason and Message say why the pod failed as a whole (kubelet's
	// status.reason and status.message: DeadlineExceeded).
	Reason, Message string
	// StartTime is kubelet's status.startTime (startTime).
	StartTime time.Time
	// Terminating: the pod is being torn down (kubelet's deletion
	// timestamp is set).
	Terminating bool
	// Ready is kubelet's Ready condition: ContainersReady (every regular
	// container and every sidecar exists and is ready; init containers do
	// not count; the pod has not completed) and every readiness gate met.
	Ready bool
	// ReadinessGates are the condition types the spec's readinessGates
	// name (nil: none).
	ReadinessGates []corev1.PodConditionType
	// Conditions are those set on the pod (GateStore), then kubelet's:
	// PodReadyToStartContainers, Initialized, Ready, ContainersReady and
	// PodScheduled (conditions.go).
	Conditions []Condition
	Problems   []string // invalid pod-level configuration, UID conflicts
	Containers []ContainerReport
	// Owners are the pod's owner references as the API server would show
	// them: a pod the agent makes from a static pod manifest is owned by
	// its node (kubelet's mirror pod: Kind Node, controller), any other
	// has its manifest's metadata.ownerReferences (none without one).
	Owners []metav1.OwnerReference
	// HostNetwork: the pod is on the node's network (its current
	// sandbox's, else its manifest's spec.hostNetwork).
	HostNetwork bool
	// PriorityClassName is its manifest's spec.priorityClassName.
	PriorityClassName string
}

// ContainerReport is one container's current instance.
type ContainerReport struct {
	Name      string
	Kind      spec.Kind
	ID        string // empty until the container exists
	Attempt   uint32
	State     cri.ContainerState
	StartedAt time.Time
	ExitCode  int32
	Probed    bool
	Started   bool
	Ready     bool
	// Problems list what is wrong with the container's spec: such a
	// container is not probed and never reported ready.
	Problems []string
	// Warnings list what makes part of its spec inert (a probe naming an
	// undeclared port).
	Warnings []string
	Probes   []ProbeReport
	// Waiting is why the pod sync does not start it now (nil: nothing
	// holds it back).
	Waiting *Waiting
	// Status is its state and last state as kubelet's status shows them,
	// and RestartCount kubelet's restart count (status.go).
	Status       ContainerStatus
	RestartCount int32
}

// Completed reports whether the container ran to completion: an init
// container that exited 0 (kubectl's "Completed").
func (c ContainerReport) Completed() bool {
	return c.State == cri.StateExited && c.ExitCode == 0
}

// ProbeReport is one probe of a container.
type ProbeReport struct {
	Type results.ProbeType
	// Result is the stable result (Unknown until there is one).
	Result results.Result
	Last   *results.Observation
}

// Report describes every pod of the pods' status st, probed or not, with
// the results in store and the readiness gates' conditions in gates.
func Report(st *Status, store *results.Store, gates GateSet) []PodReport {
	out := make([]PodReport, 0, len(st.Pods()))
	for _, p := range st.Pods() {
		out = append(out, ReportPod(p, st.For(p.Key), store, gates))
	}
	return out
}

// ReportPod describes one pod, with what its syncs add to its status
// (added: Status.For; the zero PodStatus with no pod sync) and the
// conditions set on it in gates (the zero GateSet: none).
func ReportPod(p *Pod, added PodStatus, store *results.Store, gates GateSet) PodReport {
	pr := PodReport{Key: p.Key, Namespace: p.Namespace, Name: p.Name, UID: p.UID, IP: p.IP(), Source: p.Source,
		Reason: p.Reason, Message: p.Message, StartTime: p.StartTime, Terminating: p.Terminating}
	if p.Manifest != nil && p.Manifest.Object != nil {
		for _, rg := range p.Manifest.Object.Spec.ReadinessGates {
			pr.ReadinessGates = append(pr.ReadinessGates, rg.ConditionType)
		}
	}
	if p.Sandbox != nil {
		pr.SandboxID, pr.CreatedAt, pr.HostNetwork = p.Sandbox.ID, p.Sandbox.CreatedAt, p.Sandbox.HostNetwork
	}
	if p.Manifest != nil && p.Manifest.Object != nil {
		obj := p.Manifest.Object
		pr.PriorityClassName, pr.Owners = obj.Spec.PriorityClassName, obj.OwnerReferences
		if p.Sandbox == nil {
			pr.HostNetwork = obj.Spec.HostNetwork
		}
		if p.Static && obj.Spec.NodeName != "" {
			pr.Owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: obj.Spec.NodeName, Controller: ptr.To(true)}}
		}
	}
	for _, e := range slices.Concat(p.Problems, p.Conflicts) {
		pr.Problems = append(pr.Problems, e.Error())
	}
	// Each container's status once: the phase, the conditions and the
	// report read the same.
	in := initFactsOf(p)
	facts := make([]containerFacts, 0, len(p.Containers))
	statuses := make(map[*Container]apiStatus, len(p.Containers))
	started := make(map[*Container]bool, len(p.Containers))
	for _, c := range p.Containers {
		st := statusOf(p, c, in, added)
		cr := containerReport(c, st, added, store)
		if p.ManifestInvalid {
			cr.Ready = false // its manifest is invalid: nothing is checked
		}
		statuses[c], started[c] = st, cr.Started
		facts = append(facts, containerFacts{c: c, status: st, ready: cr.Ready, started: cr.Started})
		pr.Containers = append(pr.Containers, cr)
	}
	pr.Phase = phaseOf(p, in, func(c *Container) apiStatus { return statuses[c] }, func(c *Container) bool { return started[c] })
	pr.Conditions = conditions(p, pr.Phase, facts, gates.For(p.Key), added.Initialized)
	final := terminatedStatuses(p, pr.Phase, statuses, started)
	for i, c := range p.Containers {
		if st, ok := final[c]; ok {
			pr.Containers[i].Status = st.write()
		}
	}
	// The one rule for a pod's readiness, read by /ready, wait, the
	// status page and the metrics alike.
	pr.Ready = conditionTrue(pr.Conditions, corev1.PodReady)
	return pr
}

func containerReport(c *Container, st apiStatus, added PodStatus, store *results.Store) ContainerReport {
	cr := ContainerReport{Name: c.Name, Kind: c.Kind, Probed: c.Probed(), Waiting: added.waiting(c.Name), Status: st.write(),
		RestartCount: restartCount(c, added.reset(c.Name))}
	for _, e := range c.Problems {
		cr.Problems = append(cr.Problems, e.Error())
	}
	if c.Spec != nil {
		for _, w := range c.Spec.Warnings {
			cr.Warnings = append(cr.Warnings, w.Error())
		}
	}
	if c.Kind == spec.Init {
		// kubelet: a regular init container is ready once it completed
		// (one the runtime lost after the pod initialized included).
		cr.Ready = st.terminated() && st.exitCode() == 0
	}
	cur := c.Current
	if cur == nil {
		return cr
	}
	cr.ID, cr.Attempt, cr.State, cr.StartedAt, cr.ExitCode = cur.ID, cur.Attempt, cur.State, cur.StartedAt, cur.ExitCode
	running := cur.State == cri.StateRunning
	cr.Started = containerStarted(c, store)
	switch {
	case c.Kind == spec.Init, len(c.Problems) > 0:
		// Not ready while running: a regular init container never is, and
		// what the user asked to be checked is not checked (fail closed).
	case !c.Probed():
		cr.Ready = running
	default:
		cr.Ready = store.Ready(results.Container{ID: cur.ID, Running: running, Started: cr.Started, HasReadinessProbe: c.Spec.Readiness != nil})
		for _, t := range []results.ProbeType{results.Liveness, results.Readiness, results.Startup} {
			if c.Spec.Probe(t) == nil {
				continue
			}
			key := results.Key{ContainerID: cur.ID, Type: t}
			pr := ProbeReport{Type: t, Result: results.Unknown}
			if r, ok := store.Get(key); ok {
				pr.Result = r
			}
			if o, ok := store.LastObservation(key); ok {
				pr.Last = &o
			}
			cr.Probes = append(cr.Probes, pr)
		}
	}
	return cr
}
