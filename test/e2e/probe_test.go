//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// These tests port the behaviour of kubelet's "Probing container" e2e
// suite (test/e2e/common/node/container_probe.go) to short timings: the
// probes run every second instead of every ten, so each scenario takes
// seconds, not minutes. Restarts are issue 4's; here a liveness failure
// shows as the LivenessProbeFailed event.

const sleeper = "3600"

// Contract: exec readiness through CRI ExecSync, flipping both ways; specs
// from annotations on a crictl-style pod.
func TestProbeExecReadinessFlipsBothWays(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "exec")
	name := pod.config.GetMetadata().GetName()
	id := pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.ReadinessAnnotation: `{"exec":{"command":["cat","/tmp/ready"]},"periodSeconds":1,"failureThreshold":1}`}})

	a.waitFor(t, name, "app", "probed and not ready", 10*time.Second, func(c pods.ContainerReport) bool {
		return len(c.Probes) == 1 && c.Probes[0].Last != nil && !c.Ready
	})
	a.waitEvent(t, name, "app", prober.ReasonUnhealthy, "Readiness probe failed: cat: can't open '/tmp/ready': No such file or directory", 5*time.Second)

	pod.exec(id, "touch", "/tmp/ready")
	a.waitReady(t, name, "app", true, 5*time.Second)
	pod.exec(id, "rm", "/tmp/ready")
	a.waitReady(t, name, "app", false, 5*time.Second)
	p, _ := a.pod(name)
	assert.Equal(t, "annotations", p.Source)
}

// Contract: HTTP probes by named port from a manifest; readiness and
// liveness judge status codes as kubelet does.
func TestProbeHTTPWithNamedPort(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name := uniqueName("http")
	a.writeManifest(t, "http.yaml", name, `  - name: web
    image: localhost/target:test
    ports:
    - {name: http, containerPort: 8080}
    readinessProbe:
      httpGet: {port: http, path: /ready}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      httpGet: {port: http, path: /healthz}
      periodSeconds: 1
      failureThreshold: 2
`)
	pod := runPodNamed(t, c, name, nil)
	id := pod.startContainer(container{name: "web", image: targetImage})
	a.waitReady(t, name, "web", true, 10*time.Second)
	p, _ := a.pod(name)
	assert.Contains(t, p.Source, "http.yaml:1")

	pod.exec(id, "touch", "/tmp/not-ready")
	a.waitReady(t, name, "web", false, 5*time.Second)
	a.waitEvent(t, name, "web", prober.ReasonUnhealthy, "Readiness probe failed: HTTP probe failed with statuscode: 503", time.Second)
	pod.exec(id, "rm", "/tmp/not-ready")
	a.waitReady(t, name, "web", true, 5*time.Second)

	pod.exec(id, "touch", "/tmp/unhealthy")
	a.waitEvent(t, name, "web", prober.ReasonLivenessFailed, "Container web failed liveness probe", 10*time.Second)
	failures := a.events.matching(name, "web", prober.ReasonUnhealthy, "Liveness probe failed: HTTP probe failed with statuscode: 500")
	assert.Len(t, failures, 2, "failureThreshold 2: two failures reach the threshold")
}

// Contract (kubelet e2e 12 and 13): a same-host redirect is followed; one
// to another host is not, and counts as success with a ProbeWarning.
func TestProbeHTTPRedirects(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "redirect")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "web", image: targetImage, command: []string{"/bin/target", "--unhealthy-after=1ms"},
		annotations: map[string]string{
			spec.LivenessAnnotation:  `{"httpGet":{"port":8080,"path":"/redirect?loc=%2Fhealthz"},"periodSeconds":1,"failureThreshold":1}`,
			spec.ReadinessAnnotation: `{"httpGet":{"port":8080,"path":"/redirect?loc=http%3A%2F%2F0.0.0.0%2F"},"periodSeconds":1}`,
		}})
	a.waitEvent(t, name, "web", prober.ReasonProbeWarning, `Readiness probe warning: Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`, 10*time.Second)
	a.waitReady(t, name, "web", true, 5*time.Second)
	a.waitEvent(t, name, "web", prober.ReasonUnhealthy, "Liveness probe failed: HTTP probe failed with statuscode: 500", 5*time.Second)
}

