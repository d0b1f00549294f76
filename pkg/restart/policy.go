package restart

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// minimumGracePeriod is kubelet's floor on any kill's grace period.
const minimumGracePeriod = 2

// restartOnExit reports whether a container that exited by itself with
// exitCode is restarted under policy.
func restartOnExit(policy corev1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// restartAfterKill reports whether a container killed for failing a probe is
// restarted: under any policy but Never, whatever it exits with (kubelet
// decides the restart together with the kill).
func restartAfterKill(policy corev1.RestartPolicy) bool {
	return policy != corev1.RestartPolicyNever
}

// gracePeriod is the grace period of a kill for a failed probe, as kubelet
// sets it: the probe's terminationGracePeriodSeconds if set, else the pod's,
// and never below 2 seconds.
func gracePeriod(podGrace int64, probeGrace *int64) int64 {
	g := podGrace
	if probeGrace != nil {
		g = *probeGrace
	}
	return max(g, minimumGracePeriod)
}

// killReason names what a probe failure is called in kubelet's messages.
func killReason(t results.ProbeType) string {
	if t == results.Startup {
		return "startup"
	}
	return "liveness"
}
