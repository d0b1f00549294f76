//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// unixAgent is the agent run as a process serving its API on a unix
// socket (the only place gates may be changed without a web
// configuration).
type unixAgent struct {
	*runningAgent
	socket string
	client *http.Client
}

func startUnixAgent(t *testing.T, manifests, socket string, flags ...string) *unixAgent {
	t.Helper()
	server := "unix://" + socket
	a := &unixAgent{socket: socket, runningAgent: startProcess(t, server, binaryPath, append([]string{"run", "--runtime-endpoint", endpoint,
		"--pod-manifests", manifests, "--listen", server, "--pod-manifests-interval", "200ms"}, flags...)...)}
	a.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	t.Cleanup(a.client.CloseIdleConnections)
	eventually(t, 10*time.Second, "agent serving", func() bool {
		code, _, err := a.request("/healthz")
		return err == nil && code == http.StatusOK
	})
	return a
}

func (a *unixAgent) request(path string) (int, string, error) {
	resp, err := a.client.Get("http://agent" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// pod is the pod as /api/v1/pods shows it.
func (a *unixAgent) pod(t *testing.T, name string) (api.Pod, bool) {
	t.Helper()
	code, body, err := a.request("/api/v1/pods")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	var list api.PodList
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	for _, p := range list.Pods {
		if p.Namespace == testNamespace && p.Name == name {
			return p, true
		}
	}
	return api.Pod{}, false
}

func readyCondition(p api.Pod) api.Condition {
	for _, c := range p.Conditions {
		if c.Type == "Ready" {
			return c
		}
	}
	return api.Condition{}
}

// Contract (issue 23, item 4; kubelet's GeneratePodReadyCondition): a pod
// with a readiness gate is not Ready while its condition is not set
// (ReadinessGatesNotReady, kubelet's message), though its containers are;
// `cri-prober gate set` makes it Ready (/api/v1/pods, /ready, status);
// with --state-dir the condition survives the agent's restart (SIGKILL),
// so the pod is Ready from the new agent's first report on; setting it
// False makes the pod not Ready again; each change is an event naming
// who made it.
func TestReadinessGateSetByTheCLI(t *testing.T) {
	c := dial(t)
	name := uniqueName("gate")
	dir := t.TempDir()
	manifest := strings.Replace(podManifest(name, `  - name: web
    image: localhost/target:test
`), "spec:\n", "spec:\n  readinessGates:\n  - conditionType: example.com/lb\n", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(manifest), 0o644))
	state := filepath.Join(t.TempDir(), "state")
	socket := filepath.Join(t.TempDir(), "api.sock")
	agent := startUnixAgent(t, dir, socket, "--state-dir", state)
	pod := runPodNamed(t, c, name, nil)
	pod.startContainer(container{name: "web", image: targetImage})

	// Step 1: its container ready, the pod not: the gate's condition does
	// not exist.
	var p api.Pod
	eventually(t, 10*time.Second, "the container running and ready", func() bool {
		var ok bool
		p, ok = agent.pod(t, name)
		return ok && len(p.Containers) == 1 && p.Containers[0].Ready
	})
	assert.False(t, p.Ready)
	assert.Equal(t, []string{"example.com/lb"}, p.ReadinessGates)
	ready := readyCondition(p)
	assert.Equal(t, "False", ready.Status)
	assert.Equal(t, "ReadinessGatesNotReady", ready.Reason)
	assert.Equal(t, `corresponding condition of pod readiness gate "example.com/lb" does not exist.`, ready.Message)
	readyPath := "/api/v1/pods/" + testNamespace + "/" + name + "/ready"
	code, body, err := agent.request(readyPath)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `"readinessGates": {
    "example.com/lb": false
  }`)

	// Step 2: gate set makes it Ready, at once.
	out, err := runBinary(t, "gate", "set", "--server", agent.server, testNamespace+"/"+name, "example.com/lb=True")
	require.NoError(t, err, out)
	assert.Equal(t, "pod "+testNamespace+"/"+name+": example.com/lb=True; the pod is ready\n", out)
	p, _ = agent.pod(t, name)
	assert.True(t, p.Ready, "/api/v1/pods")
	assert.Equal(t, "True", readyCondition(p).Status)
	code, _, err = agent.request(readyPath)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "/ready")
	out, err = runBinary(t, "status", "-o", "wide", "-n", testNamespace, "--server", agent.server)
	require.NoError(t, err, out)
	assert.Regexp(t, name+`\s+1/1\s+Running\s+0\s+\S+\s+\S+\s+\S+\s+1/1\s`, out, "READINESS GATES 1/1")
	assert.Contains(t, out, "conditions: example.com/lb=True")
	_, err = os.Stat(filepath.Join(state, "gates.json"))
	require.NoError(t, err, "saved before it was answered")

	// Step 3: the agent killed and started again keeps it: Ready from its
	// first report of the running container on.
	agent.kill()
	agent = startUnixAgent(t, dir, socket, "--state-dir", state)
	eventually(t, 10*time.Second, "the container reported", func() bool {
		var ok bool
		p, ok = agent.pod(t, name)
		return ok && len(p.Containers) == 1 && p.Containers[0].Ready
	})
	assert.True(t, p.Ready, "the gate kept across the agent's restart")
	out, err = runBinary(t, "gate", "list", "--server", agent.server, testNamespace+"/"+name)
	require.NoError(t, err, out)
	assert.Regexp(t, name+`\s+example.com/lb\s+True\s`, out)

	// Step 4: False makes it not Ready again; both changes are events
	// naming who made them.
	out, err = runBinary(t, "gate", "set", "--server", agent.server, "-n", testNamespace, name, "example.com/lb=False")
	require.NoError(t, err, out)
	assert.Contains(t, out, "example.com/lb=False (was True); the pod is not ready")
	code, _, err = agent.request(readyPath)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	p, _ = agent.pod(t, name)
	assert.Equal(t, `the status of pod readiness gate "example.com/lb" is not "True", but False`, readyCondition(p).Message)
	out, err = runBinary(t, "events", "--server", agent.server, "-n", testNamespace)
	require.NoError(t, err, out)
	assert.Regexp(t, `ReadinessGateSet\s+`+testNamespace+`/`+name+`\s+Condition "example.com/lb" set to False \(was True\) by uid 0 \(pid \d+\) on the unix socket`, out)
}