// Contract: TCP probes: a listening port passes, a closed one fails with
// the dial error.
func TestProbeTCP(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "tcp")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "web", image: targetImage,
		annotations: map[string]string{spec.ReadinessAnnotation: `{"tcpSocket":{"port":9000},"periodSeconds":1}`}})
	pod.startContainer(container{name: "closed", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.ReadinessAnnotation: `{"tcpSocket":{"port":9999},"periodSeconds":1}`}})
	a.waitReady(t, name, "web", true, 10*time.Second)
	a.waitEvent(t, name, "closed", prober.ReasonUnhealthy, "connect: connection refused", 5*time.Second)
	ctr, _ := a.container(name, "closed")
	assert.False(t, ctr.Ready)
}

// Contract (kubelet e2e 20/21): gRPC health: SERVING passes, NOT_SERVING
// fails with kubelet's message.
func TestProbeGRPC(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "grpc")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "server", image: targetImage,
		annotations: map[string]string{spec.LivenessAnnotation: `{"grpc":{"port":5000},"periodSeconds":1,"failureThreshold":1}`}})
	a.waitFor(t, name, "server", "liveness succeeded", 10*time.Second, func(c pods.ContainerReport) bool {
		return len(c.Probes) == 1 && c.Probes[0].Last != nil && c.Probes[0].Last.Outcome == results.OutcomeSuccess
	})
	p, _ := a.pod(name)
	resp, err := http.Get(fmt.Sprintf("http://%s:8080/grpc/not-serving", p.IP))
	require.NoError(t, err)
	resp.Body.Close()
	a.waitEvent(t, name, "server", prober.ReasonUnhealthy, `Liveness probe failed: service unhealthy (responded with "NOT_SERVING")`, 5*time.Second)
	a.waitEvent(t, name, "server", prober.ReasonLivenessFailed, "failed liveness probe", 5*time.Second)
}

// Contract (kubelet e2e 1): never ready before initialDelaySeconds, counted
// from the container's start.
func TestProbeInitialDelay(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "delay")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.ReadinessAnnotation: `{"exec":{"command":["true"]},"initialDelaySeconds":3,"periodSeconds":1}`}})
	readyAt := a.waitReady(t, name, "app", true, 10*time.Second)
	ctr, _ := a.container(name, "app")
	assert.GreaterOrEqual(t, readyAt.Sub(ctr.StartedAt), 3*time.Second, "ready %s after start", readyAt.Sub(ctr.StartedAt))
}

