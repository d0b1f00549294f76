package restart

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Cause is why a container is killed or restarted.
type Cause string

const (
	// CauseLiveness and CauseStartup: the probe reached its failure
	// threshold.
	CauseLiveness Cause = "liveness"
	CauseStartup  Cause = "startup"
	// CauseExit: the container exited by itself.
	CauseExit Cause = "exit"
	// CausePostStart: its postStart hook failed.
	CausePostStart Cause = "postStart"
	// CauseUnknown: the runtime cannot say what state it is in.
	CauseUnknown Cause = "unknown"
	// CausePodKill: the whole pod is being stopped (its grace period
	// applies, not a probe's).
	CausePodKill Cause = "pod"
	// CauseRestartAll: a container's exit matched a RestartAllContainers
	// rule: every container is killed at once and the pod starts over in
	// its sandbox.
	CauseRestartAll Cause = "RestartAllContainers"
	// CauseFirstStart: the container's first start (a static pod's).
	CauseFirstStart Cause = ""
	// CauseEvicted: the whole pod is being stopped because it was evicted
	// (pods.ReasonEvicted): kubelet's eviction grace period applies
	// (EvictionGracePeriod), not the pod's. Never restarted.
	CauseEvicted Cause = "evicted"
)

// causeFromAnnotation is the cause an interrupted restart's replacement
// carries (cri.AnnotationRestartCause): one the agent writes, else
// CauseUnknown. Whoever creates containers can write the annotation too,
// and a cause becomes a metrics label and a ledger entry.
func causeFromAnnotation(v string) Cause {
	switch c := Cause(v); c {
	case CauseLiveness, CauseStartup, CauseExit, CausePostStart, CauseUnknown, CausePodKill, CauseRestartAll:
		return c
	}
	return CauseUnknown
}

// containerToKill is a container instance to stop, and why.
type containerToKill struct {
	container *pods.Container
	instance  *cri.Container
	// message is kubelet's Killing event text.
	message string
	cause   Cause
	// restarts: the container is started again after the kill (decided
	// with the kill, as kubelet does): its ledger entry is recorded when
	// the replacement starts, else at once as a stop.
	restarts bool
}

// podActions is what one pass over a pod does, as kubelet's podActions:
// kill the whole pod (and make a new sandbox), or kill some containers,
// then start init containers and containers (in that order).
type podActions struct {
	killPod bool
	// createSandbox: a new sandbox of attempt sandboxAttempt is made, then
	// the pod's containers from the start (a static pod only).
	createSandbox  bool
	sandboxAttempt uint32
	// reset lists every instance to remove, after killing the running ones
	// with no grace period, for a RestartAllContainers (a static pod
	// only): the pod then starts over in its sandbox.
	reset     []*cri.Container
	kill      []containerToKill
	startInit []*pods.Container
	start     []*pods.Container
}

// resultReader gives stable probe results.
type resultReader interface {
	Get(results.Key) (results.Result, bool)
}

// computePodActions decides what to do with pod p given the probes'
// results: kubelet 1.36's computePodActions and computeInitContainerActions
// with its default feature gates (sidecars, ContainerRestartRules,
// RestartAllContainersOnContainerExits). It is pure: the same view and
// results always give the same actions.
//
// A pod someone else made (not p.Static) differs, because the agent does
// not own it: it never gets a new sandbox (a stopped one ends it), its
// containers the agent does not manage are never killed or started, and a
// running one keeps the pod alive.
func computePodActions(p *pods.Pod, res resultReader) podActions {
	var a podActions
	if p.Static {
		if changed, attempt := pods.SandboxChanged(p); changed {
			return computeNewSandbox(p, attempt)
		}
		if reset := restartAllContainers(p); reset != nil {
			a.reset = reset
			return a
		}
	}
	if initialized := computeInitContainerActions(p, res, &a); a.killPod || !initialized {
		return a
	}
	keep := 0
	for _, c := range p.Containers {
		if c.Kind != spec.Regular {
			continue
		}
		if !c.Managed {
			if c.Running() {
				keep++ // not ours to judge: alive, it keeps the pod
			}
			continue
		}
		cur := c.Current
		if cur == nil || cur.State != cri.StateRunning {
			if shouldBeRestarted(p, c) {
				a.start = append(a.start, c)
				if cur != nil && cur.State == cri.StateUnknown {
					// Killed first so that two instances never run.
					a.kill = append(a.kill, containerToKill{container: c, instance: cur, cause: CauseUnknown,
						message:  fmt.Sprintf("Container is in %q state, try killing it before restart", cur.State),
						restarts: c.Spec.RestartsAfterKill(p.Policy.RestartPolicy)})
				}
			}
			continue
		}
		var message string
		var cause Cause
		switch {
		case failed(res, cur, results.Liveness):
			message, cause = fmt.Sprintf("Container %s failed liveness probe", c.Name), CauseLiveness
		case failed(res, cur, results.Startup):
			message, cause = fmt.Sprintf("Container %s failed startup probe", c.Name), CauseStartup
		default:
			keep++
			continue
		}
		// For a probe kill only the container's own policy counts, else the
		// pod's: there is no exit code for the rules yet.
		restarts := c.Spec.RestartsAfterKill(p.Policy.RestartPolicy)
		if restarts {
			message += ", will be restarted"
			a.start = append(a.start, c)
		}
		a.kill = append(a.kill, containerToKill{container: c, instance: cur, message: message, cause: cause, restarts: restarts})
	}
	if keep == 0 && len(a.start) == 0 {
		// Nothing left to run: the pod is over. Sidecars must not keep it
		// alive, so they are not restarted either.
		a.killPod, a.startInit = true, nil
	}
	return a
}

