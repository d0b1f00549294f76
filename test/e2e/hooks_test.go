//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/hooks"
)

// Contract (issue 8): `run --webhook URL --on-transition CMD` tell a load
// balancer or an alerting system when a container becomes ready, stops
// being ready, or is restarted, with the pod's IP.
func TestTransitionHooks(t *testing.T) {
	var mu sync.Mutex
	var got []hooks.Transition
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr hooks.Transition
		if json.NewDecoder(r.Body).Decode(&tr) == nil {
			mu.Lock()
			got = append(got, tr)
			mu.Unlock()
		}
	}))
	defer srv.Close()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, tr := range got {
			out = append(out, tr.Transition)
		}
		return out
	}

	c := dial(t)
	name := uniqueName("hooks")
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
	log := filepath.Join(t.TempDir(), "transitions")
	startBinaryWith(t, dir, freePort(t), "-all", "--webhook", srv.URL,
		"--on-transition", `echo "$CRI_PROBER_TRANSITION $CRI_PROBER_POD/$CRI_PROBER_CONTAINER" >>`+log)
	pod := runPodNamed(t, c, name, nil)
	id := pod.startContainer(container{name: "web", image: targetImage})
	eventually(t, 10*time.Second, "ready", func() bool { return len(seen()) == 1 })
	pod.exec(id, "touch", "/tmp/not-ready")
	eventually(t, 10*time.Second, "not ready", func() bool { return len(seen()) == 2 })
	pod.exec(id, "touch", "/tmp/unhealthy")
	eventually(t, 15*time.Second, "restarted and ready again", func() bool { return len(seen()) >= 4 })

	assert.Equal(t, []string{hooks.Ready, hooks.NotReady, hooks.Restarted, hooks.Ready}, seen()[:4])
	st, err := c.PodSandboxStatus(t.Context(), pod.id, false)
	require.NoError(t, err)
	mu.Lock()
	for _, tr := range got {
		assert.Equal(t, name, tr.Pod)
		assert.Equal(t, "web", tr.Container)
		assert.Equal(t, st.GetStatus().GetNetwork().GetIp(), tr.PodIP)
	}
	mu.Unlock()
	eventually(t, 5*time.Second, "the command ran for each", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n") >= 4
	})
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, []string{"ready " + name + "/web", "not-ready " + name + "/web", "restarted " + name + "/web", "ready " + name + "/web"},
		strings.Split(strings.TrimSpace(string(b)), "\n")[:4])
}
