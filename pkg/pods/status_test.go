package pods

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// inst is an instance of a container in sandbox sb1: created at
// created, started a second later, exited (with exit) a second after
// that.
func inst(id string, state cri.ContainerState, created int, exit int32) *cri.Container {
	i := &cri.Container{ID: id, SandboxID: "sb1", Name: id, State: state, CreatedAt: at(created)}
	if state == cri.StateRunning || state == cri.StateExited {
		i.StartedAt = at(created + 1)
	}
	if state == cri.StateExited {
		i.FinishedAt, i.ExitCode, i.Reason = at(created+2), exit, "Completed"
		if exit != 0 {
			i.Reason = "Error"
		}
	}
	return i
}

// pcont is a container of a pod shape: its kind and its instances (newest
// first).
func pcont(name string, kind spec.Kind, instances ...*cri.Container) *Container {
	c := &Container{Name: name, Kind: kind, Spec: &spec.Container{Name: name, Kind: kind}, Managed: true, Instances: instances}
	if len(instances) > 0 {
		c.Current = instances[0]
	}
	return c
}

// waitingIn is what the pod sync adds to a pod whose container name waits
// with reason and message.
func waitingIn(name, reason, message string) PodStatus {
	return PodStatus{Waiting: map[string]Waiting{name: {Reason: reason, Message: message}}}
}

// podOf is a pod of a ready sandbox sb1 (IP 10.0.0.1) made at t0, with
// these containers and restart policy (Always if "").
func podOf(policy corev1.RestartPolicy, containers ...*Container) *Pod {
	if policy == "" {
		policy = corev1.RestartPolicyAlways
	}
	sb := sandbox("sb1", "web", "u", true, 0)
	return &Pod{Key: "u", Namespace: "ns", Name: "web", UID: "u", Sandbox: sb, Sandboxes: []*cri.Sandbox{sb},
		Policy: spec.PodPolicy{RestartPolicy: policy}, Containers: containers}
}

func waitingState(reason, message string) ContainerState {
	return ContainerState{Waiting: &StateWaiting{Reason: reason, Message: message}}
}

func runningState(started int) ContainerState {
	return ContainerState{Running: &StateRunning{StartedAt: at(started)}}
}

func terminatedState(id string, created int, exit int32, reason string) ContainerState {
	return ContainerState{Terminated: &StateTerminated{ExitCode: exit, Reason: reason, StartedAt: at(created + 1), FinishedAt: at(created + 2), ContainerID: id}}
}

