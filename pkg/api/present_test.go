package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Container shapes as kubelet's status shows them.
func running(name string, ready bool) Container {
	started := t0
	return Container{Name: name, State: "Running", Ready: ready, Started: true, Status: ContainerStatus{State: ContainerState{Running: &StateRunning{StartedAt: &started}}}}
}

func waitingFor(name, reason string) Container {
	return Container{Name: name, State: "Waiting", Status: ContainerStatus{State: ContainerState{Waiting: &StateWaiting{Reason: reason}}}}
}

func exited(name string, code int32, reason string) Container {
	return Container{Name: name, State: "Exited", Status: ContainerStatus{State: ContainerState{Terminated: &StateTerminated{ExitCode: code, Reason: reason}}}}
}

func kind(k string, c Container) Container {
	c.Kind = k
	return c
}

func restarted(c Container, count int32, finished time.Time) Container {
	c.RestartCount = count
	c.Status.LastState = ContainerState{Terminated: &StateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: &finished}}
	return c
}

func conditionsOf(initialized, ready bool) []Condition {
	status := func(b bool) string { return map[bool]string{true: "True", false: "False"}[b] }
	return []Condition{{Type: "Initialized", Status: status(initialized)}, {Type: "Ready", Status: status(ready)}}
}

// kubectl 1.36's printPod (pkg/printers/internalversion/printers.go), row
// by row: "pod shape → READY, STATUS, RESTARTS".
func TestKubectlColumns(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	tests := []struct {
		name       string
		pod        Pod
		ready      string
		status     string
		restarts   string
		restartsOf int
	}{
		{name: "all running and ready → Running", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, true),
			Containers: []Container{running("a", true), running("b", true)}}, ready: "2/2", status: "Running", restarts: "0"},
		{name: "one not ready → Running, 1/2", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, false),
			Containers: []Container{running("a", true), running("b", false)}}, ready: "1/2", status: "Running", restarts: "0"},
		{name: "no instance yet → ContainerCreating", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false),
			Containers: []Container{waitingFor("a", "ContainerCreating")}}, ready: "0/1", status: "ContainerCreating", restarts: "0"},
		{name: "created, not started (no reason) → the phase", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false),
			Containers: []Container{waitingFor("a", "")}}, ready: "0/1", status: "Pending", restarts: "0"},
		{name: "init container running → Init:0/1", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", running("setup", false)), waitingFor("app", "PodInitializing")}}, ready: "0/1", status: "Init:0/1", restarts: "0"},
		{name: "second of two init containers not made → Init:1/2", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", exited("one", 0, "Completed")), kind("init", waitingFor("two", "PodInitializing")), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "Init:1/2", restarts: "0"},
		{name: "init container in back-off → Init:CrashLoopBackOff", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", restarted(waitingFor("setup", "CrashLoopBackOff"), 4, t0)), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "Init:CrashLoopBackOff", restarts: "4 (10m0s ago)", restartsOf: 4},
		{name: "init container image not pulled → Init:ErrImagePull", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", waitingFor("setup", "ErrImagePull")), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "Init:ErrImagePull", restarts: "0"},
		{name: "init container failed → Init:Error", pod: Pod{Phase: "Failed", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", exited("setup", 1, "Error")), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "Init:Error", restarts: "0"},
		{name: "init container failed without a reason → Init:ExitCode:N", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("init", exited("setup", 3, "")), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "Init:ExitCode:3", restarts: "0"},
		{name: "init done, app not made yet → PodInitializing", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false),
			Containers: []Container{kind("init", exited("setup", 0, "Completed")), waitingFor("app", "PodInitializing")}},
			ready: "0/1", status: "PodInitializing", restarts: "0"},
		{name: "a started sidecar counts in READY", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, true),
			Containers: []Container{kind("sidecar", running("proxy", true)), running("app", true)}}, ready: "2/2", status: "Running", restarts: "0"},
		{name: "a sidecar not started → Init:0/1", pod: Pod{Phase: "Pending", Conditions: conditionsOf(false, false),
			Containers: []Container{kind("sidecar", func() Container { c := running("proxy", false); c.Started = false; return c }()), waitingFor("app", "PodInitializing")}},
			ready: "0/2", status: "Init:0/1", restarts: "0"},
		{name: "back-off after exits → CrashLoopBackOff, restarts with the last exit", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, false),
			Containers: []Container{running("a", true), restarted(waitingFor("b", "CrashLoopBackOff"), 5, t0.Add(8*time.Minute))}},
			ready: "1/2", status: "CrashLoopBackOff", restarts: "5 (2m0s ago)", restartsOf: 5},
		{name: "ErrImagePull", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false), Containers: []Container{waitingFor("a", "ErrImagePull")}},
			ready: "0/1", status: "ErrImagePull", restarts: "0"},
		{name: "ImagePullBackOff", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false), Containers: []Container{waitingFor("a", "ImagePullBackOff")}},
			ready: "0/1", status: "ImagePullBackOff", restarts: "0"},
		{name: "CreateContainerConfigError", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false), Containers: []Container{waitingFor("a", "CreateContainerConfigError")}},
			ready: "0/1", status: "CreateContainerConfigError", restarts: "0"},
		{name: "the first container's reason wins", pod: Pod{Phase: "Pending", Conditions: conditionsOf(true, false),
			Containers: []Container{waitingFor("a", "ErrImagePull"), waitingFor("b", "CreateContainerConfigError")}}, ready: "0/2", status: "ErrImagePull", restarts: "0"},
		{name: "all exited 0 → Completed", pod: Pod{Phase: "Succeeded", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 0, "Completed")}}, ready: "0/1", status: "Completed", restarts: "0"},
		{name: "exited 1 → Error", pod: Pod{Phase: "Failed", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 1, "Error")}}, ready: "0/1", status: "Error", restarts: "0"},
		{name: "OOMKilled", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 137, "OOMKilled")}}, ready: "0/1", status: "OOMKilled", restarts: "0"},
		{name: "exited without a reason → ExitCode:N", pod: Pod{Phase: "Failed", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 2, "")}}, ready: "0/1", status: "ExitCode:2", restarts: "0"},
		{name: "one completed, one ready and running, pod Ready → Running", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, true),
			Containers: []Container{exited("a", 0, "Completed"), running("b", true)}}, ready: "1/2", status: "Running", restarts: "0"},
		{name: "one completed, one running, pod not Ready → NotReady", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 0, "Completed"), running("b", true)}}, ready: "1/2", status: "NotReady", restarts: "0"},
		{name: "one completed, one failed → the failure", pod: Pod{Phase: "Failed", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("a", 0, "Completed"), exited("b", 1, "Error")}}, ready: "0/2", status: "Error", restarts: "0"},
		{name: "failed first, completed later in the list → the failure", pod: Pod{Phase: "Failed", Conditions: conditionsOf(true, false),
			Containers: []Container{exited("b", 1, "Error"), exited("a", 0, "Completed")}}, ready: "0/2", status: "Error", restarts: "0"},
		{name: "DeadlineExceeded, containers running → DeadlineExceeded", pod: Pod{Phase: "Failed", Reason: "DeadlineExceeded", Conditions: conditionsOf(true, false),
			Containers: []Container{running("a", false)}}, ready: "0/1", status: "DeadlineExceeded", restarts: "0"},
		{name: "being deleted → Terminating", pod: Pod{Phase: "Running", Terminating: true, Conditions: conditionsOf(true, true),
			Containers: []Container{running("a", true)}}, ready: "1/1", status: "Terminating", restarts: "0"},
		{name: "invalid configuration → InvalidProbeConfig (the agent's own)", pod: Pod{Phase: "Running", Problems: []string{"bad"},
			Containers: []Container{running("a", false)}}, ready: "0/1", status: "InvalidProbeConfig", restarts: "0"},
		{name: "regular init containers' restarts count while initializing only", pod: Pod{Phase: "Running", Conditions: conditionsOf(true, true),
			Containers: []Container{kind("init", restarted(exited("setup", 0, "Completed"), 2, t0)), running("app", true)}}, ready: "1/1", status: "Running", restarts: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, total := tt.pod.ReadyCount()
			assert.Equal(t, tt.ready, fmt.Sprintf("%d/%d", ready, total), "READY")
			assert.Equal(t, tt.status, tt.pod.Status(), "STATUS")
			assert.Equal(t, tt.restarts, tt.pod.RestartsText(now), "RESTARTS")
			assert.Equal(t, tt.restartsOf, tt.pod.Restarts())
		})
	}
}

