//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// runningAgent is `cri-prober run` as a process.
type runningAgent struct {
	cmd    *exec.Cmd
	logs   *lockedBuffer
	server string
}

// startProcess starts name args (`cri-prober run …`, or it under setpriv)
// as an agent serving on server. It is killed by its PID when the test
// ends, its log printed if the test failed, and with the test binary if
// that dies first.
func startProcess(t *testing.T, server, name string, args ...string) *runningAgent {
	t.Helper()
	require.FileExists(t, binaryPath, "build it first (make build)")
	a := &runningAgent{logs: &lockedBuffer{}, server: server}
	a.cmd = diesWithTheTest(exec.Command(name, privateLinks(t, args)...))
	a.cmd.Stderr = a.logs
	require.NoError(t, a.cmd.Start())
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			t.Logf("agent %s log:\n%s", a.server, a.logs)
		}
	})
	return a
}

// privateLinks gives `run` a link directory of the test's own unless it
// names one: an agent's /var/log/containers links are the node's, and a
// test never writes there.
func privateLinks(t *testing.T, args []string) []string {
	if len(args) == 0 || args[0] != "run" || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--container-log-link-dir") }) {
		return args
	}
	return append(slices.Clip(args), "--container-log-link-dir", t.TempDir())
}

// waitHealthy waits until the agent's /healthz (over HTTP) answers 200.
func (a *runningAgent) waitHealthy(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "agent serving", func() bool {
		resp, err := http.Get(a.server + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startBinary runs the agent until the test ends (or kill is called),
// without any capability (root's uid still owns the sockets): it needs the
// CRI socket, containerd's, and nothing else.
func startBinary(t *testing.T, manifests, listen string) *runningAgent {
	t.Helper()
	return startBinaryWith(t, manifests, listen, "-all")
}

// startBinaryWith runs the agent with the capabilities of bounding (a
// setpriv --bounding-set value) and extra flags.
func startBinaryWith(t *testing.T, manifests, listen, bounding string, flags ...string) *runningAgent {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	require.NoError(t, err, "setpriv (util-linux) drops the agent's capabilities")
	args := []string{"--bounding-set=" + bounding, "--inh-caps=-all", "--no-new-privs", "--",
		binaryPath, "run", "--runtime-endpoint", endpoint, "--pod-manifests", manifests, "--listen", listen, "--pod-manifests-interval", "200ms"}
	a := startProcess(t, "http://"+listen, setpriv, append(args, flags...)...)
	a.waitHealthy(t)
	return a
}

// kill stops the agent with SIGKILL, as a crash would.
func (a *runningAgent) kill() {
	if a.cmd.ProcessState == nil {
		a.cmd.Process.Kill()
		a.cmd.Wait()
	}
}

func (a *runningAgent) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(a.server + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (a *runningAgent) container(t *testing.T, podName, name string) (api.Container, bool) {
	t.Helper()
	_, body := a.get(t, "/api/v1/pods")
	var list api.PodList
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	for _, p := range list.Pods {
		if p.Name == podName {
			for _, c := range p.Containers {
				if c.Name == name {
					return c, true
				}
			}
		}
	}
	return api.Container{}, false
}

// Contract (issue 4): the ready endpoint flips with readiness; metrics are
// served in kubelet's names; status and events show the agent's view; an
// agent killed after a restart and started again restarts nothing twice.
func TestAgentAPIAndRestartAcrossAgentRestart(t *testing.T) {
	c := dial(t)
	name := uniqueName("api")
	dir := manifestDir(t, name, `  - name: web
    image: localhost/target:test
    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 1
`)
	listen := freePort(t)
	agent := startBinary(t, dir, listen)

	pod := runPodNamed(t, c, name, nil)
	id := pod.startContainer(container{name: "web", image: targetImage})
	readyPath := "/api/v1/pods/" + testNamespace + "/" + name + "/ready"
	status := func(want int) func() bool {
		return func() bool { code, _ := agent.get(t, readyPath); return code == want }
	}
	eventually(t, 10*time.Second, "ready: 200", status(http.StatusOK))
	pod.exec(id, "touch", "/tmp/not-ready")
	eventually(t, 5*time.Second, "not ready: 503", status(http.StatusServiceUnavailable))
	_, body := agent.get(t, readyPath)
	assert.JSONEq(t, fmt.Sprintf(`{"namespace":%q,"name":%q,"ready":false,"containers":{"web":false}}`, testNamespace, name), body)
	pod.exec(id, "rm", "/tmp/not-ready")
	eventually(t, 5*time.Second, "ready again: 200", status(http.StatusOK))
	code, _ := agent.get(t, "/api/v1/pods/"+testNamespace+"/nope/ready")
	assert.Equal(t, http.StatusNotFound, code)

	_, probes := agent.get(t, "/metrics/probes")
	assert.Contains(t, probes, fmt.Sprintf(`prober_probe_total{container="web",namespace=%q,pod=%q,pod_uid=%q,probe_type="Readiness",result="successful"}`,
		testNamespace, name, pod.config.GetMetadata().GetUid()))
	assert.Contains(t, probes, `prober_probe_duration_seconds_bucket{container="web"`)
	assert.NotContains(t, probes, "cri_prober_", "only kubelet's probe series here")
	_, all := agent.get(t, "/metrics")
	for _, series := range []string{
		`cri_prober_cri_request_duration_seconds_count{code="OK",method="ListContainers"}`,
		`cri_prober_relist_duration_seconds_count`,
		fmt.Sprintf(`cri_prober_container_ready{container="web",namespace=%q,pod=%q} 1`, testNamespace, name),
		`cri_prober_probe_lateness_seconds_count`,
		`prober_probe_total{`,
		`go_goroutines`,
	} {
		assert.Contains(t, all, series)
	}

	// A liveness failure: one restart.
	pod.exec(id, "touch", "/tmp/unhealthy")
	eventually(t, 10*time.Second, "restarted and ready", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.RestartCount == 1 && ctr.State == "Running" && ctr.Ready
	})
	_, restarts := agent.get(t, "/metrics")
	// By pod and container, as kube-state-metrics counts restarts.
	series := fmt.Sprintf(`container="web",namespace=%q,pod=%q,pod_uid=%q`, testNamespace, name, pod.config.GetMetadata().GetUid())
	assert.Contains(t, restarts, `cri_prober_container_restarts_total{`+series+`,reason="liveness"} 1`)
	assert.Contains(t, restarts, `cri_prober_container_kills_total{`+series+`,probe_type="Liveness"} 1`)

	out, err := runBinary(t, "status", "--server", agent.server, "--namespace", testNamespace)
	require.NoError(t, err, out)
	assert.Regexp(t, name+`\s+1/1\s+Running\s+1\s`, out)
	assert.Contains(t, out, "web: ready, Running, restarts 1 — ")
	out, err = runBinary(t, "events", "--server", agent.server)
	require.NoError(t, err, out)
	for _, want := range []string{"Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500", "Killing", "Container web failed liveness probe, will be restarted", "Started"} {
		assert.Contains(t, out, want)
	}
	// The same pod, as kubectl would name it, in YAML; and a wait that
	// asks this agent rather than probing itself.
	out, err = runBinary(t, "history", "-n", testNamespace, name, "-c", "web", "-o", "yaml", "-s", agent.server)
	require.NoError(t, err, out)
	assert.Contains(t, out, "container: web")
	out, code = exitCode(t, "wait", testNamespace+"/"+name, "--for", "healthy", "--server", agent.server, "--timeout", "20s")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "pod "+testNamespace+"/"+name+" is healthy")

	// Kill the agent (SIGKILL) and start another: it rebuilds its state
	// from CRI and restarts nothing twice.
	agent.kill()
	agent = startBinary(t, dir, listen)
	eventually(t, 10*time.Second, "the new agent probes the pod", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.Ready && ctr.Probes["liveness"].Consecutive >= 3
	})
	list := instances(t, pod, "web")
	require.Len(t, list, 2, "attempt 0 kept exited, attempt 1 running, no other")
	assert.Equal(t, uint32(1), list[1].GetMetadata().GetAttempt())
	ctr, _ := agent.container(t, name, "web")
	assert.Equal(t, int32(1), ctr.RestartCount)
	assert.False(t, strings.Contains(agent.logs.String(), `reason="Killing"`), "the second agent killed nothing")
}