// kubelet 1.36's convertToAPIContainerStatuses, row by row: "pod shape →
// the container's state and last state".
func TestContainerStatus(t *testing.T) {
	never := corev1.RestartPolicyNever
	oom := inst("c1", cri.StateExited, 10, 137)
	oom.Reason, oom.Message = "OOMKilled", "out of memory: the app's last words"
	tests := []struct {
		name      string
		pod       *Pod
		added     PodStatus // what the pod sync adds
		container string
		want      ContainerStatus
	}{
		{name: "no instance yet, no init containers → ContainerCreating", container: "app",
			pod:  podOf("", pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState(ReasonContainerCreating, "")}},
		{name: "no instance yet, the pod has init containers → PodInitializing", container: "app",
			pod:  podOf("", pcont("init1", spec.Init, inst("i1", cri.StateRunning, 1, 0)), pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState(ReasonPodInitializing, "")}},
		{name: "its init containers completed, no instance yet → still PodInitializing", container: "app",
			pod:  podOf("", pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 0)), pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState(ReasonPodInitializing, "")}},
		{name: "a sidecar is an init container → PodInitializing", container: "app",
			pod:  podOf("", pcont("proxy", spec.Sidecar), pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState(ReasonPodInitializing, "")}},
		{name: "an init container not made yet → PodInitializing too", container: "init2",
			pod:  podOf("", pcont("init1", spec.Init, inst("i1", cri.StateRunning, 1, 0)), pcont("init2", spec.Init), pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState(ReasonPodInitializing, "")}},
		{name: "running → running since its start", container: "app",
			pod:  podOf("", pcont("app", spec.Regular, inst("c1", cri.StateRunning, 10, 0))),
			want: ContainerStatus{State: runningState(11)}},
		{name: "running after an exit → the exit as last state", container: "app",
			pod:  podOf("", pcont("app", spec.Regular, inst("c2", cri.StateRunning, 10, 0), inst("c1", cri.StateExited, 5, 1))),
			want: ContainerStatus{State: runningState(11), LastState: terminatedState("c1", 5, 1, "Error")}},
		{name: "only the instance before counts, not older ones", container: "app",
			pod: podOf("", pcont("app", spec.Regular, inst("c3", cri.StateRunning, 20, 0), inst("c2", cri.StateExited, 10, 2),
				inst("c1", cri.StateExited, 5, 1))),
			want: ContainerStatus{State: runningState(21), LastState: terminatedState("c2", 10, 2, "Error")}},
		{name: "created, not started → waiting with no reason", container: "app",
			pod:  podOf("", pcont("app", spec.Regular, inst("c1", cri.StateCreated, 10, 0))),
			want: ContainerStatus{State: ContainerState{Waiting: &StateWaiting{}}}},
		{name: "created after an exit → waiting with no reason, the exit as last state", container: "app",
			pod:  podOf("", pcont("app", spec.Regular, inst("c2", cri.StateCreated, 10, 0), inst("c1", cri.StateExited, 5, 3))),
			want: ContainerStatus{State: ContainerState{Waiting: &StateWaiting{}}, LastState: terminatedState("c1", 5, 3, "Error")}},
		{name: "exited, not restarted (Never) → terminated", container: "app",
			pod:  podOf(never, pcont("app", spec.Regular, inst("c1", cri.StateExited, 10, 0))),
			want: ContainerStatus{State: terminatedState("c1", 10, 0, "Completed")}},
		{name: "OOMKilled, with its termination message → terminated as the runtime says", container: "app",
			pod: podOf(never, pcont("app", spec.Regular, oom)),
			want: ContainerStatus{State: ContainerState{Terminated: &StateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: "out of memory: the app's last words",
				StartedAt: at(11), FinishedAt: at(12), ContainerID: "c1"}}}},
		{name: "exited and in back-off → CrashLoopBackOff, the exit as last state", container: "app", added: waitingIn("app", "CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_ns(u)"),
			pod: podOf("", pcont("app", spec.Regular, inst("c2", cri.StateExited, 10, 1), inst("c1", cri.StateExited, 5, 1))),
			want: ContainerStatus{State: waitingState("CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_ns(u)"),
				LastState: terminatedState("c2", 10, 1, "Error")}},
		{name: "image not pulled, no instance → ErrImagePull", container: "app", added: waitingIn("app", "ErrImagePull", `failed to pull image "x": not found`),
			pod:  podOf("", pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState("ErrImagePull", `failed to pull image "x": not found`)}},
		{name: "image pull backing off → ImagePullBackOff", container: "app", added: waitingIn("app", "ImagePullBackOff", `Back-off pulling image "x"`),
			pod:  podOf("", pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState("ImagePullBackOff", `Back-off pulling image "x"`)}},
		{name: "pull policy Never, image absent → ErrImageNeverPull", container: "app", added: waitingIn("app", "ErrImageNeverPull", `Container image "x" is not present with pull policy of Never`),
			pod:  podOf("", pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState("ErrImageNeverPull", `Container image "x" is not present with pull policy of Never`)}},
		{name: "config not made → CreateContainerConfigError", container: "app", added: waitingIn("app", "CreateContainerConfigError", `secret "s" not found`),
			pod:  podOf("", pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState("CreateContainerConfigError", `secret "s" not found`)}},
		{name: "created, start failed → RunContainerError over the created instance", container: "app", added: waitingIn("app", "RunContainerError", "exec: not found"),
			pod:  podOf("", pcont("app", spec.Regular, inst("c1", cri.StateCreated, 10, 0))),
			want: ContainerStatus{State: waitingState("RunContainerError", "exec: not found")}},
		{name: "a waiting reason does not hide a running instance", container: "app", added: waitingIn("app", "CrashLoopBackOff", "stale"),
			pod:  podOf("", pcont("app", spec.Regular, inst("c1", cri.StateRunning, 10, 0))),
			want: ContainerStatus{State: runningState(11)}},
		{name: "nor an exit that is not restarted (Never)", container: "app", added: waitingIn("app", "CrashLoopBackOff", "stale"),
			pod:  podOf(never, pcont("app", spec.Regular, inst("c1", cri.StateExited, 10, 1))),
			want: ContainerStatus{State: terminatedState("c1", 10, 1, "Error")}},
		{name: "nor an init container that completed", container: "init1", added: waitingIn("init1", "CrashLoopBackOff", "stale"),
			pod:  podOf("", pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 0)), pcont("app", spec.Regular)),
			want: ContainerStatus{State: terminatedState("i1", 1, 0, "Completed")}},
		{name: "a failed init container in back-off → CrashLoopBackOff", container: "init1", added: waitingIn("init1", "CrashLoopBackOff", "back-off"),
			pod:  podOf("", pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 1)), pcont("app", spec.Regular)),
			want: ContainerStatus{State: waitingState("CrashLoopBackOff", "back-off"), LastState: terminatedState("i1", 1, 1, "Error")}},
		{name: "a pod being deleted → no waiting reason", container: "app", added: waitingIn("app", "CrashLoopBackOff", "back-off"),
			pod: func() *Pod {
				p := podOf("", pcont("app", spec.Regular, inst("c1", cri.StateExited, 10, 1)))
				p.Terminating = true
				return p
			}(),
			want: ContainerStatus{State: terminatedState("c1", 10, 1, "Error")}},
		{name: "an init container the runtime lost after the app was made → Completed", container: "init1",
			pod: podOf("", pcont("init1", spec.Init), pcont("app", spec.Regular, inst("c1", cri.StateRunning, 10, 0))),
			want: ContainerStatus{State: ContainerState{Terminated: &StateTerminated{Reason: "Completed",
				Message: "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"}}}},
		{name: "a sidecar the runtime lost → PodInitializing (kubelet restarts it)", container: "proxy",
			pod:  podOf("", pcont("proxy", spec.Sidecar), pcont("app", spec.Regular, inst("c1", cri.StateRunning, 10, 0))),
			want: ContainerStatus{State: waitingState(ReasonPodInitializing, "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReportPod(tt.pod, tt.added, results.NewStore(), GateSet{})
			for _, c := range r.Containers {
				if c.Name == tt.container {
					assert.Equal(t, tt.want, c.Status)
					return
				}
			}
			t.Fatalf("no container %s", tt.container)
		})
	}
}

