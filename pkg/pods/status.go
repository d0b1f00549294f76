package pods

import (
	"time"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A container's status as kubelet 1.36's API status shows it, made from
// the View as kubelet's convertToAPIContainerStatuses
// (pkg/kubelet/kubelet_pods.go) makes it from the runtime's statuses:
// every container of the spec gets one, its state from its newest
// instance, its last termination state from the one before, and the pod
// sync's waiting reason (kubelet's reasonCache) over a container that is
// to start. Kubelet also carries some of this over from its previous
// status (a restart count, a last state when the runtime lost an
// instance); the agent keeps no previous status, so what is not in the
// View is not shown.

// Kubelet's waiting reasons for a container that has no instance yet
// (kubelet_pods.go: ContainerCreating, PodInitializing).
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
)

// Kubelet's status of an init container the runtime no longer has after
// the pod initialized (convertToAPIContainerStatuses).
const (
	reasonCompleted       = "Completed"
	messageInitStatusLost = "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"
)

// ContainerStatus is a container's state and last termination state as
// kubelet's API status shows them (v1.ContainerStatus's state and
// lastState).
type ContainerStatus struct {
	// State has exactly one of its fields set.
	State ContainerState
	// LastState is the instance before the current one (kubelet's
	// LastTerminationState: usually Terminated), or the current one's
	// exit while a waiting reason holds it; empty when there is none.
	LastState ContainerState
}

// ContainerState is v1.ContainerState: at most one field is set.
type ContainerState struct {
	Waiting    *StateWaiting
	Running    *StateRunning
	Terminated *StateTerminated
}

// StateWaiting is v1.ContainerStateWaiting. Reason is empty for an
// instance created but not started (kubelet shows no reason for it).
type StateWaiting struct {
	Reason, Message string
}

// StateRunning is v1.ContainerStateRunning.
type StateRunning struct {
	StartedAt time.Time
}

// StateTerminated is v1.ContainerStateTerminated. Reason is the
// runtime's (Completed, Error, OOMKilled, ContainerCannotRun…) and
// Message kubelet's: the runtime's message and the termination message
// (cri.Container.Message).
type StateTerminated struct {
	ExitCode              int32
	Reason, Message       string
	StartedAt, FinishedAt time.Time
	ContainerID           string
}

// stateKind is which of v1.ContainerState's fields a status sets.
type stateKind int

const (
	stateWaiting stateKind = iota
	stateRunning
	stateTerminated
)

// apiStatus is where a container's status in kubelet's API comes from,
// before it is written out: phase, conditions and the report all read
// this one value, computed by statusOf.
type apiStatus struct {
	kind stateKind
	// of is the instance the state shows (running, terminated, or created
	// and not started: waiting); nil for a waiting reason's state and for
	// an init container kubelet takes as completed.
	of *cri.Container
	// missing: no instance at all, so kubelet's default waiting state
	// (reason ContainerCreating or PodInitializing).
	missing bool
	// completed: an init container whose instances the runtime lost after
	// the pod initialized, which kubelet takes as exited 0.
	completed bool
	// reason and message of a waiting state (the default's, or the pod
	// sync's).
	reason, message string
	// last is the instance the last termination state shows; nil: none.
	last *cri.Container
}

func (s apiStatus) running() bool    { return s.kind == stateRunning }
func (s apiStatus) terminated() bool { return s.kind == stateTerminated }

// exitCode is a terminated state's exit code.
func (s apiStatus) exitCode() int32 {
	if s.of == nil {
		return 0
	}
	return s.of.ExitCode
}

// lastExit is the exit code of the last termination state, if it is a
// termination (kubelet's LastTerminationState.Terminated).
func (s apiStatus) lastExit() (int32, bool) {
	if s.last == nil || s.last.State != cri.StateExited {
		return 0, false
	}
	return s.last.ExitCode, true
}

// initFacts are what kubelet decides from the pod's spec and runtime
// about its initialization, each by its own helper; computed once per pod
// by initFactsOf and read by the phase, the statuses and the conditions.
type initFacts struct {
	// hasInit: the spec has init containers (regular or sidecars), so a
	// container with no instance waits with PodInitializing rather than
	// ContainerCreating (convertToAPIContainerStatuses' hasInitContainers,
	// for init and regular containers alike).
	hasInit bool
	// regularInSandbox: some regular container has an instance in the
	// active sandbox, the newest when it is ready
	// (HasAnyActiveRegularContainerStarted): getPhase's podHasInitialized,
	// which keeps a pod whose sidecar restarts out of Pending.
	regularInSandbox bool
	// regularCreated: some regular container has an instance in any of
	// the pod's sandboxes (kuberuntime's HasAnyRegularContainerCreated):
	// a regular init container the runtime no longer has completed.
	regularCreated bool
}