// computeNewSandbox is computePodActions' start over in a new sandbox:
// the old one is killed, and the pod starts from its first init container
// (or from every container), except that a pod that must not restart and
// already ran gets no new sandbox, nor does one whose containers all
// completed as their policies want.
func computeNewSandbox(p *pods.Pod, attempt uint32) podActions {
	a := podActions{killPod: true, createSandbox: true, sandboxAttempt: attempt}
	ran := false
	for _, c := range p.Containers {
		if c.Current != nil {
			ran = true
		}
	}
	if p.Policy.RestartPolicy == corev1.RestartPolicyNever && attempt != 0 && ran {
		a.createSandbox = false
		return a
	}
	var start []*pods.Container
	for _, c := range p.Containers {
		if c.Kind != spec.Regular || !c.Managed {
			continue
		}
		runOnce := p.Policy.RestartPolicy == corev1.RestartPolicyOnFailure
		if c.Spec != nil && c.Spec.RestartPolicy != nil {
			runOnce = *c.Spec.RestartPolicy == corev1.ContainerRestartPolicyOnFailure
		}
		if runOnce && succeeded(c) {
			continue
		}
		start = append(start, c)
	}
	if len(start) == 0 && anyRegularCreated(p) {
		a.createSandbox = false
		return a
	}
	for _, c := range p.Containers {
		if c.Kind.IsInit() && c.Managed {
			a.startInit = []*pods.Container{c}
			return a
		}
	}
	a.start = start
	return a
}

// succeeded reports whether the container's newest instance exited 0
// (kubelet's containerSucceeded).
func succeeded(c *pods.Container) bool {
	return c.Current != nil && c.Current.State == cri.StateExited && c.Current.ExitCode == 0
}

// anyRegularCreated is kubelet's HasAnyRegularContainerCreated: some
// regular container has an instance that is not merely created (so the
// pod got past its init containers once).
func anyRegularCreated(p *pods.Pod) bool {
	for _, c := range p.Containers {
		if c.Kind == spec.Regular && c.Current != nil && c.Current.State != cri.StateCreated {
			return true
		}
	}
	return false
}

// restartAllContainers returns every instance of the pod's containers
// when the newest instance of one of them exited with a code that a
// RestartAllContainers rule matches (kubelet's ShouldAllContainersRestart
// and getContainersToReset), the instances that triggered it last; nil
// otherwise.
func restartAllContainers(p *pods.Pod) []*cri.Container {
	triggered := false
	for _, c := range p.Containers {
		if cur := c.Current; cur != nil && cur.State == cri.StateExited && c.Spec.RestartsAll(cur.ExitCode) {
			triggered = true
		}
	}
	if !triggered {
		return nil
	}
	var targets, sources []*cri.Container
	for _, kind := range []func(spec.Kind) bool{func(k spec.Kind) bool { return k == spec.Regular }, spec.Kind.IsInit} {
		for _, c := range p.Containers {
			if !kind(c.Kind) || !c.Managed {
				continue
			}
			for _, i := range c.Instances {
				if i.State == cri.StateExited && c.Spec.RestartsAll(i.ExitCode) {
					sources = append(sources, i)
				} else {
					targets = append(targets, i)
				}
			}
		}
	}
	return append(targets, sources...)
}

// failed reports whether the container's probe of type t has failed.
func failed(res resultReader, c *cri.Container, t results.ProbeType) bool {
	r, ok := res.Get(results.Key{ContainerID: c.ID, Type: t})
	return ok && r == results.Failure
}

