package pods

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// restartsAfterExit is kubelet's ContainerShouldRestart for a container of
// pod p (one no spec covers follows the pod's policy).
func restartsAfterExit(p *Pod, c *Container, exitCode int32) bool {
	return c.Spec.ShouldRestart(p.Policy.RestartPolicy, exitCode)
}

// inSpec reports whether kubelet would see the container in the pod's spec:
// the manifest's containers, or for a pod without one every container the
// runtime has.
func inSpec(p *Pod, c *Container) bool {
	if p.Manifest == nil {
		return true
	}
	_, ok := p.Manifest.Container(c.Name)
	return ok
}

// containerStarted is a container's Started flag, kubelet's
// isContainerStarted over its status (UpdatePodStatus): running, and for
// a probed container (one with probes and no problem with them) the
// startup probe's result, if it has one (results.Store.Started). A
// regular init container has no startup probe; a container whose probes
// have problems is not probed at all. The report reads it (ReportPod), as
// pod sync's plan reads the startup results (computePodActions): where
// the results meet the view, which knows nothing of them.
func containerStarted(c *Container, store *results.Store) bool {
	running := c.Running()
	if !running || c.Kind == spec.Init || !c.Probed() {
		return running
	}
	return store.Started(results.Container{ID: c.Current.ID, Running: running, HasStartupProbe: c.Spec.Startup != nil})
}

// phase is kubelet 1.36's getPhase (ContainerRestartRules on) over the
// pod's containers' statuses (statusOf, with what the pod's syncs add:
// added). started says whether a running sidecar has started (passed its
// startup probe): only a phase that is not terminal depends on it (a
// running sidecar counts as running, which no terminal phase has but for
// a failed init container or an active deadline, which come first), so
// the view's phase, which takes every running sidecar as started, is
// terminal exactly when the report's is. A pod someone else made
// is terminal once it has no ready sandbox (the agent does not make
// sandboxes for it); a static pod's sandbox is made again, so only its
// removal ends it.
func phase(p *Pod, added PodStatus, started func(*Container) bool) corev1.PodPhase {
	in := initFactsOf(p)
	return phaseOf(p, in, func(c *Container) apiStatus { return statusOf(p, c, in, added) }, started)
}

// phaseOf is phase with the containers' statuses given.
//
// A container with no instance at all is one getPhase has no status for
// (unknown, or a pending init container), although kubelet's status shows
// it waiting (ContainerCreating): so a pod someone else made that was torn
// down before all of it ran is Failed rather than Pending forever.
func phaseOf(p *Pod, in initFacts, status func(*Container) apiStatus, started func(*Container) bool) corev1.PodPhase {
	if p.Reason != "" {
		// Failed as a whole (activeDeadlineSeconds: kubelet's pod sync
		// handler's ShouldEvict overrides the phase).
		return corev1.PodFailed
	}
	terminal := !p.Static && !p.SandboxReady() || p.Orphaned
	var pendingInit, pendingSidecars, failedInitNotRestartable int
	var unknown, running, waiting, stopped, stoppedNotRestartable, succeeded int
	for _, c := range p.Containers {
		if !inSpec(p, c) {
			continue
		}
		s := status(c)
		lastExit, lastTerminated := s.lastExit()
		switch c.Kind {
		case spec.Init:
			switch {
			case s.missing, s.running():
				pendingInit++
			case s.terminated():
				if s.exitCode() != 0 && !restartsAfterExit(p, c, s.exitCode()) {
					failedInitNotRestartable++
				}
			case lastTerminated:
				if lastExit != 0 && !restartsAfterExit(p, c, lastExit) && !s.lastReset {
					failedInitNotRestartable++
				}
			default:
				pendingInit++
			}
		case spec.Sidecar:
			switch {
			case s.missing:
				unknown++
			case s.running():
				if !started(c) {
					pendingSidecars++
				}
				running++
			case s.terminated(), lastTerminated:
				// Stopped sidecars do not count.
			default:
				pendingSidecars++
				waiting++
			}
		default:
			switch {
			case s.missing:
				unknown++
			case s.running():
				running++
			case s.terminated():
				stopped++
				if !restartsAfterExit(p, c, s.exitCode()) {
					stoppedNotRestartable++
				}
				if s.exitCode() == 0 {
					succeeded++
				}
			case lastTerminated:
				// Waiting after an exit: stopped, though not counted as
				// succeeded whatever its exit (getPhase's Waiting case).
				stopped++
				if !restartsAfterExit(p, c, lastExit) && !s.lastReset {
					stoppedNotRestartable++
				}
			default:
				waiting++
			}
		}
	}
	if failedInitNotRestartable > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !in.regularInSandbox), waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		switch {
		case terminal && stopped == succeeded:
			return corev1.PodSucceeded
		case terminal:
			return corev1.PodFailed
		case stopped != stoppedNotRestartable:
			return corev1.PodRunning // some container is restarting
		case stopped == succeeded:
			return corev1.PodSucceeded
		default:
			return corev1.PodFailed
		}
	case terminal && running == 0:
		// Torn down before everything ran (kubelet would say Failed).
		return corev1.PodFailed
	default:
		return corev1.PodPending
	}
}