// kubelet's restart count: the annotation on the newest instance
// (toKubeContainerStatus), else the attempt.
func TestRestartCount(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		attempt     uint32
		want        int32
	}{
		{"made by kubelet: its annotation", map[string]string{podconfig.AnnotationRestartCount: "5"}, 2, 5},
		{"no annotation: the attempt", nil, 3, 3},
		{"the agent's replacement of another's instance: its annotation, which the agent sets to its attempt",
			map[string]string{podconfig.AnnotationRestartCount: "1", cri.AnnotationRestartOf: "c0"}, 1, 1},
		{"an annotation that is not a number: 0, as kubelet's getIntValueFromLabel", map[string]string{podconfig.AnnotationRestartCount: "x"}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := inst("c1", cri.StateRunning, 1, 0)
			i.Annotations, i.Attempt = tt.annotations, tt.attempt
			r := ReportPod(podOf("", pcont("app", spec.Regular, i)), PodStatus{}, results.NewStore(), GateSet{})
			assert.Equal(t, tt.want, r.Containers[0].RestartCount)
		})
	}
	r := ReportPod(podOf("", pcont("app", spec.Regular)), PodStatus{}, results.NewStore(), GateSet{})
	assert.Equal(t, int32(0), r.Containers[0].RestartCount, "no instance: 0")
}

// cond is a condition as the tests compare it.
type cond struct {
	Status          corev1.ConditionStatus
	Reason, Message string
}

