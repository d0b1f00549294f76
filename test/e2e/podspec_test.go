//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The whole Pod spec as kubelet 1.36 honours it. Each test states what a
// real kubelet v1.36.3 did with the same manifest on containerd 1.6.20
// (../shared/kubelet, manifests in cmp/), and checks the agent does the
// same.

// Sidecars (init containers with restartPolicy Always), in pods whose
// policy is Never. kubelet: a failed liveness probe kills the sidecar
// ("Init container proxy failed liveness probe") and restarts it after its
// grace period; a sidecar that exits is restarted, with back-off; once the
// main container of a Job-style pod is done, the sidecar is stopped
// ("Stopping container proxy", the pod's grace period) and the sandbox
// with it.
func TestSidecars(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	liveness, exit, job := uniqueName("sidecar-liveness"), uniqueName("sidecar-exit"), uniqueName("job-sidecar")
	manifests := map[string]string{
		liveness: manifest(liveness, `  restartPolicy: Never
  terminationGracePeriodSeconds: 3
  initContainers:
  - name: proxy
    image: localhost/busybox:test
    restartPolicy: Always
    command: ["sleep", "3600"]
    livenessProbe:
      exec: {command: ["sh", "-c", "test ! -f /tmp/dead"]}
      periodSeconds: 1
      failureThreshold: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "3600"]
`),
		exit: manifest(exit, `  restartPolicy: Never
  initContainers:
  - name: proxy
    image: localhost/busybox:test
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; exit 0"]
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "3600"]
`),
		job: manifest(job, `  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: proxy
    image: localhost/busybox:test
    restartPolicy: Always
    command: ["sleep", "3600"]
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "sleep 3; exit 0"]
`),
	}
	created := map[string]*pod{}
	for name, m := range manifests {
		a.writePod(t, name, m)
	}
	for name, m := range manifests {
		created[name] = fromManifest(t, m)
	}

	// Liveness: killed with kubelet's message, restarted after its 3 s.
	a.waitFor(t, liveness, "proxy", "probed", 10*time.Second, func(c pods.ContainerReport) bool { return len(c.Probes) == 1 && c.Probes[0].Last != nil })
	proxy := instances(t, created[liveness], "proxy")[0].GetId()
	created[liveness].exec(proxy, "touch", "/tmp/dead")
	a.waitEvent(t, liveness, "proxy", restart.ReasonKilling, "Init container proxy failed liveness probe", 10*time.Second)
	eventually(t, 15*time.Second, "the sidecar restarted", func() bool { return states(t, created[liveness], "proxy") == "0:EXITED 1:RUNNING" })
	assert.Equal(t, "0:RUNNING", states(t, created[liveness], "main"), "the main container is left alone")
	assert.Empty(t, a.events.matching(liveness, "proxy", restart.ReasonKilling, "will be restarted"), "kubelet's sidecar message has no suffix")

	// Exit: restarted though the pod's policy is Never, then backed off.
	eventually(t, 15*time.Second, "the exited sidecar restarted", func() bool { return newestAttempt(t, created[exit], "proxy") >= 1 })
	a.waitEvent(t, exit, "proxy", restart.ReasonBackOff, "Back-off restarting failed container proxy in pod "+exit, 15*time.Second)
	assert.True(t, sandboxReady(t, created[exit]))

	// Job: the sidecar stopped after the main container, then the sandbox.
	eventually(t, 20*time.Second, "the job pod stopped", func() bool { return !sandboxReady(t, created[job]) })
	mainList, proxyList := instances(t, created[job], "main"), instances(t, created[job], "proxy")
	require.Len(t, proxyList, 1, "the sidecar is not restarted")
	_, mainDone, mainCode := exitTimes(t, created[job], mainList[0].GetId())
	_, proxyDone, _ := exitTimes(t, created[job], proxyList[0].GetId())
	assert.Zero(t, mainCode)
	took := proxyDone.Sub(mainDone)
	assert.GreaterOrEqual(t, took, 4*time.Second, "sleep ignores SIGTERM: the pod's 5 s grace period")
	assert.Less(t, took, 9*time.Second)
	a.waitEvent(t, job, "proxy", restart.ReasonKilling, "Stopping container proxy", time.Second)
	eventually(t, 5*time.Second, "the job pod Succeeded", func() bool { p, _ := a.pod(job); return p.Phase == corev1.PodSucceeded })
	t.Logf("job: main exited at %s, sidecar stopped %s later (kubelet: 5.3 s)", mainDone.Format("15:04:05.000"), took.Round(time.Millisecond))
}