func initFactsOf(p *Pod) initFacts {
	var in initFacts
	active := newestSandbox(p)
	if active != nil && active.State != cri.SandboxReady {
		active = nil // kubelet's GetPodStatus: no active sandbox
	}
	for _, c := range p.Containers {
		if !inSpec(p, c) {
			continue
		}
		if c.Kind.IsInit() {
			in.hasInit = true
			continue
		}
		for _, i := range c.Instances {
			if i.State != cri.StateUnknown {
				in.regularCreated = true
			}
			if active != nil && i.SandboxID == active.ID {
				in.regularInSandbox = true
			}
		}
	}
	return in
}

// statusOf is convertToAPIContainerStatuses for one container of pod p.
func statusOf(p *Pod, c *Container, in initFacts) apiStatus {
	s := apiStatus{kind: stateWaiting, missing: true, reason: ReasonContainerCreating}
	if in.hasInit {
		s.reason = ReasonPodInitializing
	}
	switch cur := c.Current; {
	case cur != nil:
		// The newest instance is the state, the one before it the last
		// state (containerSeen: two statuses a name, newest first).
		s = apiStatus{of: cur, last: previousInstance(c)}
		switch cur.State {
		case cri.StateRunning:
			s.kind = stateRunning
		case cri.StateExited:
			s.kind = stateTerminated
		default:
			// Created but not started, or unknown: "waiting to be
			// running", with no reason.
			s.kind = stateWaiting
		}
	case c.Kind == spec.Init && in.regularCreated:
		// Not sidecars: kubelet restarts those.
		return apiStatus{kind: stateTerminated, completed: true}
	}
	if c.Kind.IsInit() && s.terminated() && s.exitCode() == 0 {
		return s // an init container that exited 0 is never started again
	}
	// The pod sync's reason (kubelet's reasonCache) for a container it is
	// to start and does not: the exit it waits after becomes the last
	// state.
	if c.Waiting != nil && shouldStart(p, c) {
		last := s.last
		if s.terminated() {
			last = s.of
		}
		s = apiStatus{kind: stateWaiting, reason: c.Waiting.Reason, message: c.Waiting.Message, last: last, missing: s.missing}
	}
	return s
}

// previousInstance is the newest instance of c created before its
// current one; nil if none.
func previousInstance(c *Container) *cri.Container {
	for _, i := range c.Instances {
		if i != c.Current && NewestFirst(c.Current, i) < 0 {
			return i
		}
	}
	return nil
}

// shouldStart is kubelet's ShouldContainerBeRestarted: not once the pod
// is being deleted; a container with no instance, or one created and not
// started (or in an unknown state), is started; an exited one as its
// restart policy says; a running one is not.
func shouldStart(p *Pod, c *Container) bool {
	if p.Terminating {
		return false
	}
	cur := c.Current
	switch {
	case cur == nil:
		return true
	case cur.State == cri.StateRunning:
		return false
	case cur.State == cri.StateExited:
		return restartsAfterExit(p, c, cur.ExitCode)
	default:
		return true
	}
}

// restartCount is kubelet's: the count its annotation on the newest
// instance carries (toKubeContainerStatus); an instance without it (not
// made with kubelet's annotations) counts by its attempt.
func restartCount(c *Container) int32 {
	return c.RestartCount()
}

// RestartCount is the container's restart count as kubelet shows it: the
// count kubelet's annotation on its newest instance carries, else that
// instance's attempt; 0 before any instance. The agent's next instance of
// an owned container is one more.
func (c *Container) RestartCount() int32 {
	cur := c.Current
	if cur == nil {
		return 0
	}
	if _, ok := cur.Annotations[podconfig.AnnotationRestartCount]; ok {
		return int32(podconfig.RestartCount(cur.Annotations))
	}
	return int32(cur.Attempt)
}

// write turns s into the report's ContainerStatus.
func (s apiStatus) write() ContainerStatus {
	var out ContainerStatus
	switch {
	case s.completed:
		out.State.Terminated = &StateTerminated{Reason: reasonCompleted, Message: messageInitStatusLost}
	case s.of != nil:
		out.State = instanceState(s.of)
	default:
		out.State.Waiting = &StateWaiting{Reason: s.reason, Message: s.message}
	}
	if s.last != nil {
		out.LastState = instanceState(s.last)
	}
	return out
}

// instanceState is kubelet's convertContainerStatus of one instance.
func instanceState(i *cri.Container) ContainerState {
	switch i.State {
	case cri.StateRunning:
		return ContainerState{Running: &StateRunning{StartedAt: i.StartedAt}}
	case cri.StateExited:
		return ContainerState{Terminated: &StateTerminated{ExitCode: i.ExitCode, Reason: i.Reason, Message: i.Message,
			StartedAt: i.StartedAt, FinishedAt: i.FinishedAt, ContainerID: i.ID}}
	default:
		return ContainerState{Waiting: &StateWaiting{}}
	}
}

// newestSandbox is the pod's newest sandbox by creation (kubelet's
// SandboxStatuses[0]), whatever its state; nil for none.
func newestSandbox(p *Pod) *cri.Pod {
	var newest *cri.Pod
	for _, sb := range p.Sandboxes {
		if newest == nil || sb.CreatedAt.After(newest.CreatedAt) {
			newest = sb
		}
	}
	return newest
}