// kubelet 1.36's conditions for a pod of its node (generateAPIPodStatus
// with pkg/kubelet/status/generate.go), row by row: "pod shape → each
// condition".
func TestConditions(t *testing.T) {
	never := corev1.RestartPolicyNever
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	allTrue := map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: T}, corev1.PodInitialized: {Status: T},
		corev1.PodReady: {Status: T}, corev1.ContainersReady: {Status: T}, corev1.PodScheduled: {Status: T}}
	with := func(changes map[corev1.PodConditionType]cond) map[corev1.PodConditionType]cond {
		out := map[corev1.PodConditionType]cond{}
		for k, v := range allTrue {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	notReady := func(reason, message string) map[corev1.PodConditionType]cond {
		return with(map[corev1.PodConditionType]cond{corev1.PodReady: {F, reason, message}, corev1.ContainersReady: {F, reason, message}})
	}
	app := func() *Container { return pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0)) }
	gated := func(gates ...corev1.PodConditionType) *Pod {
		p := podOf("", app())
		p.Manifest = &spec.Pod{Containers: []spec.Container{{Name: "app"}}, Object: &corev1.Pod{}}
		for _, g := range gates {
			p.Manifest.Object.Spec.ReadinessGates = append(p.Manifest.Object.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
		}
		return p
	}
	tests := []struct {
		name string
		pod  *Pod
		want map[corev1.PodConditionType]cond
	}{
		{name: "a ready sandbox and every container ready → all True", pod: podOf("", app()), want: allTrue},
		{name: "an owned pod with no sandbox yet → not ready to start containers", pod: func() *Pod {
			p := podOf("", pcont("app", spec.Regular))
			p.Sandbox, p.Sandboxes, p.Static = nil, nil, true
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F},
			corev1.PodReady:        {F, ReasonContainersNotReady, "containers with unready status: [app]"},
			corev1.ContainersReady: {F, ReasonContainersNotReady, "containers with unready status: [app]"}})},
		{name: "the sandbox stopped → not ready to start containers", pod: func() *Pod {
			p := podOf("", app())
			p.Sandbox = sandbox("sb1", "web", "u", false, 0)
			p.Sandboxes = []*cri.Sandbox{p.Sandbox}
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F}})},
		{name: "a newer sandbox not ready beside a ready one → not ready to start containers", pod: func() *Pod {
			p := podOf("", app())
			p.Sandboxes = append(p.Sandboxes, sandbox("sb2", "web", "u", false, 5))
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F}})},
		{name: "two ready sandboxes → not ready to start containers", pod: func() *Pod {
			p := podOf("", app())
			p.Sandboxes = append(p.Sandboxes, sandbox("sb2", "web", "u", true, 5))
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F}})},
		{name: "a sandbox without an IP → not ready to start containers", pod: func() *Pod {
			p := podOf("", app())
			p.Sandbox.IPs = nil
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F}})},
		{name: "on the node's network, no IP → ready to start containers", pod: func() *Pod {
			p := podOf("", app())
			p.Sandbox.IPs, p.Sandbox.HostNetwork = nil, true
			return p
		}(), want: allTrue},
		{name: "an init container running → not initialized, containers with incomplete status", pod: podOf("",
			pcont("init1", spec.Init, inst("i1", cri.StateRunning, 1, 0)), pcont("app", spec.Regular)),
			want: with(map[corev1.PodConditionType]cond{corev1.PodInitialized: {F, ReasonContainersNotInitialized, "containers with incomplete status: [init1]"},
				corev1.PodReady:        {F, ReasonContainersNotReady, "containers with unready status: [app]"},
				corev1.ContainersReady: {F, ReasonContainersNotReady, "containers with unready status: [app]"}})},
		{name: "init containers not done and a sidecar not started → all of them, in order", pod: podOf("",
			pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 1)), pcont("proxy", spec.Sidecar), pcont("init2", spec.Init), pcont("app", spec.Regular)),
			want: with(map[corev1.PodConditionType]cond{corev1.PodInitialized: {F, ReasonContainersNotInitialized, "containers with incomplete status: [init1 proxy init2]"},
				corev1.PodReady:        {F, ReasonContainersNotReady, "containers with unready status: [proxy app]"},
				corev1.ContainersReady: {F, ReasonContainersNotReady, "containers with unready status: [proxy app]"}})},
		{name: "init container completed and sidecar started → initialized", pod: podOf("",
			pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 0)), pcont("proxy", spec.Sidecar, inst("p1", cri.StateRunning, 4, 0)), app()),
			want: allTrue},
		{name: "a regular container ran: initialized while its sidecar restarts", pod: podOf("",
			pcont("proxy", spec.Sidecar, inst("p2", cri.StateCreated, 20, 0), inst("p1", cri.StateExited, 4, 1)), app()),
			want: notReady(ReasonContainersNotReady, "containers with unready status: [proxy]")},
		{name: "an init container the runtime lost after the app started → initialized", pod: podOf("", pcont("init1", spec.Init), app()),
			want: allTrue},
		{name: "an app not ready → containers with unready status", pod: podOf("", app(), pcont("worker", spec.Regular, inst("w1", cri.StateExited, 3, 1))),
			want: notReady(ReasonContainersNotReady, "containers with unready status: [worker]")},
		{name: "completed (Never, all exited 0) → PodCompleted", pod: podOf(never, pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 0)),
			pcont("app", spec.Regular, inst("a1", cri.StateExited, 10, 0))),
			want: with(map[corev1.PodConditionType]cond{corev1.PodInitialized: {T, ReasonPodCompleted, ""},
				corev1.PodReady: {F, ReasonPodCompleted, ""}, corev1.ContainersReady: {F, ReasonPodCompleted, ""}})},
		{name: "failed (Never, an exit 1) → PodFailed", pod: podOf(never, pcont("app", spec.Regular, inst("a1", cri.StateExited, 10, 1))),
			want: notReady(ReasonPodFailed, "")},
		{name: "DeadlineExceeded → failed: PodFailed though every container runs", pod: func() *Pod {
			p := podOf("", app())
			p.Reason, p.Message = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
			return p
		}(), want: notReady(ReasonPodFailed, "")},
		{name: "no container in the View → UnknownContainerStatuses", pod: podOf(""),
			want: notReady(ReasonUnknownContainerStatuses, "")},
		{name: "a readiness gate → never Ready, ReadinessGatesNotReady", pod: gated("example.com/lb"),
			want: with(map[corev1.PodConditionType]cond{corev1.PodReady: {F, ReasonReadinessGatesNotReady,
				`corresponding condition of pod readiness gate "example.com/lb" does not exist.`}})},
		{name: "two readiness gates → both said", pod: gated("x", "y"),
			want: with(map[corev1.PodConditionType]cond{corev1.PodReady: {F, ReasonReadinessGatesNotReady,
				`corresponding condition of pod readiness gate "x" does not exist., corresponding condition of pod readiness gate "y" does not exist.`}})},
		{name: "a readiness gate on a kubelet condition set before Ready → met", pod: gated(corev1.PodInitialized), want: allTrue},
		{name: "a readiness gate on a kubelet condition that is False → not met", pod: func() *Pod {
			p := gated(corev1.PodReadyToStartContainers)
			p.Sandbox.IPs = nil
			return p
		}(), want: with(map[corev1.PodConditionType]cond{corev1.PodReadyToStartContainers: {Status: F},
			corev1.PodReady: {F, ReasonReadinessGatesNotReady, `the status of pod readiness gate "PodReadyToStartContainers" is not "True", but False`}})},
		{name: "readiness gates do not mask containers not ready", pod: func() *Pod {
			p := gated("x")
			p.Containers[0].Current.State = cri.StateExited
			return p
		}(), want: notReady(ReasonContainersNotReady, "containers with unready status: [app]")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReportPod(tt.pod, PodStatus{}, results.NewStore(), GateSet{})
			var types []corev1.PodConditionType
			got := map[corev1.PodConditionType]cond{}
			for _, c := range r.Conditions {
				types = append(types, c.Type)
				got[c.Type] = cond{c.Status, c.Reason, c.Message}
			}
			assert.Equal(t, []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady,
				corev1.PodScheduled}, types, "kubelet's order")
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got[corev1.PodReady].Status == T, r.Ready, "Ready is the Ready condition")
		})
	}
}

