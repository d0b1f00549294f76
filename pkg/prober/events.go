package prober

import "github.com/cri-prober/cri-prober/pkg/events"

// Event reasons. Unhealthy and ProbeWarning are kubelet's, with kubelet's
// messages ("Liveness probe failed: …"); the others mark changes of a
// container's stable state, which kubelet shows only as status.
const (
	ReasonUnhealthy          = "Unhealthy"
	ReasonProbeWarning       = "ProbeWarning"
	ReasonContainerReady     = "ContainerReady"
	ReasonContainerNotReady  = "ContainerNotReady"
	ReasonStartupSucceeded   = "StartupProbeSucceeded"
	ReasonStartupFailed      = "StartupProbeFailed"
	ReasonLivenessFailed     = "LivenessProbeFailed"
	ReasonInvalidProbeConfig = "InvalidProbeConfig"
	// ReasonAgentResourceExhausted: a probe could not run because the agent
	// itself is out of resources (file descriptors, ports, socket memory).
	// kubelet would report its generic "errored" event; the cause is named
	// here so nobody looks for it in the container.
	ReasonAgentResourceExhausted = "AgentResourceExhausted"
	// ReasonExecProbeQueued: an exec probe waited for a slot of its pod
	// under --max-concurrent-exec-per-pod (kubelet has no such limit).
	ReasonExecProbeQueued = "ExecProbeQueued"
)

// Recorder receives events. It must not block for long: workers call it.
type Recorder interface {
	Record(events.Event)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(events.Event)

// Record calls f.
func (f RecorderFunc) Record(e events.Event) { f(e) }
