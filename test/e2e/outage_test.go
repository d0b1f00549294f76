//go:build e2e

package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopContainerd stops the private containerd (SIGTERM, as systemd would)
// and returns a function that starts it again on the same root; the
// function also runs when the test ends, so the next test finds containerd
// up whatever happened. Containers and their shims keep running meanwhile,
// as they do when a node's containerd restarts.
func stopContainerd(t *testing.T) (restart func()) {
	t.Helper()
	pidFile, up := os.Getenv("CRI_PROBER_E2E_CONTAINERD_PIDFILE"), os.Getenv("CRI_PROBER_E2E_CONTAINERD_UP")
	require.NotEmpty(t, pidFile, "CRI_PROBER_E2E_CONTAINERD_PIDFILE: run through make test-e2e")
	require.NotEmpty(t, up, "CRI_PROBER_E2E_CONTAINERD_UP: run through make test-e2e")
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	eventually(t, 30*time.Second, "containerd exited", func() bool { return syscall.Kill(pid, 0) != nil })

	started := false
	restart = func() {
		if started {
			return
		}
		started = true
		out, err := exec.Command(up, "--daemon-only").CombinedOutput()
		require.NoError(t, err, "restart containerd: %s", out)
	}
	t.Cleanup(restart)
	return restart
}

var goroutinesLine = regexp.MustCompile(`(?m)^go_goroutines (\d+)$`)

func (a *runningAgent) goroutines(t *testing.T) int {
	t.Helper()
	_, body := a.get(t, "/metrics")
	m := goroutinesLine.FindStringSubmatch(body)
	require.NotNil(t, m, "go_goroutines in /metrics")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// Contract (issue 7): containerd stopping is the agent's trouble, not the
// containers'. While it is away the agent keeps running, says so in
// /healthz and status, keeps probing over the network, counts an exec
// probe that cannot reach the runtime as an error (kubelet's: not a
// failure), and restarts nothing. When containerd is back, the agent
// reconnects by itself, probes everything again, and is back to the
// goroutines it had.
func TestRuntimeOutage(t *testing.T) {
	c := dial(t)
	name := uniqueName("outage")
	dir := manifestDir(t, name, `  - name: web
    image: localhost/target:test
    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 1
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 1
  - name: sidecar
    image: localhost/busybox:test
    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	agent := startBinary(t, dir, freePort(t))
	pod := runPodNamed(t, c, name, nil)
	pod.startContainer(container{name: "web", image: targetImage})
	pod.startContainer(container{name: "sidecar", image: busyboxImage, command: []string{"sleep", "3600"}})
	eventually(t, 15*time.Second, "both containers probed and ready", func() bool {
		web, ok1 := agent.container(t, name, "web")
		side, ok2 := agent.container(t, name, "sidecar")
		return ok1 && ok2 && web.Ready && side.Ready &&
			web.Probes["liveness"].Consecutive >= 2 && side.Probes["liveness"].Consecutive >= 2
	})
	before := agent.goroutines(t)

	restart := stopContainerd(t)
	down := time.Now()
	eventually(t, 10*time.Second, "/healthz says the runtime is unreachable", func() bool {
		code, body := agent.get(t, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "runtime unreachable")
	})
	eventually(t, 10*time.Second, "the exec probe errs while the runtime is away", func() bool {
		side, _ := agent.container(t, name, "sidecar")
		p := side.Probes["liveness"]
		return p.Result == "unknown" && p.Error != "" && p.LastProbeTime != nil && p.LastProbeTime.After(down)
	})
	eventually(t, 10*time.Second, "network probes go on", func() bool {
		web, _ := agent.container(t, name, "web")
		p := web.Probes["liveness"]
		return p.Result == "success" && p.LastProbeTime.After(down.Add(2*time.Second))
	})
	side, _ := agent.container(t, name, "sidecar")
	assert.Equal(t, "Success", side.Probes["liveness"].Stable, "an error is not a failure")
	cmd := exec.CommandContext(t.Context(), binaryPath, "status", "--server", agent.server, "--namespace", testNamespace)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	assert.Contains(t, stderr.String(), "WARNING: runtime unreachable since")
	assert.Regexp(t, name+`\s+2/2\s+Running\s+0\s`, string(out), "the pods as last seen")

	restart()
	back := time.Now()
	eventually(t, 15*time.Second, "/healthz ok again", func() bool { code, _ := agent.get(t, "/healthz"); return code == http.StatusOK })
	eventually(t, 15*time.Second, "the exec probe succeeds again", func() bool {
		side, _ := agent.container(t, name, "sidecar")
		p := side.Probes["liveness"]
		return p.Result == "success" && p.LastProbeTime.After(back)
	})
	t.Logf("runtime away %v; probes back %v after containerd", back.Sub(down).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))

	for _, n := range []string{"web", "sidecar"} {
		list := instances(t, pod, n)
		require.Len(t, list, 1, "%s: no restart", n)
		ctr, _ := agent.container(t, name, n)
		assert.True(t, ctr.Ready, n)
		assert.Zero(t, ctr.RestartCount, n)
	}
	logs := agent.logs.String()
	assert.NotContains(t, logs, `reason="Killing"`)
	// The exec liveness probe only erred while the runtime was away; a
	// readiness probe may fail at the pod's start, before its target
	// listens, which is not the outage's doing.
	if failed := grepLines(logs, "probe failed"); failed != "" {
		t.Logf("probe failures (below their threshold):\n%s", failed)
	}
	assert.NotContains(t, logs, "Liveness probe failed")
	assert.NotContains(t, logs, `reason="ContainerNotReady"`)
	assert.Contains(t, logs, "Relist succeeded again")
	// gRPC's reconnection and the event stream's settle within seconds.
	var after int
	eventually(t, 20*time.Second, "goroutines back to where they were", func() bool {
		after = agent.goroutines(t)
		return after <= before+2
	})
	t.Logf("goroutines: %d before the outage, %d after", before, after)
}
