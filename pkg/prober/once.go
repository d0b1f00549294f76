package prober

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Target is where a one-off probe goes.
type Target struct {
	// Host is where network probes go when the probe names no host (the
	// pod IP; 127.0.0.1 with NetNS).
	Host        string
	ContainerID string
	// Container gives named ports and env for $(VAR); may be empty.
	Container *spec.Container
	// Extensions are the probe's additions (startInterval is moot here).
	Extensions *spec.Extensions
	// NetNS, when set, dials network probes from inside that network
	// namespace.
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
	o := d.probe(ctx, p, target{host: t.Host, containerID: t.ContainerID, container: c,
		inPodNetwork: t.NetNS != "", netns: t.NetNS, extensions: t.Extensions})
	return Outcome{Result: o.result, Raw: o.raw, Output: o.output, Err: o.err}
}