// When each condition became so, as the agent knows it: the runtime's
// times the condition rests on.
func TestConditionTimes(t *testing.T) {
	p := podOf("", pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 0)),
		pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0)), pcont("worker", spec.Regular, inst("w1", cri.StateExited, 4, 1)))
	p.Sandboxes = append(p.Sandboxes, sandbox("sb0", "web", "u", false, -60))
	p.StartTime = at(-60) // as Resolve sets it: the first sandbox's creation
	times := map[corev1.PodConditionType]time.Time{}
	for _, c := range ReportPod(p, PodStatus{}, results.NewStore(), GateSet{}).Conditions {
		times[c.Type] = c.LastTransitionTime
	}
	assert.Equal(t, at(-60), times[corev1.PodScheduled], "the pod's start: its first sandbox")
	assert.Equal(t, at(0), times[corev1.PodReadyToStartContainers], "the current sandbox's creation")
	assert.Equal(t, at(3), times[corev1.PodInitialized], "the init container's exit")
	assert.Equal(t, at(6), times[corev1.ContainersReady], "the unready container's exit")
	assert.Equal(t, at(6), times[corev1.PodReady])

	p.StartTime = at(-30)
	p.Containers[2] = pcont("worker", spec.Regular, inst("w2", cri.StateRunning, 20, 0), inst("w1", cri.StateExited, 4, 1))
	times = map[corev1.PodConditionType]time.Time{}
	for _, c := range ReportPod(p, PodStatus{}, results.NewStore(), GateSet{}).Conditions {
		times[c.Type] = c.LastTransitionTime
	}
	assert.Equal(t, at(-30), times[corev1.PodScheduled], "the start time the pod sync set")
	assert.Equal(t, at(21), times[corev1.ContainersReady], "ready since the last container started")
}

// A pod failed as a whole (DeadlineExceeded) is Failed with kubelet's
// reason and message, whatever its containers do.
func TestDeadlineExceeded(t *testing.T) {
	p := podOf("", pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0)))
	p.Reason, p.Message = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
	r := ReportPod(p, PodStatus{}, results.NewStore(), GateSet{})
	assert.Equal(t, corev1.PodFailed, r.Phase)
	assert.Equal(t, "DeadlineExceeded", r.Reason)
	assert.Equal(t, "Pod was active on the node longer than the specified deadline", r.Message)
	assert.False(t, r.Ready)
	assert.Equal(t, corev1.PodFailed, phase(p, PodStatus{}, func(c *Container) bool { return c.Running() }), "one rule for the phase")
}