// Regular init containers never count against readiness (kubelet's
// ContainersReady) and show as completed; the pod is ready once its app
// is, even when the app container is created a while after the init
// container finished (no transient "succeeded" phase in between).
func TestInitContainers(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("init-ready")
	m := manifest(name, `  restartPolicy: Never
  initContainers:
  - name: setup
    image: localhost/busybox:test
    command: ["sh", "-c", "sleep 1"]
  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`)
	a.writePod(t, name, m)
	p := runPodNamed(t, c, name, nil)
	p.start("setup", "sh", "-c", "sleep 1")
	eventually(t, 10*time.Second, "setup done", func() bool { return states(t, p, "setup") == "0:EXITED" })
	a.waitFor(t, name, "setup", "completed", 5*time.Second, func(c pods.ContainerReport) bool { return c.Completed() && c.Ready })
	r, _ := a.pod(name)
	assert.Equal(t, corev1.PodPending, r.Phase, "initialized, app not created yet: pending, not over")
	// The creator takes its time to create the app container.
	_, setupDone, _ := exitTimes(t, p, instances(t, p, "setup")[0].GetId())
	eventually(t, 10*time.Second, "2 s after setup finished", func() bool { return time.Since(setupDone) > 2*time.Second })
	r, _ = a.pod(name)
	assert.Equal(t, corev1.PodPending, r.Phase, "still pending")
	p.start("app", "sleep", "3600")
	a.waitReady(t, name, "app", true, 10*time.Second)
	eventually(t, 5*time.Second, "the pod ready", func() bool { r, _ := a.pod(name); return r.Ready && r.Phase == corev1.PodRunning })
	r, _ = a.pod(name)
	assert.Equal(t, spec.Init, r.Containers[0].Kind)
	assert.True(t, r.Containers[0].Completed())
}

