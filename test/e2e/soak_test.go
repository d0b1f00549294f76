//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/test/harness"
)

// soakPod is one pod of the real-containerd soak and what the test does to
// it while the agent runs.
type soakPod struct {
	role       string
	containers string // the manifest's container list
	// act runs every tick with the time since the start; it changes the
	// container through exec as a flapping application would.
	act      func(p *pod, id string, t, d time.Duration)
	restarts int
}

// during reports whether t lies in [from, from+length) of every period.
func during(t, period, from, length time.Duration) bool {
	return t%period >= from && t%period < from+length
}

// toggle makes file exist while on is true (only on a change).
func toggle(p *pod, id, file string, on bool, state map[string]bool) {
	key := id + file
	if state[key] == on {
		return
	}
	state[key] = on
	if on {
		p.exec(id, "touch", file)
	} else {
		p.exec(id, "rm", "-f", file)
	}
}

var agentMetric = func(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + name + ` ([0-9.e+]+)$`)
}

// agentResources is the agent process's goroutines, fds and RSS (MiB) as
// its /metrics reports them: the floor of five scrapes over a second.
func (a *runningAgent) resources(t *testing.T) (goroutines, fds, rss float64) {
	t.Helper()
	goroutines, fds, rss = 1e18, 1e18, 1e18
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for range 5 {
		_, body := a.get(t, "/metrics")
		read := func(name string) float64 {
			m := agentMetric(name).FindStringSubmatch(body)
			require.NotNil(t, m, name)
			v, err := strconv.ParseFloat(m[1], 64)
			require.NoError(t, err)
			return v
		}
		goroutines = min(goroutines, read("go_goroutines"))
		fds = min(fds, read("process_open_fds"))
		rss = min(rss, read("process_resident_memory_bytes")/(1<<20))
		<-tick.C
	}
	return goroutines, fds, rss
}