// kubelet's TerminatePod, once a pod terminated: a container not
// terminated shows terminated with 137 (ContainerStatusUnknown), in a pod
// that initialized, and an init container that tried to start; the phase
// stays. Compared with kubelet 1.36.3 on static pods (a static pod with
// init containers never counts as initialized: a static pod's object has
// no status).
func TestTerminatedPodStatuses(t *testing.T) {
	unknown := func(last *ContainerState) ContainerStatus {
		s := ContainerStatus{State: ContainerState{Terminated: &StateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated"}}}
		if last != nil {
			s.LastState = *last
		}
		return s
	}
	exit1 := terminatedState("f1", 5, 1, "Error")
	deadline := func(p *Pod) *Pod {
		p.Reason = ReasonDeadlineExceeded
		return p
	}
	owned := func(p *Pod) *Pod {
		p.Static = true
		return p
	}
	backingOff := func() *Container { return pcont("fail", spec.Regular, inst("f1", cri.StateExited, 5, 1)) }
	noImage := func() *Container { return pcont("nopull", spec.Regular) }
	// What the pod sync adds: why backingOff and noImage wait.
	backingOffWaits := waitingIn("fail", "CrashLoopBackOff", "back-off 10s")
	bothWait := PodStatus{Waiting: map[string]Waiting{"fail": backingOffWaits.Waiting["fail"], "nopull": {Reason: "ErrImageNeverPull", Message: "not present"}}}
	tests := []struct {
		name  string
		pod   *Pod
		added PodStatus
		want  map[string]ContainerStatus
	}{
		{name: "past its deadline, no init containers: the ones waiting are unknown, the last exit kept", added: bothWait,
			pod: deadline(podOf(corev1.RestartPolicyOnFailure, pcont("app", spec.Regular, inst("a1", cri.StateExited, 1, 0)), backingOff(), noImage())),
			want: map[string]ContainerStatus{
				"app":    {State: terminatedState("a1", 1, 0, "Completed")},
				"fail":   unknown(&exit1),
				"nopull": unknown(nil),
			}},
		{name: "an owned pod with init containers: its regular containers stay as they were", added: bothWait,
			pod: owned(deadline(podOf(corev1.RestartPolicyOnFailure, pcont("init", spec.Init, inst("i1", cri.StateExited, 0, 0)), backingOff(), noImage()))),
			want: map[string]ContainerStatus{
				"init":   {State: terminatedState("i1", 0, 0, "Completed")},
				"fail":   {State: waitingState("CrashLoopBackOff", "back-off 10s"), LastState: exit1},
				"nopull": waitingStatus("ErrImageNeverPull", "not present"),
			}},
		{name: "a pod someone else made, initialized (its init container completed): every container", added: bothWait,
			pod: deadline(podOf(corev1.RestartPolicyOnFailure, pcont("init", spec.Init, inst("i1", cri.StateExited, 0, 0)), backingOff(), noImage())),
			want: map[string]ContainerStatus{
				"init":   {State: terminatedState("i1", 0, 0, "Completed")},
				"fail":   unknown(&exit1),
				"nopull": unknown(nil),
			}},
		{name: "init containers: the ones that tried to start, at least the first", added: waitingIn("init1", "CrashLoopBackOff", "back-off"),
			pod: owned(deadline(podOf(corev1.RestartPolicyAlways,
				pcont("init1", spec.Init, inst("i1", cri.StateExited, 0, 1)),
				pcont("init2", spec.Init), pcont("app", spec.Regular)))),
			want: map[string]ContainerStatus{
				"init1": unknown(&ContainerState{Terminated: terminatedState("i1", 0, 1, "Error").Terminated}),
				"init2": waitingStatus(ReasonPodInitializing, ""),
				"app":   waitingStatus(ReasonPodInitializing, ""),
			}},
		{name: "not while a container still runs", added: backingOffWaits,
			pod: deadline(podOf(corev1.RestartPolicyOnFailure, pcont("app", spec.Regular, inst("a1", cri.StateRunning, 1, 0)), backingOff())),
			want: map[string]ContainerStatus{
				"app":  {State: runningState(2)},
				"fail": {State: waitingState("CrashLoopBackOff", "back-off 10s"), LastState: exit1},
			}},
		{name: "not in a pod that is not terminal", added: backingOffWaits,
			pod: podOf(corev1.RestartPolicyOnFailure, backingOff()),
			want: map[string]ContainerStatus{
				"fail": {State: waitingState("CrashLoopBackOff", "back-off 10s"), LastState: exit1},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReportPod(tt.pod, tt.added, results.NewStore(), GateSet{})
			got := map[string]ContainerStatus{}
			for _, c := range r.Containers {
				got[c.Name] = c.Status
			}
			assert.Equal(t, tt.want, got)
			if tt.pod.Reason != "" {
				assert.Equal(t, corev1.PodFailed, r.Phase, "the phase stays")
			}
		})
	}
}

func waitingStatus(reason, message string) ContainerStatus {
	return ContainerStatus{State: waitingState(reason, message)}
}

// RestartAllContainers in place, as kubelet 1.36.3 showed it beside the
// agent: a removed container waits with RestartingAllContainers while the
// reset goes on, then as usual, with the removal as its last state (exit
// 137) and one more restart, until a newer instance exits; the pod is
// Running meanwhile, AllContainersRestarting True until the reset is done.
func TestRestartAllStatus(t *testing.T) {
	rules := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	never := corev1.ContainerRestartPolicyNever
	mainOf := func(instances ...*cri.Container) *Container {
		c := pcont("main", spec.Regular, instances...)
		c.Spec.RestartPolicy, c.Spec.RestartPolicyRules = &never, rules
		return c
	}
	// resetTo is what the pod sync adds to the pod once its reset removed
	// the named containers, each with restart count n.
	resetTo := func(n int32, names ...string) PodStatus {
		s := PodStatus{Resets: map[string]Reset{}}
		for _, name := range names {
			s.Resets[name] = Reset{RestartCount: n}
		}
		return s
	}
	removed := ContainerState{Terminated: &StateTerminated{ExitCode: 137, Reason: "RestartingAllContainers",
		Message: "The container is removed because RestartAllContainers in place"}}
	type want struct {
		status   ContainerStatus
		restarts int32
	}
	tests := []struct {
		name       string
		pod        *Pod
		added      PodStatus
		want       map[string]want
		phase      corev1.PodPhase
		restarting corev1.ConditionStatus
	}{
		{name: "main exited 42, nothing removed yet",
			pod: podOf("", pcont("init", spec.Init, inst("i1", cri.StateExited, 0, 0)), mainOf(inst("m1", cri.StateExited, 3, 42)),
				pcont("other", spec.Regular, inst("o1", cri.StateRunning, 3, 0))),
			want: map[string]want{
				"init":  {status: ContainerStatus{State: terminatedState("i1", 0, 0, "Completed")}},
				"main":  {status: ContainerStatus{State: terminatedState("m1", 3, 42, "Error")}},
				"other": {status: ContainerStatus{State: runningState(4)}},
			},
			phase: corev1.PodRunning, restarting: corev1.ConditionTrue},
		{name: "others removed, main last", added: resetTo(1, "init", "other"),
			pod: podOf("", pcont("init", spec.Init), mainOf(inst("m1", cri.StateExited, 3, 42)), pcont("other", spec.Regular)),
			want: map[string]want{
				// kubelet too: an init container gone while a regular one
				// has an instance counts as completed.
				"init": {status: ContainerStatus{State: ContainerState{Terminated: &StateTerminated{Reason: "Completed",
					Message: "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"}}, LastState: removed}, restarts: 1},
				"main":  {status: ContainerStatus{State: terminatedState("m1", 3, 42, "Error")}},
				"other": {status: ContainerStatus{State: waitingState("RestartingAllContainers", "The container is removed because RestartAllContainers in place"), LastState: removed}, restarts: 1},
			},
			phase: corev1.PodRunning, restarting: corev1.ConditionTrue},
		{name: "all removed: waiting as usual, the removal as last state", added: resetTo(1, "init", "main", "other"),
			pod: podOf("", pcont("init", spec.Init), mainOf(), pcont("other", spec.Regular)),
			want: map[string]want{
				"init":  {status: ContainerStatus{State: waitingState(ReasonPodInitializing, ""), LastState: removed}, restarts: 1},
				"main":  {status: ContainerStatus{State: waitingState(ReasonPodInitializing, ""), LastState: removed}, restarts: 1},
				"other": {status: ContainerStatus{State: waitingState(ReasonPodInitializing, ""), LastState: removed}, restarts: 1},
			},
			phase: corev1.PodRunning, restarting: corev1.ConditionFalse},
		{name: "started over: init runs, the others wait", added: resetTo(1, "init", "main", "other"),
			pod: podOf("", pcont("init", spec.Init, inst("i2", cri.StateRunning, 10, 0)), mainOf(), pcont("other", spec.Regular)),
			want: map[string]want{
				"init":  {status: ContainerStatus{State: runningState(11), LastState: removed}, restarts: 1},
				"main":  {status: ContainerStatus{State: waitingState(ReasonPodInitializing, ""), LastState: removed}, restarts: 1},
				"other": {status: ContainerStatus{State: waitingState(ReasonPodInitializing, ""), LastState: removed}, restarts: 1},
			},
			phase: corev1.PodPending, restarting: corev1.ConditionFalse},
		{name: "a newer exit replaces the removal as last state", added: resetTo(1, "init", "main", "other"),
			pod: podOf("", pcont("init", spec.Init, inst("i2", cri.StateExited, 10, 0)), mainOf(inst("m2", cri.StateRunning, 13, 0)),
				pcont("other", spec.Regular, inst("o3", cri.StateRunning, 20, 0), inst("o2", cri.StateExited, 13, 1))),
			want: map[string]want{
				"init":  {status: ContainerStatus{State: terminatedState("i2", 10, 0, "Completed"), LastState: removed}, restarts: 1},
				"main":  {status: ContainerStatus{State: runningState(14), LastState: removed}, restarts: 1},
				"other": {status: ContainerStatus{State: runningState(21), LastState: terminatedState("o2", 13, 1, "Error")}, restarts: 1},
			},
			phase: corev1.PodRunning, restarting: corev1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReportPod(tt.pod, tt.added, results.NewStore(), GateSet{})
			got := map[string]want{}
			for _, c := range r.Containers {
				got[c.Name] = want{status: c.Status, restarts: c.RestartCount}
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.phase, r.Phase)
			cond := r.Conditions[len(r.Conditions)-1]
			assert.Equal(t, corev1.AllContainersRestarting, cond.Type)
			assert.Equal(t, tt.restarting, cond.Status)
		})
	}
	plain := ReportPod(podOf("", pcont("app", spec.Regular, inst("a1", cri.StateRunning, 1, 0))), PodStatus{}, results.NewStore(), GateSet{})
	for _, c := range plain.Conditions {
		assert.NotEqual(t, corev1.AllContainersRestarting, c.Type, "only for a pod with a RestartAllContainers rule")
	}
}

// kubelet (RestartAllContainersOnContainerExits on) never turns a pod's
// Initialized condition back to False: a pod that initialized and starts
// over (in place, or in a new sandbox) stays initialized meanwhile.
func TestInitializedStaysOnceInitialized(t *testing.T) {
	initializing := func() *Pod {
		return podOf("", pcont("init", spec.Init, inst("i2", cri.StateRunning, 10, 0)), pcont("app", spec.Regular))
	}
	initialized := func(p *Pod, added PodStatus) corev1.ConditionStatus {
		for _, c := range ReportPod(p, added, results.NewStore(), GateSet{}).Conditions {
			if c.Type == corev1.PodInitialized {
				return c.Status
			}
		}
		t.Fatal("no Initialized condition")
		return ""
	}
	assert.Equal(t, corev1.ConditionFalse, initialized(initializing(), PodStatus{}), "never initialized: not yet")
	assert.Equal(t, corev1.ConditionTrue, initialized(initializing(), PodStatus{Initialized: true}), "initialized before: still")
}

// Readiness is one rule: the report's Ready, the Ready condition, and a
// probe's result feed it.
func TestReadyFollowsProbes(t *testing.T) {
	c := pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0))
	c.Spec.Readiness = &corev1.Probe{}
	p := podOf("", c)
	store := results.NewStore()
	r := ReportPod(p, PodStatus{}, store, GateSet{})
	require.False(t, r.Ready)
	assert.Equal(t, cond{corev1.ConditionFalse, ReasonContainersNotReady, "containers with unready status: [app]"},
		cond{r.Conditions[2].Status, r.Conditions[2].Reason, r.Conditions[2].Message})
	store.Set(results.Key{ContainerID: "a1", Type: results.Readiness}, results.Success, "u")
	r = ReportPod(p, PodStatus{}, store, GateSet{})
	assert.True(t, r.Ready)
	assert.Equal(t, corev1.ConditionTrue, r.Conditions[2].Status)
}