// Contract: consecutive failures below failureThreshold leave the result
// standing; the threshold flips it, and the worker then holds.
func TestProbeFailureThreshold(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "threshold")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["false"]},"periodSeconds":1,"failureThreshold":3}`}})
	failed := a.waitEvent(t, name, "app", prober.ReasonLivenessFailed, "failed liveness probe", 15*time.Second)
	before := 0
	for _, e := range a.events.matching(name, "app", prober.ReasonUnhealthy, "Liveness probe failed") {
		if !e.Time.After(failed.Time) {
			before++
		}
	}
	assert.Equal(t, 3, before, "three failures reach a threshold of three")
	ctr, _ := a.container(name, "app")
	require.Len(t, ctr.Probes, 1)
	assert.Equal(t, results.Failure, ctr.Probes[0].Result)
}

// Contract (kubelet e2e 9 and 11): an exec probe that outlives its timeout
// is a failure that counts, with kubelet 1.36's wording. A command that
// exits at once but leaves a child holding its output is judged by its
// exit code once containerd 1.6 answers (when the child is done): kubelet
// waits for that answer up to its 2-minute runtime timeout, so `sleep 5 &
// exit 0` with a 1 s timeout passes and never restarts anything (checked
// on kubelet v1.36.3 beside containerd 1.6.20).
func TestProbeExecTimeout(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "exectimeout")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "slow", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["sh","-c","sleep 10"]},"timeoutSeconds":1,"periodSeconds":2,"failureThreshold":1}`}})
	pod.startContainer(container{name: "child", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["sh","-c","sleep 10 & exit 1"]},"timeoutSeconds":1,"periodSeconds":2,"failureThreshold":1}`}})
	pod.startContainer(container{name: "background", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["sh","-c","sleep 5 & exit 0"]},"timeoutSeconds":1,"periodSeconds":2,"failureThreshold":1}`}})
	a.waitEvent(t, name, "slow", prober.ReasonUnhealthy, `Liveness probe failed: command timed out: "sh -c sleep 10" timed out after 1s`, 15*time.Second)
	a.waitEvent(t, name, "slow", prober.ReasonLivenessFailed, "failed liveness probe", 5*time.Second)
	a.waitEvent(t, name, "child", prober.ReasonLivenessFailed, "failed liveness probe", 15*time.Second)

	a.waitFor(t, name, "background", "two passing runs of a 5s command with a 1s timeout", 30*time.Second, func(c pods.ContainerReport) bool {
		return len(c.Probes) == 1 && c.Probes[0].Last != nil && c.Probes[0].Last.Outcome == results.OutcomeSuccess && c.Probes[0].Last.Consecutive >= 2
	})
	assert.Empty(t, a.events.matching(name, "background", prober.ReasonUnhealthy, ""), "no failure, no error")
	assert.Empty(t, a.events.matching(name, "background", prober.ReasonLivenessFailed, ""), "never to be restarted")
}

// Contract (issue 22, kubelet): the runtime's timeout is the probe's
// failure however late it answers. containerd 1.6 answers a timed-out
// command only once every process holding its output is gone: here the
// shell is killed at 1 s and its background child lets go at 8 s. With a
// 10 s runtime request timeout (kubelet's is 2 minutes) that answer comes
// 2 s before the agent's own deadline (11 s): a liveness failure and a
// kill, not "the runtime did not answer".
func TestProbeExecTimeoutAnsweredLate(t *testing.T) {
	parallel(t)
	c := dial(t, cri.WithRuntimeRequestTimeout(10*time.Second))
	a := startAgent(t, c)
	pod := runPod(t, c, "latetimeout")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["sh","-c","sleep 8 & sleep 3"]},"timeoutSeconds":1,"periodSeconds":2,"failureThreshold":1}`}})
	a.waitEvent(t, name, "app", prober.ReasonUnhealthy, `Liveness probe failed: command timed out: "sh -c sleep 8 & sleep 3" timed out after 1s`, 30*time.Second)
	a.waitEvent(t, name, "app", prober.ReasonLivenessFailed, "failed liveness probe", 5*time.Second)
	a.waitEvent(t, name, "app", restart.ReasonKilling, "Container app failed liveness probe, will be restarted", 5*time.Second)
	assert.Empty(t, a.events.matching(name, "app", prober.ReasonUnhealthy, "errored"), "an answer, not an error")
}

// Contract: an HTTP probe that outlives its timeout is a failure.
func TestProbeHTTPTimeout(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "httptimeout")
	name := pod.config.GetMetadata().GetName()
	pod.startContainer(container{name: "web", image: targetImage,
		annotations: map[string]string{spec.ReadinessAnnotation: `{"httpGet":{"port":8080,"path":"/delay?d=5s"},"timeoutSeconds":1,"periodSeconds":1}`}})
	a.waitEvent(t, name, "web", prober.ReasonUnhealthy, "Client.Timeout exceeded while awaiting headers", 15*time.Second)
	ctr, _ := a.container(name, "web")
	assert.False(t, ctr.Ready)
}