// Lifecycle hooks. kubelet (grace 10, preStop sleep 3, container ignoring
// SIGTERM): the kill's stop comes 3 s after the Killing event, the new
// instance 10 s after it; postStart runs before the new instance is
// probed. A failing postStart: FailedPostStartHook "PostStartHook failed",
// Killing "FailedPostStartHook", then back-off; its output stays out of
// events.
func TestLifecycleHooks(t *testing.T) {
	c := dial(t)
	a := startAgent(t, c)
	hooks, failing := uniqueName("hooks"), uniqueName("poststart-fail")
	hooksManifest := manifest(hooks, `  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "sleep 2; touch /tmp/poststart"]}
      preStop:
        exec: {command: ["sh", "-c", "sleep 3"]}
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/poststart"]}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["sh", "-c", "test ! -f /tmp/dead"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	failingManifest := manifest(failing, `  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sh", "-c", "sleep 1; exit 1"]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo secret-output; exit 3"]}
`)
	a.writePod(t, hooks, hooksManifest)
	a.writePod(t, failing, failingManifest)
	hp, fp := fromManifest(t, hooksManifest), fromManifest(t, failingManifest)

	a.waitFor(t, hooks, "app", "probed", 10*time.Second, func(c pods.ContainerReport) bool { return len(c.Probes) == 2 && c.Probes[0].Last != nil })
	first := instances(t, hp, "app")[0].GetId()
	hp.exec(first, "touch", "/tmp/dead")
	killing := a.waitEvent(t, hooks, "app", restart.ReasonKilling, "Container app failed liveness probe, will be restarted", 10*time.Second)
	eventually(t, 20*time.Second, "the replacement running", func() bool { return states(t, hp, "app") == "0:EXITED 1:RUNNING" })
	_, stopped, _ := exitTimes(t, hp, first)
	took := stopped.Sub(killing.Time)
	assert.GreaterOrEqual(t, took, 9*time.Second, "preStop's 3 s, then 7 s of SIGTERM ignored")
	assert.Less(t, took, 12*time.Second, "the preStop time is taken from the grace period, not added to it")
	second := instances(t, hp, "app")[1].GetId()
	a.waitReady(t, hooks, "app", true, 10*time.Second)
	var runs []results.Observation
	for _, h := range a.engine.Histories.For(a.key(t, hooks)) {
		if h.Type == results.Readiness {
			runs = h.Recent
		}
	}
	var firstRun *results.Observation
	for i := range runs {
		if runs[i].ContainerID == second {
			firstRun = &runs[i]
			break
		}
	}
	require.NotNil(t, firstRun, "the replacement probed")
	assert.Equal(t, results.OutcomeSuccess, firstRun.Outcome, "never probed before its postStart was done")
	t.Logf("kill to exit %s (kubelet: 10.0 s)", took.Round(time.Millisecond))

	a.waitEvent(t, failing, "app", restart.ReasonFailedPostStartHook, "PostStartHook failed", 15*time.Second)
	a.waitEvent(t, failing, "app", restart.ReasonKilling, "FailedPostStartHook", 5*time.Second)
	a.waitEvent(t, failing, "app", restart.ReasonBackOff, "Back-off restarting failed container app", 15*time.Second)
	assert.NotContains(t, a.events.String(), "secret-output", "hook output is not evented")
	// Restarted after the failed hook; the pod container deletor may have
	// removed the older instance by now, as kubelet's.
	assert.GreaterOrEqual(t, newestAttempt(t, fp, "app"), 1, "restarted after the failed hook")
}

// Container-level restartPolicy and restartPolicyRules (kubelet 1.36,
// ContainerRestartRules). kubelet: in an Always pod, a container whose own
// policy is Never stays exited; one whose rule restarts exit code 42 is
// restarted (with back-off); the pod goes on.
func TestContainerRestartPolicies(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("container-policy")
	m := manifest(name, `  restartPolicy: Always
  containers:
  - name: never
    image: localhost/busybox:test
    restartPolicy: Never
    command: ["sh", "-c", "sleep 1; exit 1"]
  - name: rule
    image: localhost/busybox:test
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}
    command: ["sh", "-c", "sleep 1; exit 42"]
  - name: keep
    image: localhost/busybox:test
    command: ["sleep", "3600"]
`)
	a.writePod(t, name, m)
	p := fromManifest(t, m)
	eventually(t, 15*time.Second, "exit 42 restarted by its rule", func() bool { return newestAttempt(t, p, "rule") >= 1 })
	a.waitEvent(t, name, "rule", restart.ReasonBackOff, "", 15*time.Second)
	assert.Equal(t, "0:EXITED", states(t, p, "never"), "its own Never wins over the pod's Always")
	assert.Equal(t, "0:RUNNING", states(t, p, "keep"))
	assert.True(t, sandboxReady(t, p))
}

// Kill, then create. kubelet (grace 6, readiness passing, container
// ignoring SIGTERM): during the 6 s no second instance exists, not even
// created, and the old one stays Ready; the replacement is created once it
// has exited.
func TestKillThenCreate(t *testing.T) {
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("kill-then-create")
	m := manifest(name, `  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["sh", "-c", "test ! -f /tmp/dead"]}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 6
`)
	a.writePod(t, name, m)
	p := fromManifest(t, m)
	a.waitReady(t, name, "app", true, 10*time.Second)
	old := instances(t, p, "app")[0].GetId()
	p.exec(old, "touch", "/tmp/dead")
	a.waitEvent(t, name, "app", restart.ReasonKilling, "failed liveness probe", 10*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		list := instances(t, p, "app")
		if list[0].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			break
		}
		require.Len(t, list, 1, "no replacement, not even created, while the old instance runs")
		if r, ok := a.container(name, "app"); ok && r.ID == old {
			assert.True(t, r.Ready, "the old instance stays ready through its grace period")
		}
		require.True(t, time.Now().Before(deadline), "the old instance never stopped")
		<-tick.C
	}
	eventually(t, 10*time.Second, "replaced", func() bool { return states(t, p, "app") == "0:EXITED 1:RUNNING" })
	_, stopped, _ := exitTimes(t, p, old)
	started, _, _ := exitTimes(t, p, instances(t, p, "app")[1].GetId())
	assert.Less(t, started.Sub(stopped), 2*time.Second, "created and started at once after the exit")
	t.Logf("old instance exited, replacement started %s later (kubelet: 0.6 s)", started.Sub(stopped).Round(time.Millisecond))
}

// restartPolicy Never, the failed container the last one running. kubelet
// kills the whole pod: "Stopping container app", the pod's grace period (4
// s) though the probe says 1, then the sandbox.
func TestNeverPodKilledWithThePodsGracePeriod(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("never-kill")
	m := manifest(name, `  restartPolicy: Never
  terminationGracePeriodSeconds: 4
  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    livenessProbe:
      exec: {command: ["sh", "-c", "test ! -f /tmp/dead"]}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 1
