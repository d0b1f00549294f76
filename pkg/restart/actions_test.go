package restart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// fakeResults are the probes' results a test gives a plan.
type fakeResults = podResults

// testPod builds a pod of the given containers (in spec order), all
// managed, its sandbox ready.
func testPod(policy corev1.RestartPolicy, containers ...*pods.Container) *pods.Pod {
	p := &pods.Pod{Key: "uid", Namespace: "ns", Name: "web", UID: "uid", Sandbox: &cri.Sandbox{ID: "sb", State: cri.SandboxReady},
		Policy: spec.PodPolicy{RestartPolicy: policy, TerminationGracePeriodSeconds: 30}, Containers: containers}
	p.Sandboxes = []*cri.Sandbox{p.Sandbox}
	return p
}

// state is one instance of a container, newest first in testContainer.
type state struct {
	s    cri.ContainerState
	exit int32
}

var (
	runningState = state{s: cri.StateRunning}
	createdState = state{s: cri.StateCreated}
	unknownState = state{s: cri.StateUnknown}
)

func exitedWith(code int32) state { return state{s: cri.StateExited, exit: code} }

// testContainer builds a managed container whose instances have the given
// states, newest first; its instance IDs are name-<n>, the newest <n> 0.
func testContainer(name string, kind spec.Kind, c *spec.Container, states ...state) *pods.Container {
	if c == nil {
		c = &spec.Container{}
	}
	c.Name, c.Kind = name, kind
	pc := &pods.Container{Name: name, Kind: kind, Spec: c, Managed: true}
	for i, st := range states {
		pc.Instances = append(pc.Instances, &cri.Container{ID: name + "-" + string(rune('0'+i)), Name: name, State: st.s, ExitCode: st.exit})
	}
	if len(pc.Instances) > 0 {
		pc.Current = pc.Instances[0]
	}
	return pc
}

// withStartupProbe and withLivenessProbe are a container spec with that
// one probe.
func withStartupProbe() *spec.Container { return &spec.Container{Startup: &corev1.Probe{}} }

func withLivenessProbe() *spec.Container { return &spec.Container{Liveness: &corev1.Probe{}} }

func containerPolicy(p corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) *spec.Container {
	return &spec.Container{RestartPolicy: &p, RestartPolicyRules: rules}
}

// summary renders actions by container name, for comparison.
type summary struct {
	killPod bool
	kill    []string // name: message
	// restarts are the killed instances whose container starts again
	// (containerToKill.restarts).
	restarts  []string
	startInit []string
	start     []string
}

func summarize(a podActions) summary {
	var s summary
	s.killPod = a.killPod
	for _, k := range a.kill {
		s.kill = append(s.kill, k.instance.ID+": "+k.message)
		if k.restarts {
			s.restarts = append(s.restarts, k.instance.ID)
		}
	}
	for _, c := range a.startInit {
		s.startInit = append(s.startInit, c.Name)
	}
	for _, c := range a.start {
		s.start = append(s.start, c.Name)
	}
	return s
}