// Contract (kubelet e2e 15/16): liveness is not run before the startup
// probe succeeds; once it does, liveness runs.
func TestProbeStartupGatesLiveness(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	pod := runPod(t, c, "startup")
	name := pod.config.GetMetadata().GetName()
	id := pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{
			spec.StartupAnnotation:  `{"exec":{"command":["cat","/tmp/started"]},"periodSeconds":1,"failureThreshold":60}`,
			spec.LivenessAnnotation: `{"exec":{"command":["false"]},"periodSeconds":1,"failureThreshold":1}`,
		}})
	// Several startup failures, and no liveness probe meanwhile.
	eventually(t, 15*time.Second, "three startup failures", func() bool {
		return len(a.events.matching(name, "app", prober.ReasonUnhealthy, "Startup probe failed")) >= 3
	})
	assert.Empty(t, a.events.matching(name, "app", prober.ReasonUnhealthy, "Liveness probe"), "liveness ran before startup succeeded")
	ctr, _ := a.container(name, "app")
	assert.False(t, ctr.Started)

	pod.exec(id, "touch", "/tmp/started")
	a.waitEvent(t, name, "app", prober.ReasonStartupSucceeded, "startup probe succeeded", 5*time.Second)
	a.waitEvent(t, name, "app", prober.ReasonLivenessFailed, "failed liveness probe", 5*time.Second)
	ctr, _ = a.container(name, "app")
	assert.True(t, ctr.Started)
}

// Contract (kubelet e2e 17): readiness follows startup success at once, not
// a readiness period later. As in kubelet, a worker created within one
// period of the agent's start first sleeps a random part of the period and
// no trigger cuts that short, so the test lets one readiness period pass
// (startup failing meanwhile) before the startup probe succeeds.
func TestProbeReadyRightAfterStartup(t *testing.T) {
	const readinessPeriod = 5 * time.Second
	c := dial(t)
	a := startAgent(t, c)
	agentStart := time.Now()
	pod := runPod(t, c, "readyafterstartup")
	name := pod.config.GetMetadata().GetName()
	id := pod.startContainer(container{name: "app", image: busyboxImage, command: []string{"sleep", sleeper},
		annotations: map[string]string{
			spec.StartupAnnotation:   `{"exec":{"command":["cat","/tmp/started"]},"periodSeconds":1,"failureThreshold":60}`,
			spec.ReadinessAnnotation: fmt.Sprintf(`{"exec":{"command":["true"]},"periodSeconds":%d}`, int(readinessPeriod.Seconds())),
		}})
	eventually(t, 3*readinessPeriod, "past the start-up jitter", func() bool {
		return time.Since(agentStart) > readinessPeriod+time.Second &&
			len(a.events.matching(name, "app", prober.ReasonUnhealthy, "Startup probe failed")) > 0
	})
	pod.exec(id, "touch", "/tmp/started")
	started := a.waitFor(t, name, "app", "started", 5*time.Second, func(c pods.ContainerReport) bool { return c.Started })
	ready := a.waitReady(t, name, "app", true, readinessPeriod)
	assert.Less(t, ready.Sub(started), readinessPeriod/2, "readiness ran on the startup's trigger, not at its next tick")
}

// Contract: a bad manifest is reported with its file, pod, container and
// field, and does not stop a good one beside it; its pod is never ready.
func TestProbeBadManifestBesideGood(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	good, bad := uniqueName("good"), uniqueName("bad")
	a.writeManifest(t, "good.yaml", good, `  - name: app
    image: localhost/busybox:test
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`)
	a.writeManifest(t, "bad.yaml", bad, `  - name: app
    image: localhost/busybox:test
    readinessProbe:
      exec: {command: ["true"]}
      tcpSocket: {port: 80}
`)
	for _, name := range []string{good, bad} {
		runPodNamed(t, c, name, nil).start("app", "sleep", sleeper)
	}
	a.waitReady(t, good, "app", true, 10*time.Second)
	a.waitFor(t, bad, "app", "running", 10*time.Second, func(c pods.ContainerReport) bool { return c.ID != "" })
	p, _ := a.pod(bad)
	require.Len(t, p.Problems, 1)
	assert.Contains(t, p.Problems[0], "bad.yaml:12: pod "+testNamespace+"/"+bad+": container app: spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type")
	assert.False(t, p.Ready)
	a.waitEvent(t, bad, "app", prober.ReasonInvalidProbeConfig, "may not specify more than 1 handler type", 5*time.Second)
}
