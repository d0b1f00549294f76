package prober

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// podStatus is what a worker reads about its pod: the part of kubelet's
// status-manager view that the prober uses, built from a CRI snapshot.
// Values are immutable once published.
type podStatus struct {
	key       string // the pod's UID, or its sandbox ID when it has none
	namespace string
	name      string
	phase     corev1.PodPhase
	// terminating is set while the pod is being torn down (its sandbox
	// stopped, some container still running): kubelet's deletion timestamp.
	terminating bool
	ip          string
	// inPodNetwork: network probes are dialled from inside netns, the
	// pod's network namespace ("" if the runtime did not say).
	inPodNetwork  bool
	netns         string
	restartPolicy corev1.RestartPolicy
	containers    map[string]containerStatus // newest instance by name
}

// containerStatus is one container instance as kubelet's status shows it.
type containerStatus struct {
	id        string
	state     cri.ContainerState
	startedAt time.Time
	exitCode  int32
	// hasStartupProbe and hasReadinessProbe say which workers exist; with
	// the results they give Started and Ready.
	hasStartupProbe   bool
	hasReadinessProbe bool
}

func (c containerStatus) running() bool { return c.state == cri.StateRunning }

// podPhase derives kubelet's pod phase from the latest container instances
// (sidecars excluded by the caller) and the restart policy. A pod whose
// sandboxes are all stopped is over: nothing will restart its containers.
func podPhase(containers []containerStatus, policy corev1.RestartPolicy, sandboxReady bool) corev1.PodPhase {
	var running, waiting, succeeded, failed int
	for _, c := range containers {
		switch c.state {
		case cri.StateRunning:
			running++
		case cri.StateExited:
			if c.exitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		default:
			waiting++
		}
	}
	allStopped := len(containers) > 0 && running == 0 && waiting == 0
	switch {
	case !sandboxReady && running == 0:
		if failed > 0 || len(containers) == 0 {
			return corev1.PodFailed
		}
		return corev1.PodSucceeded
	case allStopped && policy == corev1.RestartPolicyNever && failed > 0:
		return corev1.PodFailed
	case allStopped && policy != corev1.RestartPolicyAlways && failed == 0:
		return corev1.PodSucceeded
	case running == 0 && waiting > 0 && succeeded+failed == 0:
		return corev1.PodPending
	default:
		return corev1.PodRunning
	}
}
