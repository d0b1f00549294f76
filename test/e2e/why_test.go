//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// Contract (issue 8, kubernetes#6532): `cri-prober why` says why the
// agent restarted a container — the failures that reached the threshold,
// the grace period, the exit, the back-off — and, with --state-dir, still
// says it after the agent itself was killed and started again.
func TestWhyAcrossAgentRestart(t *testing.T) {
	c := dial(t)
	name := uniqueName("why")
	dir := manifestDir(t, name, `  - name: web
    image: localhost/target:test
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 3
    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 1
`)
	state := filepath.Join(t.TempDir(), "state")
	listen := freePort(t)
	agent := startBinaryWith(t, dir, listen, "-all", "--state-dir", state)
	pod := runPodNamed(t, c, name, nil)
	id := pod.startContainer(container{name: "web", image: targetImage})
	eventually(t, 10*time.Second, "probed", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.Probes["liveness"].Consecutive >= 1
	})
	pod.exec(id, "touch", "/tmp/unhealthy")
	eventually(t, 15*time.Second, "restarted and ready", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.RestartCount == 1 && ctr.State == "Running" && ctr.Ready
	})
	ctr, _ := agent.container(t, name, "web")
	eventually(t, 5*time.Second, "the replacement's readiness saved", func() bool {
		raw, err := os.ReadFile(filepath.Join(state, "probes.json"))
		var saved struct {
			Probes []struct{ ContainerID, Type, Result string }
		}
		return err == nil && json.Unmarshal(raw, &saved) == nil && slices.ContainsFunc(saved.Probes, func(p struct{ ContainerID, Type, Result string }) bool {
			return p.ContainerID == ctr.ID && p.Type == "Readiness" && p.Result == "Success"
		})
	})

	// KEP-4781: the next agent takes the ready container over as ready,
	// from its first report on, before its own probes run.
	agent.kill()
	agent = startBinaryWith(t, dir, listen, "-all", "--state-dir", state)
	var first api.Container
	eventually(t, 10*time.Second, "reported", func() bool {
		var ok bool
		first, ok = agent.container(t, name, "web")
		return ok
	})
	assert.True(t, first.Ready, "ready from the agent's first report on")
	assert.Contains(t, agent.logs.String(), `"Restoring the probes' state"`)
	_, body := agent.get(t, "/api/v1/pods/"+testNamespace+"/"+name+"/restarts")
	var r api.Restarts
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.Len(t, r.Restarts, 1, "kept across the agent's restart")
	e := r.Restarts[0]
	assert.Equal(t, restart.CauseLiveness, e.Cause)
	assert.Equal(t, id, e.ContainerID)
	assert.Equal(t, int64(3), e.GracePeriodSeconds)
	assert.Equal(t, uint32(1), e.Attempt)
	require.Len(t, e.Failures, 2)
	assert.Equal(t, "HTTP probe failed with statuscode: 500", e.Failures[1].Output)

	out, err := runBinary(t, "why", "--server", agent.server, testNamespace+"/"+name)
	require.NoError(t, err, out)
	for _, want := range []string{
		"web: restarted", "as attempt 1",
		"why: its liveness probe failed 2 time(s) in a row (failureThreshold 2):",
		"2/2  HTTP probe failed with statuscode: 500",
		"killed with a 3 s grace period",
	} {
		assert.Contains(t, out, want)
	}
}