// shouldBeRestarted is kubelet's ShouldContainerBeRestarted for a
// container that is not running.
func shouldBeRestarted(p *pods.Pod, c *pods.Container) bool {
	cur := c.Current
	switch {
	case cur == nil:
		return true // never started (or every instance removed)
	case cur.State == cri.StateRunning:
		return false
	case cur.State == cri.StateUnknown || cur.State == cri.StateCreated:
		return true
	}
	return c.Spec.ShouldRestart(p.Policy.RestartPolicy, cur.ExitCode)
}

// computeInitContainerActions is kubelet's: start the first init container
// not yet run, restart sidecars that exited or failed their liveness or
// startup probe (whatever the pod's policy), restart a failed init
// container per its policy or else kill the pod. It reports whether the
// pod has initialized, i.e. whether the regular containers are to be
// looked at.
func computeInitContainerActions(p *pods.Pod, res resultReader, a *podActions) bool {
	var inits []*pods.Container
	for _, c := range p.Containers {
		if c.Kind.IsInit() {
			inits = append(inits, c)
		}
	}
	if len(inits) == 0 {
		return true
	}
	// Once a regular container was created or runs, every init container
	// has run at some point, even if the runtime has since removed it. (An
	// exited regular container does not count: kubelet cannot tell it from
	// one of an earlier sandbox.)
	initialized := false
	for _, c := range p.Containers {
		if c.Kind == spec.Regular && c.Current != nil && (c.Current.State == cri.StateCreated || c.Current.State == cri.StateRunning) {
			initialized = true
			break
		}
	}
	previouslyInitialized := initialized
	restartOnFailure := p.Policy.RestartPolicy != corev1.RestartPolicyNever
	var start []*pods.Container // in reverse order, reversed below

	// From the last init container backwards: completed ones may have been
	// removed from the runtime, so the last one known tells how far the
	// pod got.
	for i := len(inits) - 1; i >= 0; i-- {
		c := inits[i]
		sidecar := c.Kind == spec.Sidecar
		cur := c.Current
		if cur == nil {
			if previouslyInitialized && sidecar {
				start = append(start, c)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			continue // once initialized, only sidecars are kept running
		}
		switch cur.State {
		case cri.StateCreated:
			// Created but never started: start it.
			start = append(start, c)
		case cri.StateRunning:
			if !sidecar {
				break
			}
			if c.Spec != nil && c.Spec.Startup != nil {
				r, found := res.Get(results.Key{ContainerID: cur.ID, Type: results.Startup})
				if !found {
					break // not probed yet: wait
				}
				if r != results.Success {
					if r == results.Failure {
						a.kill = append(a.kill, containerToKill{container: c, instance: cur, cause: CauseStartup, restarts: true,
							message: fmt.Sprintf("Init container %s failed startup probe", c.Name)})
						start = append(start, c)
					}
					break
				}
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previouslyInitialized {
				start = append(start, inits[i+1]) // started once: on to the next
			}
			// A sidecar's liveness probe does not hold up the next one.
			if c.Spec != nil && c.Spec.Liveness != nil {
				r, found := res.Get(results.Key{ContainerID: cur.ID, Type: results.Liveness})
				if found && r == results.Failure {
					a.kill = append(a.kill, containerToKill{container: c, instance: cur, cause: CauseLiveness, restarts: true,
						message: fmt.Sprintf("Init container %s failed liveness probe", c.Name)})
					start = append(start, c)
				}
			}
		case cri.StateExited:
			if sidecar {
				start = append(start, c) // sidecars restart on any exit
				break
			}
			if cur.ExitCode != 0 || cur.Reason == "OOMKilled" {
				if !c.Spec.ShouldRestart(p.Policy.RestartPolicy, cur.ExitCode) {
					a.killPod, a.startInit = true, nil
					return false
				}
				start = append(start, c)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				start = append(start, inits[i+1])
			}
		default: // unknown state
			restart := restartOnFailure
			if !sidecar && c.Spec != nil && c.Spec.RestartPolicy != nil {
				restart = *c.Spec.RestartPolicy != corev1.ContainerRestartPolicyNever
			}
			if !sidecar && !restart {
				a.killPod, a.startInit = true, nil
				return false
			}
			// Killed only to be started again (else the pod is killed).
			a.kill = append(a.kill, containerToKill{container: c, instance: cur, cause: CauseUnknown, restarts: true,
				message: fmt.Sprintf("Init container is in %q state, try killing it before restart", cur.State)})
			start = append(start, c)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		start = append(start, inits[0]) // none has run: the first one
	}
	for i := len(start) - 1; i >= 0; i-- {
		a.startInit = append(a.startInit, start[i])
	}
	return initialized
}
