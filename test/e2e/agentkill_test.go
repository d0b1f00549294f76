//go:build e2e

package e2e

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// watchRunning counts, every 50 ms until the test ends, how many instances
// of a container run at once, and returns the most seen.
func watchRunning(t *testing.T, p *pod, name string) (most func() int) {
	var max atomic.Int32
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			list, err := p.client.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: p.id})
			if err == nil {
				n := int32(0)
				for _, c := range list {
					if c.GetMetadata().GetName() == name && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
						n++
					}
				}
				if n > max.Load() {
					max.Store(n)
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
	return func() int { return int(max.Load()) }
}

// Contract (issue 7): an agent killed (SIGKILL) in the middle of a restart
// sequence leaves nothing half done that the next agent gets wrong: it
// rebuilds its state from CRI alone, restarts the container once, never
// runs two instances of it, and the attempt numbers go on from the
// runtime's. (The agent killed after a completed restart is
// TestAgentAPIAndRestartAcrossAgentRestart; the state left between create
// and start is rebuilt in the restarter's unit tests.)
func TestAgentKilledDuringARestart(t *testing.T) {
	tests := []struct {
		name string
		// containers of the pod's manifest; web is the one made unhealthy.
		containers string
		command    []string
		// killAt is the agent log line after which the agent is killed.
		killAt string
	}{
		{
			name: "while counting failures",
			containers: `  - name: web
    image: localhost/target:test
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 3
`,
			killAt: `reason="Unhealthy"`,
		},
		{
			// The agent dies while the old instance is given its grace
			// period (kill, then create: no replacement exists yet).
			// containerd stops waiting when the agent's call goes away, so
			// the old instance, ignoring SIGTERM, runs on; the next agent
			// probes it again and restarts it once.
			name: "during the kill's grace period",
			containers: `  - name: web
    image: localhost/target:test
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 4
`,
			command: []string{"/bin/target", "-ignore-sigterm"},
			killAt:  `reason="Killing"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t)
			name := uniqueName("agentkill")
			dir := manifestDir(t, name, tt.containers)
			listen := freePort(t)
			first := startBinary(t, dir, listen)
			pod := runPodNamed(t, c, name, nil)
			id := pod.startContainer(container{name: "web", image: targetImage, command: tt.command})
			most := watchRunning(t, pod, "web")
			eventually(t, 10*time.Second, "probed", func() bool {
				ctr, ok := first.container(t, name, "web")
				return ok && ctr.Probes["liveness"].Consecutive >= 1
			})

			pod.exec(id, "touch", "/tmp/unhealthy")
			eventually(t, 15*time.Second, "the first agent reaches "+tt.killAt, func() bool {
				return strings.Contains(first.logs.String(), tt.killAt)
			})
			first.kill()
			second := startBinary(t, dir, listen)

			eventually(t, 30*time.Second, "attempt 1 running and ready", func() bool {
				ctr, ok := second.container(t, name, "web")
				return ok && ctr.Attempt == 1 && ctr.State == "Running" && ctr.Probes["liveness"].Result == "success"
			})
			list := instances(t, pod, "web")
			require.Len(t, list, 2, "attempt 0 exited, attempt 1 running, nothing else")
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, list[0].GetState())
			assert.Equal(t, uint32(1), list[1].GetMetadata().GetAttempt())
			assert.Equal(t, 1, most(), "never two instances running at once")
			logs := second.logs.String()
			assert.Equal(t, 1, strings.Count(logs, `reason="Killing"`), "one kill by the second agent:\n%s", logs)
			assert.Equal(t, 1, strings.Count(logs, `reason="Started"`), "one start by the second agent:\n%s", logs)
			t.Logf("second agent:\n%s", grepLines(logs, `"Event"`))
		})
	}
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
