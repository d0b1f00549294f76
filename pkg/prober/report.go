package prober

import (
	"time"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// PodReport is a pod as the agent sees it: runtime state, where its probe
// specs come from, and each container's Started and Ready flags.
type PodReport struct {
	// Key identifies the pod across its sandboxes (cri.Pod.Key).
	Key       string
	Namespace string
	Name      string
	UID       string
	SandboxID string
	IP        string
	CreatedAt time.Time // the current sandbox's creation
	// Source is the manifest (file:line) or "annotations" the probe specs
	// come from; empty for a pod nothing probes.
	Source string
	// Ready is kubelet's ContainersReady: every container is ready.
	Ready      bool
	Problems   []string // invalid pod-level configuration
	Containers []ContainerReport
}

// ContainerReport is one container's newest instance.
type ContainerReport struct {
	Name      string
	ID        string // empty until the container exists
	Attempt   uint32
	State     cri.ContainerState
	StartedAt time.Time
	ExitCode  int32
	Probed    bool
	Started   bool
	Ready     bool
	// Problems lists what is wrong with the container's probe spec: such a
	// container is not probed and never reported ready.
	Problems []string
	Probes   []ProbeReport
}

// ProbeReport is one probe of a container.
type ProbeReport struct {
	Type results.ProbeType
	// Result is the stable result (Unknown until there is one).
	Result results.Result
	Last   *results.Observation
}

// Report describes every pod the runtime has, probed or not.
func (m *Manager) Report() []PodReport {
	pods := m.pods.Load()
	if pods == nil {
		return nil
	}
	out := make([]PodReport, 0, len(*pods))
	for _, p := range *pods {
		pr := PodReport{
			Key: p.key, Namespace: p.namespace, Name: p.name, UID: p.uid,
			SandboxID: p.sandbox.ID, IP: p.sandbox.IP(), CreatedAt: p.sandbox.CreatedAt, Source: p.source, Ready: true,
		}
		for _, e := range p.errs {
			pr.Problems = append(pr.Problems, e.Error())
		}
		manifestInvalid := len(p.errs) > 0 && p.errs[0].Source != "annotations"
		for _, name := range p.sortedNames() {
			cr := m.containerReport(p.containers[name])
			if manifestInvalid {
				cr.Ready = false // its manifest is invalid: nothing is checked
			}
			pr.Ready = pr.Ready && cr.Ready
			pr.Containers = append(pr.Containers, cr)
		}
		out = append(out, pr)
	}
	return out
}

func (m *Manager) containerReport(pc *podContainer) ContainerReport {
	cr := ContainerReport{Name: pc.name, Probed: pc.spec != nil}
	for _, e := range pc.errs {
		cr.Problems = append(cr.Problems, e.Error())
	}
	c := pc.instance
	if c == nil {
		return cr
	}
	cr.ID, cr.Attempt, cr.State, cr.StartedAt, cr.ExitCode = c.ID, c.Attempt, c.State, c.StartedAt, c.ExitCode
	running := c.State == cri.StateRunning
	switch {
	case len(pc.errs) > 0:
		// Fail closed: what the user asked to be checked is not checked.
		cr.Started = running
	case pc.spec == nil:
		cr.Started, cr.Ready = running, running
	default:
		cr.Started = m.results.Started(c.ID, running, pc.spec.Startup != nil)
		cr.Ready = m.results.Ready(c.ID, running, cr.Started, pc.spec.Readiness != nil)
		for _, t := range []results.ProbeType{results.Liveness, results.Readiness, results.Startup} {
			if pc.spec.Probe(t) == nil {
				continue
			}
			key := results.Key{ContainerID: c.ID, Type: t}
			pr := ProbeReport{Type: t, Result: results.Unknown}
			if r, ok := m.results.Get(key); ok {
				pr.Result = r
			}
			if o, ok := m.results.LastObservation(key); ok {
				pr.Last = &o
			}
			cr.Probes = append(cr.Probes, pr)
		}
	}
	return cr
}
