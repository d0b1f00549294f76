package pods

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

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

// Kubelet's status of a container that did not end in a terminated state
// when its pod terminated (the status manager's TerminatePod).
const (
	ReasonStatusUnknown = "ContainerStatusUnknown"
	messageNotLocated   = "The container could not be located when the pod was terminated"
	exitStatusUnknown   = 137
)

// Kubelet's status of a container removed to restart every container of
// its pod in place (RestartAllContainers, kubelet_pods.go).
const (
	ReasonRestartingAllContainers = "RestartingAllContainers"
	messageRestartingAll          = "The container is removed because RestartAllContainers in place"
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
	// unknown: a container not terminated when its pod terminated, which
	// kubelet then shows as terminated with 137 (terminatedStatuses).
	unknown bool
	// reason and message of a waiting state (the default's, or the pod
	// sync's).
	reason, message string
	// last is the instance the last termination state shows; nil: none.
	last *cri.Container
	// lastReset: the last termination state is the container's removal
	// by a RestartAllContainers reset (its instances gone, nothing newer
	// exited since), which kubelet carries over from its previous status.
	lastReset bool
}

func (s apiStatus) running() bool    { return s.kind == stateRunning }
func (s apiStatus) terminated() bool { return s.kind == stateTerminated }

// exitCode is a terminated state's exit code.
func (s apiStatus) exitCode() int32 {
	if s.unknown {
		return exitStatusUnknown
	}
	if s.of == nil {
		return 0
	}
	return s.of.ExitCode
}