// Contract (issue 7): the soak's short variant on a real containerd: the
// agent (`cri-prober run`) probes pods whose applications flap — readiness
// coming and going (HTTP and exec probes), liveness failing below its
// threshold, liveness failing for good, a process exiting — and restarts
// exactly the two that must be restarted, once each, with its goroutines,
// fds and RSS flat. CRI_PROBER_E2E_SOAK sets the duration (make soak: 3m).
func TestSoakOnContainerd(t *testing.T) {
	d := 30 * time.Second
	if v := os.Getenv("CRI_PROBER_E2E_SOAK"); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "CRI_PROBER_E2E_SOAK")
	}
	const liveness = `    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 3
`
	web := "  - name: web\n    image: localhost/target:test\n"
	flapping := map[string]bool{}
	pods := []soakPod{
		{role: "readiness flapping (HTTP)", containers: web + liveness + `    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 1
`, act: func(p *pod, id string, t, _ time.Duration) {
			toggle(p, id, "/tmp/not-ready", during(t, 10*time.Second, 5*time.Second, 3*time.Second), flapping)
		}},
		{role: "readiness flapping (exec)", containers: web + liveness + `    readinessProbe:
      exec: {command: [sh, -c, "test ! -f /tmp/not-ready"]}
      periodSeconds: 1
`, act: func(p *pod, id string, t, _ time.Duration) {
			toggle(p, id, "/tmp/not-ready", during(t, 10*time.Second, 2*time.Second, 3*time.Second), flapping)
		}},
		{role: "liveness failing below its threshold", containers: web + liveness, act: func(p *pod, id string, t, _ time.Duration) {
			toggle(p, id, "/tmp/unhealthy", during(t, 10*time.Second, 7*time.Second, 1200*time.Millisecond), flapping)
		}},
		{role: "liveness failing until restarted", containers: web + liveness, restarts: 1, act: func(p *pod, id string, t, d time.Duration) {
			if t >= d/3 {
				toggle(p, id, "/tmp/unhealthy", true, flapping)
			}
		}},
		{role: "process exiting", containers: web + liveness, restarts: 1, act: func(p *pod, id string, t, d time.Duration) {
			if t >= d/2 && !flapping[id+"exit"] {
				flapping[id+"exit"] = true
				// The target exits on SIGTERM; the exec may end with it.
				p.client.ExecSync(p.t.Context(), id, []string{"kill", "1"}, 5*time.Second) //nolint:errcheck
			}
		}},
		{role: "steady (gRPC liveness, TCP readiness)", containers: `  - name: web
    image: localhost/target:test
    livenessProbe:
      grpc: {port: 5000}
      periodSeconds: 1
    readinessProbe:
      tcpSocket: {port: 9000}
      periodSeconds: 1
`},
	}

	c := dial(t)
	dir := t.TempDir()
	names := make([]string, len(pods))
	for i, sp := range pods {
		names[i] = uniqueName(fmt.Sprintf("soak%d", i))
		require.NoError(t, os.WriteFile(filepath.Join(dir, names[i]+".yaml"), []byte(podManifest(names[i], sp.containers)), 0o644))
	}
	agent := startBinary(t, dir, freePort(t))
	running := make([]*pod, len(pods))
	ids := make([]string, len(pods))
	for i := range pods {
		running[i] = runPodNamed(t, c, names[i], nil)
		ids[i] = running[i].startContainer(container{name: "web", image: targetImage})
	}
	eventually(t, 20*time.Second, "every pod ready", func() bool {
		for _, n := range names {
			ctr, ok := agent.container(t, n, "web")
			if !ok || !ctr.Ready {
				return false
			}
		}
		return true
	})
	g0, f0, r0 := agent.resources(t)
	startupLogs := len(agent.logs.String()) // failures while the targets started are not the soak's

	// A soak runs for wall-clock time by nature: the applications change on
	// a ticker.
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < d {
		<-tick.C
		for i, sp := range pods {
			if sp.act != nil && ids[i] != "" {
				sp.act(running[i], ids[i], time.Since(start), d)
			}
			if sp.restarts > 0 && runningAttempt(t, running[i], "web") > 0 {
				ids[i] = "" // restarted: the new instance is left healthy
			}
		}
	}
	for i, sp := range pods {
		if sp.act != nil && ids[i] != "" {
			for _, f := range []string{"/tmp/not-ready", "/tmp/unhealthy"} {
				toggle(running[i], ids[i], f, false, flapping)
			}
		}
	}
	eventually(t, 30*time.Second, "the planned restarts done and every pod ready", func() bool {
		for i, sp := range pods {
			ctr, ok := agent.container(t, names[i], "web")
			if !ok || !ctr.Ready || int(ctr.RestartCount) != sp.restarts || ctr.State != "Running" {
				return false
			}
		}
		return true
	})
	g1, f1, r1 := agent.resources(t)

	logs := agent.logs.String()[startupLogs:]
	var rows []string
	for i, sp := range pods {
		list := instances(t, running[i], "web")
		runningNow := 0
		for _, ctr := range list {
			if ctr.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				runningNow++
			}
		}
		assert.Equal(t, 1, runningNow, "%s: one instance running", sp.role)
		assert.Equal(t, sp.restarts, runningAttempt(t, running[i], "web"), "%s: restarts", sp.role)
		failed := strings.Count(logs, fmt.Sprintf(`reason="Unhealthy" pod="%s/%s"`, testNamespace, names[i]))
		kills := strings.Count(logs, fmt.Sprintf(`reason="Killing" pod="%s/%s"`, testNamespace, names[i]))
		switch {
		case sp.act == nil:
			assert.Zero(t, failed, "%s: no probe failure", sp.role)
		case sp.role != "process exiting":
			assert.Positive(t, failed, "%s: the application flapped for real", sp.role)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d |", sp.role, failed, kills, sp.restarts, runningAttempt(t, running[i], "web")))
	}
	assert.LessOrEqual(t, g1, g0+5, "agent goroutines flat")
	assert.LessOrEqual(t, f1, f0+5, "agent fds flat")
	assert.LessOrEqual(t, r1, r0*1.3+10, "agent RSS flat")

	report := fmt.Sprintf("Last `make soak` on a private containerd: %s, %s, %d pods of the target image probed by `cri-prober run`.\n\n"+
		"| pod | probe failures logged (after all were ready) | kills | restarts planned | restarts done |\n|---|---|---|---|---|\n%s\n\n"+
		"| agent | goroutines | open fds | RSS MiB |\n|---|---|---|---|\n| all pods ready | %.0f | %.0f | %.1f |\n| after the soak | %.0f | %.0f | %.1f |\n",
		time.Now().UTC().Format("2006-01-02"), d, len(pods), strings.Join(rows, "\n"), g0, f0, r0, g1, f1, r1)
	t.Log("\n" + report)
	if path := os.Getenv("CRI_PROBER_E2E_SOAK_REPORT"); path != "" && !t.Failed() {
		require.NoError(t, harness.WriteSection(path, "soak-containerd", report))
	}
}
