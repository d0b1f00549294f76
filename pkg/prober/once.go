package prober

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Target is where a one-off probe goes.
type Target struct {
	PodIP       string
	ContainerID string
	// Container gives named ports and env for $(VAR); may be empty.
	Container *spec.Container
	// Extensions are the probe's additions (startInterval is moot here).
	Extensions *spec.Extensions
	// NetNS, when set, dials network probes from inside that network
	// namespace, to 127.0.0.1 unless the probe sets a host.
	NetNS string
}

// Outcome is a one-off probe's result, as a worker would see it.
type Outcome struct {
	Result results.Result  // Success or Failure (meaningless when Err is set)
	Raw    results.Outcome // success, warning, failure or unknown
	Output string
	Err    error // could not probe (after kubelet's three tries)
}

// RunProbe runs p once against t through the same handlers, retries and
// result mapping as the agent's workers.
func RunProbe(ctx context.Context, execRunner ExecRunner, p *corev1.Probe, t Target) Outcome {
	c := t.Container
	if c == nil {
		c = &spec.Container{}
	}
	d := &dispatcher{exec: execRunner, http: netprobe.NewHTTPGet()}
	o := d.probe(ctx, p, target{podIP: t.PodIP, containerID: t.ContainerID, container: c,
		inPodNetwork: t.NetNS != "", netns: t.NetNS, extensions: t.Extensions})
	return Outcome{Result: o.result, Raw: o.raw, Output: o.output, Err: o.err}
}

// ContainerSpec resolves the probe spec of one container of a pod (by its
// key, cri.Pod.Key) as the agent would: from a matching manifest, else from
// the container's annotations. It returns nil when nothing covers the
// container, and the problems when its spec is invalid.
func ContainerSpec(snap *cri.Snapshot, manifests []*spec.Pod, manifestErrs []*spec.Error, podKey, container string) (*spec.Container, []*spec.Error) {
	p, ok := resolvePod(snap, manifests, manifestErrs, podKey)
	if !ok {
		return nil, nil
	}
	pc, ok := p.containers[container]
	if !ok || len(p.errs) > 0 {
		return nil, p.errs
	}
	return pc.spec, pc.errs
}

// ProbeNetwork is where the agent would dial a pod's network probes from,
// by the pod's own choice (spec.ProbeNetworkNode, spec.ProbeNetworkPod, or
// "" when it makes none and the agent's default applies).
func ProbeNetwork(snap *cri.Snapshot, manifests []*spec.Pod, manifestErrs []*spec.Error, podKey string) string {
	if p, ok := resolvePod(snap, manifests, manifestErrs, podKey); ok {
		return p.policy.ProbeNetwork
	}
	return ""
}

// resolvePod resolves one pod as the agent would.
func resolvePod(snap *cri.Snapshot, manifests []*spec.Pod, manifestErrs []*spec.Error, podKey string) (*pod, bool) {
	res := resolve(snap, manifests, manifestErrs, func(p *pod, c *cri.Container) (*spec.Container, []*spec.Error) {
		return spec.ContainerFromAnnotations(p.namespace, p.name, c.Name, c.Annotations)
	})
	for _, p := range res.pods {
		if p.key == podKey {
			return p, true
		}
	}
	return nil, false
}

// WithPodFilter limits probing to the pods keep accepts (the others are
// still reported).
func WithPodFilter(keep func(namespace, name string) bool) Option {
	return func(m *Manager) error { m.podFilter = keep; return nil }
}

// WithoutStartupJitter makes workers probe at once even when the agent has
// just started: for a one-shot `wait`, where there is no herd to spread.
func WithoutStartupJitter() Option {
	return func(m *Manager) error { m.noStartupJitter = true; return nil }
}