// lastExit is the exit code of the last termination state, if it is a
// termination (kubelet's LastTerminationState.Terminated).
func (s apiStatus) lastExit() (int32, bool) {
	if s.lastReset {
		return exitStatusUnknown, true
	}
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

// statusOf is convertToAPIContainerStatuses for one container of pod p,
// with what the pod's syncs add (added).
func statusOf(p *Pod, c *Container, in initFacts, added PodStatus) apiStatus {
	waiting := added.waiting(c.Name)
	s := runtimeStatus(p, c, in, waiting)
	if added.reset(c.Name) != nil && s.last == nil {
		// Reset and no newer exit since: kubelet carries the removal over
		// from its previous status as the last termination state, and a
		// container not made again yet waits with it (not missing).
		s.lastReset, s.missing = true, false
		if s.kind == stateWaiting && s.of == nil && waiting == nil && restartAllExit(p) != nil {
			s.reason, s.message = ReasonRestartingAllContainers, messageRestartingAll
		}
	}
	return s
}

// runtimeStatus is statusOf from the runtime's instances and the pod
// sync's waiting reason (nil: none).
func runtimeStatus(p *Pod, c *Container, in initFacts, waiting *Waiting) apiStatus {
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
	if waiting != nil && shouldStart(p, c) {
		last := s.last
		if s.terminated() {
			last = s.of
		}
		s = apiStatus{kind: stateWaiting, reason: waiting.Reason, message: waiting.Message, last: last, missing: s.missing}
	}
	return s
}

// restartAllExit is kuberuntime's ShouldAllContainersRestart over the
// runtime's state: the exit of a container's newest instance with a code
// its rules answer with RestartAllContainers (the pod sync then removes
// every instance, that one last); nil if there is none.
func restartAllExit(p *Pod) *cri.Container {
	for _, c := range p.Containers {
		if cur := c.Current; cur != nil && cur.State == cri.StateExited && inSpec(p, c) && c.Spec.RestartsAll(cur.ExitCode) {
			return cur
		}
	}
	return nil
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
// made with kubelet's annotations) counts by its attempt; after a reset
// (nil: none), never below the count it kept.
func restartCount(c *Container, reset *Reset) int32 {
	n := c.RestartCount()
	if reset != nil {
		n = max(n, reset.RestartCount) // kubelet's: never below its previous status's
	}
	return n
}

// RestartCount is the container's restart count as kubelet shows it: the
// count kubelet's annotation on its newest instance carries, else that
// instance's attempt; 0 before any instance. The agent's next instance of
// a static pod's container is one more.
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

// SetRestartCount sets kubelet's restart count annotation to n in the
// annotations of an instance copied from another's config, when they
// carry it (an instance made with kubelet's annotations): the copy's
// restart count is its attempt, as RestartCount reads it back.
func SetRestartCount(annotations map[string]string, n uint32) {
	if _, ok := annotations[podconfig.AnnotationRestartCount]; ok {
		annotations[podconfig.AnnotationRestartCount] = strconv.FormatUint(uint64(n), 10)
	}
}

// write turns s into the report's ContainerStatus.
func (s apiStatus) write() ContainerStatus {
	var out ContainerStatus
	switch {
	case s.completed:
		out.State.Terminated = &StateTerminated{Reason: reasonCompleted, Message: messageInitStatusLost}
	case s.unknown:
		out.State.Terminated = &StateTerminated{ExitCode: exitStatusUnknown, Reason: ReasonStatusUnknown, Message: messageNotLocated}
	case s.of != nil:
		out.State = instanceState(s.of)
	default:
		out.State.Waiting = &StateWaiting{Reason: s.reason, Message: s.message}
	}
	switch {
	case s.lastReset:
		out.LastState.Terminated = &StateTerminated{ExitCode: exitStatusUnknown, Reason: ReasonRestartingAllContainers, Message: messageRestartingAll}
	case s.last != nil:
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

// terminatedStatuses is kubelet's TerminatePod, which marks the final
// status of a pod once it terminated (phase Failed or Succeeded, nothing
// running): a container that is not terminated, one of an initialized pod
// or an init container that tried to start, is shown terminated with 137,
// ContainerStatusUnknown (a container in back-off when the pod's deadline
// passed, one whose image never came). It returns the statuses it
// changes; the phase, readiness and conditions stay as they were.
func terminatedStatuses(p *Pod, phase corev1.PodPhase, statuses map[*Container]apiStatus, started map[*Container]bool) map[*Container]apiStatus {
	if phase != corev1.PodFailed && phase != corev1.PodSucceeded {
		return nil
	}
	var inits, regular []*Container
	for _, c := range p.Containers {
		if !inSpec(p, c) {
			continue
		}
		if c.Running() {
			return nil // not terminated yet
		}
		if c.Kind.IsInit() {
			inits = append(inits, c)
		} else {
			regular = append(regular, c)
		}
	}
	changed := map[*Container]apiStatus{}
	unknown := func(c *Container) {
		if s := statuses[c]; !s.terminated() {
			changed[c] = apiStatus{kind: stateTerminated, unknown: true, last: s.last, lastReset: s.lastReset}
		}
	}
	if hasPodInitialized(p, inits, regular, statuses, started) {
		for _, c := range regular {
			unknown(c)
		}
	}
	for _, c := range initializedContainers(inits, statuses) {
		unknown(c)
	}
	return changed
}

// hasPodInitialized is the status manager's: a pod without init
// containers, or one whose status shows a container that left waiting or
// its last init container done. Kubelet reads the pod object's status,
// which for a static pod (one the agent makes) is never filled: so a static pod
// with init containers never counts as initialized there.
func hasPodInitialized(p *Pod, inits, regular []*Container, statuses map[*Container]apiStatus, started map[*Container]bool) bool {
	if len(inits) == 0 {
		return true
	}
	if p.Static {
		return false
	}
	for _, c := range regular {
		if s := statuses[c]; s.kind != stateWaiting || s.last != nil && s.last.State == cri.StateExited {
			return true
		}
	}
	last := inits[len(inits)-1]
	s := statuses[last]
	if last.Kind == spec.Sidecar {
		return s.running() && started[last]
	}
	if exit, ok := s.lastExit(); ok && exit == 0 {
		return true
	}
	return s.terminated() && s.exitCode() == 0
}

// initializedContainers is the status manager's: the init containers but
// the trailing ones that never left waiting (at least the first).
func initializedContainers(inits []*Container, statuses map[*Container]apiStatus) []*Container {
	for i := len(inits) - 1; i >= 0; i-- {
		s := statuses[inits[i]]
		if _, lastTerminated := s.lastExit(); s.kind != stateWaiting || lastTerminated {
			return inits[:i+1]
		}
	}
	return inits[:min(len(inits), 1)]
}

// newestSandbox is the pod's newest sandbox by creation (kubelet's
// SandboxStatuses[0]), whatever its state; nil for none.
func newestSandbox(p *Pod) *cri.Sandbox {
	var newest *cri.Sandbox
	for _, sb := range p.Sandboxes {
		if newest == nil || sb.CreatedAt.After(newest.CreatedAt) {
			newest = sb
		}
	}
	return newest
}
