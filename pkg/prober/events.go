package prober

import "time"

// Event types, as in Kubernetes.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

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
)

// Event is one thing worth telling a person, about a container of a pod.
type Event struct {
	Time      time.Time
	Type      string
	Reason    string
	Namespace string
	Pod       string
	Container string
	Message   string
}

// Recorder receives events. It must not block for long: workers call it.
type Recorder interface {
	Record(Event)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(Event)

// Record calls f.
func (f RecorderFunc) Record(e Event) { f(e) }