// A container's state in a few words, the status page's and the CLI's.
// An older agent's answer (no kubelet state, no conditions) is read from
// its summary: kubectl's columns still come out.
func TestStateText(t *testing.T) {
	for _, tt := range []struct {
		c    Container
		want string
	}{
		{running("a", true), "Running"},
		{waitingFor("a", "CrashLoopBackOff"), "CrashLoopBackOff"},
		{waitingFor("a", ""), "Waiting"},
		{exited("a", 0, "Completed"), "Completed"},
		{exited("a", 137, "OOMKilled"), "OOMKilled (exit code 137)"},
		{exited("a", 2, ""), "Terminated (exit code 2)"},
		// An agent that sends no kubelet state: what its summary says.
		{Container{State: "Exited", Reason: "Error", ExitCode: 3}, "Error (exit code 3)"},
		{Container{State: "CrashLoopBackOff"}, "CrashLoopBackOff"},
		{Container{State: "Waiting"}, "Waiting"},
		{Container{State: "Running"}, "Running"},
	} {
		assert.Equal(t, tt.want, tt.c.StateText())
	}
	old := Pod{Phase: "Running", Ready: true, Containers: []Container{{Name: "a", State: "Running", Ready: true}, {Name: "b", State: "Exited", Reason: "Completed"}}}
	ready, total := old.ReadyCount()
	assert.Equal(t, [2]int{1, 2}, [2]int{ready, total})
	assert.Equal(t, "Running", old.Status(), "Completed turns back to Running: the pod is Ready")
}