`)
	a.writePod(t, name, m)
	p := fromManifest(t, m)
	a.waitFor(t, name, "app", "probed", 10*time.Second, func(c pods.ContainerReport) bool { return len(c.Probes) == 1 && c.Probes[0].Last != nil })
	id := instances(t, p, "app")[0].GetId()
	p.exec(id, "touch", "/tmp/dead")
	killing := a.waitEvent(t, name, "app", restart.ReasonKilling, "Stopping container app", 10*time.Second)
	eventually(t, 15*time.Second, "the sandbox stopped", func() bool { return !sandboxReady(t, p) })
	_, stopped, code := exitTimes(t, p, id)
	took := stopped.Sub(killing.Time)
	assert.GreaterOrEqual(t, took, 3500*time.Millisecond, "the pod's 4 s, not the probe's 1 s")
	assert.Less(t, took, 7*time.Second)
	assert.Equal(t, int32(137), code)
	assert.Empty(t, a.events.matching(name, "app", restart.ReasonKilling, "failed liveness probe"), "the pod is killed, not the container for its probe")
	assert.Equal(t, "0:EXITED", states(t, p, "app"))
	t.Logf("kill to exit %s (kubelet: 4.0 s)", took.Round(time.Millisecond))
}

// A probe naming a port the container does not declare. kubelet accepts
// the pod; the probe errors at every run ("Liveness probe errored and
// resulted in unknown state: strconv.Atoi: parsing \"web\": invalid
// syntax"), never kills; the readiness probe works and the pod is ready.
func TestUndeclaredNamedPortIsInert(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("named-port")
	m := manifest(name, `  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    livenessProbe:
      httpGet: {port: web, path: /}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`)
	a.writePod(t, name, m)
	p := fromManifest(t, m)
	a.waitReady(t, name, "app", true, 10*time.Second)
	eventually(t, 10*time.Second, "the liveness probe errors at every run", func() bool {
		return len(a.events.matching(name, "app", prober.ReasonUnhealthy, `Liveness probe errored and resulted in unknown state: strconv.Atoi: parsing "web": invalid syntax`)) >= 3
	})
	assert.Equal(t, "0:RUNNING", states(t, p, "app"), "never killed")
	assert.NotEmpty(t, a.events.matching(name, "app", "InvalidProbeConfig", `no port named "web"`), "said loudly")
	r, _ := a.container(name, "app")
	assert.True(t, r.Ready)
	assert.NotEmpty(t, r.Warnings)
}

// key returns the pod's key (its UID) as the agent knows it.
func (a *agent) key(t *testing.T, name string) string {
	t.Helper()
	p, ok := a.pod(name)
	require.True(t, ok)
	return p.Key
}

// The same namespace/name twice: a pod re-created with a new UID while
// the old sandbox lingers. Every answer by name uses one rule (a ready
// sandbox wins, then the newest): /ready and the pod endpoint agree, and
// /metrics never fails on the two pods' same labels.
func TestSameNameTwice(t *testing.T) {
	c := dial(t)
	name := uniqueName("twice")
	dir := manifestDir(t, name, `  - name: app
    image: localhost/busybox:test
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/ready"]}
      periodSeconds: 1
