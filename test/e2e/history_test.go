//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// Contract (issue 8, kubernetes#115823): probe failures say where they stand
// against the threshold, in events and in a history kept per probe across
// the container's restarts, failures apart from successes.
func TestHistoryAndCountedEvents(t *testing.T) {
	c := dial(t)
	name := uniqueName("history")
	dir := manifestDir(t, name, `  - name: web
    image: localhost/target:test
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 3
`)
	agent := startBinary(t, dir, freePort(t))
	pod := runPodNamed(t, c, name, nil)
	id := pod.startContainer(container{name: "web", image: targetImage})
	eventually(t, 10*time.Second, "probed", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.Probes["liveness"].Consecutive >= 2
	})
	pod.exec(id, "touch", "/tmp/unhealthy")
	eventually(t, 20*time.Second, "restarted and probed again", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.RestartCount == 1 && ctr.Probes["liveness"].Result == "success"
	})

	_, body := agent.get(t, "/api/v1/pods/"+testNamespace+"/"+name+"/history")
	var h api.History
	require.NoError(t, json.Unmarshal([]byte(body), &h))
	require.Len(t, h.Probes, 1)
	live := h.Probes[0]
	assert.Equal(t, "liveness", live.Type)
	require.Len(t, live.Failures, 3, "the three failures that reached the threshold")
	for i, f := range live.Failures {
		assert.Equal(t, "failure", f.Result)
		assert.Equal(t, i+1, f.Consecutive)
		assert.Equal(t, 3, f.Threshold)
		assert.Equal(t, i == 2, f.Changed, "the third changed the result")
		assert.Equal(t, id, f.ContainerID, "the failed instance")
	}
	last := live.Recent[len(live.Recent)-1]
	assert.Equal(t, "success", last.Result)
	assert.NotEqual(t, id, last.ContainerID, "the replacement, in the same history")

	_, metrics := agent.get(t, "/metrics")
	assert.Contains(t, metrics, `cri_prober_probe_failures_total{probe_type="Liveness",reason="http_status"} 3`, "why, in a bounded label")
	assert.Contains(t, metrics, `cri_prober_probe_failures_total{probe_type="Liveness",reason="timeout"} 0`, "every reason from the start")

	out, err := runBinary(t, "history", "--server", agent.server, testNamespace+"/"+name)
	require.NoError(t, err, out)
	assert.Contains(t, out, "failure  3/3*")
	out, err = runBinary(t, "events", "--server", agent.server)
	require.NoError(t, err, out)
	for _, count := range []string{"1/3", "2/3", "3/3"} {
		assert.Regexp(t, `Unhealthy\s+\S+/web\s+`+count+`\s+Liveness probe failed: HTTP probe failed with statuscode: 500`, out)
	}
	assert.True(t, strings.Contains(agent.logs.String(), `message="Liveness probe failed: HTTP probe failed with statuscode: 500" count=2 threshold=3`),
		"the log keeps kubelet's message, with the count beside it")
}
