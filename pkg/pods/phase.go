package pods

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// containerState is a container's state as kubelet's status shows it:
// missing (no instance yet), running, terminated, or waiting — with the
// exit of the instance before when one exited (its LastTerminationState).
type containerState struct {
	missing, running, terminated, waiting bool
	// exited: terminated, or waiting after an exit; exitCode is that exit's.
	exited   bool
	exitCode int32
}

func stateOf(c *Container) containerState {
	cur := c.Current
	switch {
	case cur == nil:
		return containerState{missing: true}
	case cur.State == cri.StateRunning:
		return containerState{running: true}
	case cur.State == cri.StateExited:
		return containerState{terminated: true, exited: true, exitCode: cur.ExitCode}
	}
	s := containerState{waiting: true}
	for _, i := range c.Instances {
		if i != cur && i.State == cri.StateExited && i.CreatedAt.Before(cur.CreatedAt) {
			s.exited, s.exitCode = true, i.ExitCode
			break
		}
	}
	return s
}

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

// phase is kubelet 1.36's getPhase (ContainerRestartRules on) over the
// pod's containers. started says whether a running sidecar has started
// (passed its startup probe). A pod someone else made is terminal once it
// has no ready sandbox (the agent does not make sandboxes for it); an
// owned pod's sandbox is made again, so only its removal ends it.
func phase(p *Pod, started func(*Container) bool) corev1.PodPhase {
	terminal := !p.Owned && !p.SandboxReady() || p.Orphaned
	initialized := true
	var pendingInit, pendingSidecars, failedInitNotRestartable int
	var unknown, running, waiting, stopped, stoppedNotRestartable, succeeded int
	for _, c := range p.Containers {
		if !inSpec(p, c) {
			continue
		}
		s := stateOf(c)
		switch c.Kind {
		case spec.Init:
			initialized = false // until a regular container exists (below)
			switch {
			case s.missing, s.running, s.waiting && !s.exited:
				pendingInit++
			case s.exitCode != 0 && !restartsAfterExit(p, c, s.exitCode):
				failedInitNotRestartable++
			}
		case spec.Sidecar:
			initialized = false
			switch {
			case s.missing:
				unknown++
			case s.running:
				if !started(c) {
					pendingSidecars++
				}
				running++
			case s.waiting && !s.exited:
				pendingSidecars++
				waiting++
			}
		default:
			switch {
			case s.missing:
				unknown++
			case s.running:
				running++
			case s.exited:
				stopped++
				if !restartsAfterExit(p, c, s.exitCode) {
					stoppedNotRestartable++
				}
				if s.exitCode == 0 {
					succeeded++
				}
			default:
				waiting++
			}
		}
	}
	// kubelet: the pod has initialized once any regular container exists.
	for _, c := range p.Containers {
		if c.Kind == spec.Regular && inSpec(p, c) && c.Current != nil {
			initialized = true
		}
	}
	if failedInitNotRestartable > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized), waiting > 0:
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