// getPhase's initialization rules over the statuses: "pod shape → phase".
func TestPhaseInitialization(t *testing.T) {
	never := corev1.RestartPolicyNever
	notStarted := func(c *Container) bool { return c.Kind != spec.Sidecar && c.Running() }
	inOldSandbox := inst("a1", cri.StateRunning, 10, 0)
	inOldSandbox.SandboxID = "sb0"
	tests := []struct {
		name  string
		pod   *Pod
		added PodStatus // what the pod sync adds
		want  corev1.PodPhase
	}{
		{name: "an init container the runtime lost after the app was made → running, not pending",
			pod: podOf(never, pcont("init1", spec.Init), pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0))), want: corev1.PodRunning},
		{name: "a sidecar not started yet, the app running in this sandbox → running (initialized before)",
			pod: podOf("", pcont("proxy", spec.Sidecar, inst("p1", cri.StateRunning, 20, 0)), pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0))), want: corev1.PodRunning},
		{name: "a sidecar not started yet, the app only in an old sandbox → pending",
			pod: podOf("", pcont("proxy", spec.Sidecar, inst("p1", cri.StateRunning, 20, 0)), pcont("app", spec.Regular, inOldSandbox)), want: corev1.PodPending},
		{name: "a failed init container in back-off under Never → failed", added: waitingIn("init1", "CrashLoopBackOff", ""),
			pod: podOf(never, pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 1)), pcont("app", spec.Regular)), want: corev1.PodFailed},
		{name: "a failed init container in back-off under Always → pending", added: waitingIn("init1", "CrashLoopBackOff", ""),
			pod: podOf("", pcont("init1", spec.Init, inst("i1", cri.StateExited, 1, 1)), pcont("app", spec.Regular)), want: corev1.PodPending},
		{name: "an app in back-off after a failure → running (restarting)", added: waitingIn("app", "CrashLoopBackOff", ""),
			pod: podOf("", pcont("app", spec.Regular, inst("a1", cri.StateExited, 1, 1))), want: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, phase(tt.pod, tt.added, notStarted))
			assert.Equal(t, terminal(tt.want), terminal(phase(tt.pod, tt.added, (*Container).Running)),
				"every sidecar started: terminal in both or in neither")
		})
	}
}