// The behaviour of kubelet 1.36's TestComputePodActions rows that apply to
// a pod whose sandbox is ready (the agent never makes sandboxes), plus
// container-level policies and rules (TestComputePodActionsWithContainerRestartRules).
func TestComputePodActions(t *testing.T) {
	regular := func(name string, c *spec.Container, states ...state) *pods.Container {
		return testContainer(name, spec.Regular, c, states...)
	}
	tests := []struct {
		name    string
		pod     *pods.Pod
		results fakeResults
		want    summary
	}{
		{
			name: "everything is good; do nothing",
			pod:  testPod(corev1.RestartPolicyAlways, regular("foo1", nil, runningState), regular("foo2", nil, runningState)),
		},
		{
			name: "restart exited containers if RestartPolicy == Always",
			pod:  testPod(corev1.RestartPolicyAlways, regular("foo1", nil, exitedWith(0)), regular("foo2", nil, exitedWith(111)), regular("foo3", nil, runningState)),
			want: summary{start: []string{"foo1", "foo2"}},
		},
		{
			name: "restart failed containers if RestartPolicy == OnFailure",
			pod:  testPod(corev1.RestartPolicyOnFailure, regular("foo1", nil, exitedWith(0)), regular("foo2", nil, exitedWith(111)), regular("foo3", nil, runningState)),
			want: summary{start: []string{"foo2"}},
		},
		{
			name: "restart created but not started containers if RestartPolicy == OnFailure",
			pod:  testPod(corev1.RestartPolicyOnFailure, regular("foo1", nil, exitedWith(0)), regular("foo2", nil, createdState), regular("foo3", nil, runningState)),
			want: summary{start: []string{"foo2"}},
		},
		{
			name: "don't restart containers if RestartPolicy == Never",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", nil, exitedWith(0)), regular("foo2", nil, exitedWith(111)), regular("foo3", nil, runningState)),
		},
		{
			name: "kill the pod when nothing is left to run (RestartPolicy == Never)",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", nil, exitedWith(0)), regular("foo2", nil, exitedWith(111))),
			want: summary{killPod: true},
		},
		{
			name: "kill the pod when every container succeeded (RestartPolicy == OnFailure)",
			pod:  testPod(corev1.RestartPolicyOnFailure, regular("foo1", nil, exitedWith(0))),
			want: summary{killPod: true},
		},
		{
			name:    "kill and recreate the container if the liveness check has failed",
			pod:     testPod(corev1.RestartPolicyAlways, regular("foo1", nil, runningState), regular("foo2", nil, runningState)),
			results: fakeResults{{ContainerID: "foo2-0", Type: results.Liveness}: results.Failure},
			want:    summary{kill: []string{"foo2-0: Container foo2 failed liveness probe, will be restarted"}, restarts: []string{"foo2-0"}, start: []string{"foo2"}},
		},
		{
			name:    "kill and recreate the container if the startup check has failed",
			pod:     testPod(corev1.RestartPolicyAlways, regular("foo1", nil, runningState), regular("foo2", nil, runningState)),
			results: fakeResults{{ContainerID: "foo2-0", Type: results.Startup}: results.Failure},
			want:    summary{kill: []string{"foo2-0: Container foo2 failed startup probe, will be restarted"}, restarts: []string{"foo2-0"}, start: []string{"foo2"}},
		},
		{
			name:    "kill without restart under Never while another container runs",
			pod:     testPod(corev1.RestartPolicyNever, regular("foo1", nil, runningState), regular("foo2", nil, runningState)),
			results: fakeResults{{ContainerID: "foo2-0", Type: results.Liveness}: results.Failure},
			want:    summary{kill: []string{"foo2-0: Container foo2 failed liveness probe"}},
		},
		{
			// kubelet kills the whole pod (its grace period, "Stopping
			// container"), not the container for its probe.
			name:    "liveness failure of the last container under Never kills the pod",
			pod:     testPod(corev1.RestartPolicyNever, regular("foo1", nil, runningState)),
			results: fakeResults{{ContainerID: "foo1-0", Type: results.Liveness}: results.Failure},
			want:    summary{killPod: true, kill: []string{"foo1-0: Container foo1 failed liveness probe"}},
		},
		{
			// Started again, but the kill restarts only per the policy
			// (Never): the ledger notes it as a stop.
			name: "kill and recreate the container if the container is in unknown state",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", nil, runningState), regular("foo2", nil, unknownState)),
			want: summary{kill: []string{`foo2-0: Container is in "Unknown" state, try killing it before restart`}, start: []string{"foo2"}},
		},
		{
			name: "kill and recreate the container in unknown state if RestartPolicy == Always: the kill restarts it",
			pod:  testPod(corev1.RestartPolicyAlways, regular("foo1", nil, runningState), regular("foo2", nil, unknownState)),
			want: summary{kill: []string{`foo2-0: Container is in "Unknown" state, try killing it before restart`}, restarts: []string{"foo2-0"}, start: []string{"foo2"}},
		},
		{
			name: "restart the container if the container is in created state",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", nil, runningState), regular("foo2", nil, createdState)),
			want: summary{start: []string{"foo2"}},
		},
		{
			name: "a container never created is to start (its creator's), which keeps the pod",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", nil, exitedWith(0)), regular("foo2", nil)),
			want: summary{start: []string{"foo2"}},
		},
		{
			name: "an unmanaged running container keeps the pod",
			pod: func() *pods.Pod {
				p := testPod(corev1.RestartPolicyNever, regular("foo1", nil, exitedWith(0)), regular("other", nil, runningState))
				p.Containers[1].Managed = false
				return p
			}(),
		},
		{
			name: "the container's Always beats the pod's Never",
			pod:  testPod(corev1.RestartPolicyNever, regular("foo1", containerPolicy(corev1.ContainerRestartPolicyAlways), exitedWith(0))),
			want: summary{start: []string{"foo1"}},
		},
		{
			name: "the container's Never beats the pod's Always, and the pod is over",
			pod:  testPod(corev1.RestartPolicyAlways, regular("foo1", containerPolicy(corev1.ContainerRestartPolicyNever), exitedWith(1))),
			want: summary{killPod: true},
		},
		{
			name: "a rule restarts exit code 42 of a Never container",
			pod: testPod(corev1.RestartPolicyNever, regular("foo1", containerPolicy(corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRule{
				Action: corev1.ContainerRestartRuleActionRestart, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}), exitedWith(42))),
			want: summary{start: []string{"foo1"}},
		},
		{
			name:    "a probe kill follows the container's policy, not its rules",
			pod:     testPod(corev1.RestartPolicyAlways, regular("foo1", containerPolicy(corev1.ContainerRestartPolicyNever), runningState), regular("foo2", nil, runningState)),
			results: fakeResults{{ContainerID: "foo1-0", Type: results.Liveness}: results.Failure},
			want:    summary{kill: []string{"foo1-0: Container foo1 failed liveness probe"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.results)
			assert.Equal(t, tt.want, summarize(got))
		})
	}
}