`)
	agent := startBinary(t, dir, freePort(t))
	old := runPodNamed(t, c, name, nil)
	oldApp := old.start("app", "sleep", "3600")
	old.exec(oldApp, "touch", "/tmp/ready")
	newer := runPodNamed(t, c, name, nil)
	newer.start("app", "sleep", "3600")

	byName := func() (int, api.Readiness, api.Pod) {
		code, body := agent.get(t, "/api/v1/pods/"+testNamespace+"/"+name+"/ready")
		var r api.Readiness
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		_, body = agent.get(t, "/api/v1/pods/"+testNamespace+"/"+name)
		var p api.Pod
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		return code, r, p
	}
	eventually(t, 10*time.Second, "both pods seen with their containers, the old one ready", func() bool {
		_, body := agent.get(t, "/api/v1/pods")
		var list api.PodList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		ready, withContainer := 0, 0
		for _, p := range list.Pods {
			if p.Name != name {
				continue
			}
			if p.Ready {
				ready++
			}
			if len(p.Containers) == 1 && p.Containers[0].ID != "" {
				withContainer++
			}
		}
		return ready == 1 && withContainer == 2
	})
	code, _, p := byName()
	assert.Equal(t, http.StatusServiceUnavailable, code, "the newest pod (not ready) is the one the name stands for")
	assert.Equal(t, newer.config.GetMetadata().GetUid(), p.UID)
	for range 3 {
		code, body := agent.get(t, "/metrics")
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, 1, strings.Count(body, `cri_prober_container_ready{container="app",namespace="`+testNamespace+`",pod="`+name+`"}`))
	}

	// The new pod's sandbox is stopped (it lingers, not ready): the old,
	// ready one is the pod the name stands for again.
	require.NoError(t, c.StopPodSandbox(t.Context(), newer.id))
	eventually(t, 10*time.Second, "the ready sandbox wins", func() bool {
		code, _, p := byName()
		return code == http.StatusOK && p.UID == old.config.GetMetadata().GetUid()
	})
	code, _ = agent.get(t, "/metrics")
	assert.Equal(t, http.StatusOK, code)
}

// Contract (kubelet without an API server): a pod with readiness gates
// is probed and restarted as any other, its containers ready, but the pod
// is never Ready (nothing sets the gates' conditions: a warning says so);
// a pod past its activeDeadlineSeconds is killed and Failed with reason
// DeadlineExceeded. Both hold for a pod made by someone else too.
//
// kubelet v1.36.3: the gated pod showed ContainersReady=True, Ready=False
// (ReadinessGatesNotReady); the deadline pod (activeDeadlineSeconds: 5) was
// killed 5–7 s after it started, phase Failed, reason DeadlineExceeded.
func TestReadinessGatesAndActiveDeadline(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	gated, deadline := uniqueName("gated"), uniqueName("deadline")
	containers := `  containers:
  - name: app
    image: localhost/busybox:test
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`
	a.writePod(t, gated, manifest(gated, "  readinessGates:\n  - conditionType: example.com/lb\n"+containers))
	a.writePod(t, deadline, manifest(deadline, "  activeDeadlineSeconds: 5\n  terminationGracePeriodSeconds: 1\n"+containers))
	fromManifest(t, manifest(gated, containers))
	started := time.Now()
	dl := fromManifest(t, manifest(deadline, containers))

	a.waitReady(t, gated, "app", true, 10*time.Second)
	r, ok := a.pod(gated)
	require.True(t, ok)
	assert.False(t, r.Ready, "never Ready: nothing sets the gate's condition")
	for _, cond := range r.Conditions {
		if cond.Type == corev1.PodReady {
			assert.Equal(t, "ReadinessGatesNotReady", cond.Reason)
		}
	}

	ev := a.waitEvent(t, deadline, "", pods.ReasonDeadlineExceeded, pods.MessageDeadlineExceeded, 15*time.Second)
	assert.GreaterOrEqual(t, ev.Time.Sub(started), 4*time.Second, "at the deadline, from the pod's start")
	eventually(t, 10*time.Second, "the pod stopped", func() bool { return !sandboxReady(t, dl) })
	eventually(t, 5*time.Second, "Failed, DeadlineExceeded", func() bool {
		p, _ := a.pod(deadline)
		return p.Phase == corev1.PodFailed && p.Reason == "DeadlineExceeded"
	})
	assert.Len(t, instances(t, dl, "app"), 1, "never restarted")
}