// The behaviour of kubelet 1.36's TestComputePodActionsWithInitContainers
// and TestComputePodActionsWithRestartableInitContainers rows.
func TestComputePodActionsWithInitContainers(t *testing.T) {
	initC := func(name string, c *spec.Container, states ...state) *pods.Container {
		return testContainer(name, spec.Init, c, states...)
	}
	sidecar := func(name string, c *spec.Container, states ...state) *pods.Container {
		return testContainer(name, spec.Sidecar, c, states...)
	}
	regular := func(name string, states ...state) *pods.Container {
		return testContainer(name, spec.Regular, nil, states...)
	}
	tests := []struct {
		name    string
		pod     *pods.Pod
		results fakeResults
		want    summary
	}{
		{
			name: "initialization completed; start all containers",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, exitedWith(0)), regular("foo1"), regular("foo2")),
			want: summary{start: []string{"foo1", "foo2"}},
		},
		{
			name: "no init containers have been started; start the first one",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil), initC("init2", nil), regular("foo1")),
			want: summary{startInit: []string{"init1"}},
		},
		{
			name: "initialization in progress; do nothing",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, runningState), regular("foo1")),
		},
		{
			name: "initialization failed; restart the last init container if RestartPolicy == Always",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, exitedWith(137)), regular("foo1")),
			want: summary{startInit: []string{"init1"}},
		},
		{
			name: "initialization failed; restart the last init container if RestartPolicy == OnFailure",
			pod:  testPod(corev1.RestartPolicyOnFailure, initC("init1", nil, exitedWith(137)), regular("foo1")),
			want: summary{startInit: []string{"init1"}},
		},
		{
			name: "initialization failed; kill pod if RestartPolicy == Never",
			pod:  testPod(corev1.RestartPolicyNever, initC("init1", nil, exitedWith(137)), regular("foo1")),
			want: summary{killPod: true},
		},
		{
			name: "initialization failed; the init container's OnFailure restarts it under the pod's Never",
			pod:  testPod(corev1.RestartPolicyNever, initC("init1", containerPolicy(corev1.ContainerRestartPolicyOnFailure), exitedWith(1)), regular("foo1")),
			want: summary{startInit: []string{"init1"}},
		},
		{
			name: "init container state unknown; kill and recreate the last init container if RestartPolicy == Always",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, unknownState), regular("foo1")),
			want: summary{kill: []string{`init1-0: Init container is in "Unknown" state, try killing it before restart`}, restarts: []string{"init1-0"}, startInit: []string{"init1"}},
		},
		{
			name: "init container state unknown; kill pod if RestartPolicy == Never",
			pod:  testPod(corev1.RestartPolicyNever, initC("init1", nil, unknownState), regular("foo1")),
			want: summary{killPod: true},
		},
		{
			name: "some of the init container statuses are missing but the last init container is running, don't restart preceding ones",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil), initC("init2", nil, runningState), regular("foo1")),
		},
		{
			name: "an init container is in the created state; restart it",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, exitedWith(0)), initC("init2", nil, createdState), regular("foo1")),
			want: summary{startInit: []string{"init2"}},
		},
		{
			name: "the first init container completed; start the next one",
			pod:  testPod(corev1.RestartPolicyAlways, initC("init1", nil, exitedWith(0)), initC("init2", nil), regular("foo1")),
			want: summary{startInit: []string{"init2"}},
		},
		{
			name: "a completed init container is left alone once the pod runs",
			pod:  testPod(corev1.RestartPolicyNever, initC("init1", nil, exitedWith(0)), regular("foo1", runningState)),
		},
		{
			name: "restartable init container has started; start the next",
			pod:  testPod(corev1.RestartPolicyAlways, sidecar("side1", nil, runningState), initC("init2", nil), regular("foo1")),
			want: summary{startInit: []string{"init2"}},
		},
		{
			name: "startupProbe has not been run; do nothing",
			pod:  testPod(corev1.RestartPolicyAlways, sidecar("side1", withStartupProbe(), runningState), regular("foo1")),
		},
		{
			name:    "startupProbe in progress; do nothing",
			pod:     testPod(corev1.RestartPolicyAlways, sidecar("side1", withStartupProbe(), runningState), regular("foo1")),
			results: fakeResults{{ContainerID: "side1-0", Type: results.Startup}: results.Unknown},
		},
		{
			name:    "startupProbe has completed; start the next",
			pod:     testPod(corev1.RestartPolicyAlways, sidecar("side1", withStartupProbe(), runningState), regular("foo1")),
			results: fakeResults{{ContainerID: "side1-0", Type: results.Startup}: results.Success},
			want:    summary{start: []string{"foo1"}},
		},
		{
			name:    "kill and recreate the restartable init container if the startup check has failed",
			pod:     testPod(corev1.RestartPolicyAlways, sidecar("side1", withStartupProbe(), runningState), regular("foo1")),
			results: fakeResults{{ContainerID: "side1-0", Type: results.Startup}: results.Failure},
			want:    summary{kill: []string{"side1-0: Init container side1 failed startup probe"}, restarts: []string{"side1-0"}, startInit: []string{"side1"}},
		},
		{
			name:    "livenessProbe has not been run; the pod goes on",
			pod:     testPod(corev1.RestartPolicyAlways, sidecar("side1", withLivenessProbe(), runningState), regular("foo1", runningState)),
			results: fakeResults{},
		},
		{
			name:    "kill and recreate the restartable init container if the liveness check has failed",
			pod:     testPod(corev1.RestartPolicyNever, sidecar("side1", withLivenessProbe(), runningState), regular("foo1", runningState)),
			results: fakeResults{{ContainerID: "side1-0", Type: results.Liveness}: results.Failure},
			want:    summary{kill: []string{"side1-0: Init container side1 failed liveness probe"}, restarts: []string{"side1-0"}, startInit: []string{"side1"}},
		},
		{
			name: "restart terminated restartable init container and next init container",
			pod:  testPod(corev1.RestartPolicyAlways, sidecar("side1", nil, exitedWith(0)), sidecar("side2", nil, runningState), sidecar("side3", nil, exitedWith(0)), regular("foo1")),
			want: summary{startInit: []string{"side1", "side3"}},
		},
		{
			name: "restart terminated restartable init container and regular containers",
			pod:  testPod(corev1.RestartPolicyAlways, sidecar("side1", nil, exitedWith(0)), regular("foo1", runningState)),
			want: summary{startInit: []string{"side1"}},
		},
		{
			name: "restart restartable init container if regular containers are running even if pod's RestartPolicy == Never",
			pod:  testPod(corev1.RestartPolicyNever, sidecar("side1", nil, exitedWith(1)), regular("foo1", runningState)),
			want: summary{startInit: []string{"side1"}},
		},
		{
			name: "kill the pod if all main containers succeeded if pod's RestartPolicy == Never",
			pod:  testPod(corev1.RestartPolicyNever, sidecar("side1", nil, runningState), regular("foo1", exitedWith(0))),
			want: summary{killPod: true},
		},
		{
			name: "a Job-style pod whose main container failed under OnFailure restarts it, the sidecar kept",
			pod:  testPod(corev1.RestartPolicyOnFailure, sidecar("side1", nil, runningState), regular("foo1", exitedWith(1))),
			want: summary{start: []string{"foo1"}},
		},
		{
			name: "some of the init container statuses are missing but the last init container is running, restart restartable init and regular containers",
			pod:  testPod(corev1.RestartPolicyAlways, sidecar("side1", nil), initC("init2", nil, exitedWith(0)), regular("foo1", runningState)),
			want: summary{startInit: []string{"side1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.results)
			assert.Equal(t, tt.want, summarize(got))
		})
	}
}
