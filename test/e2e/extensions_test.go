//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Contract (issue 8): the probe extensions (cri-prober.io/probe-extensions)
// on containerd. startInterval (Docker's --start-interval, moby#33410): a
// target that listens 2 s after it starts is ready within a second of that
// with a 500 ms start interval, where a 10 s period alone (kubelet) leaves it
// not ready until the second probe at 10 s. validStatusCodes, HEAD and
// failIfBodyNotMatchesRegexp (blackbox_exporter's names, kubernetes#55405,
// #49937) replace kubelet's verdict rules where set.
func TestProbeExtensions(t *testing.T) {
	parallel(t)
	c := dial(t)
	// The agent was just started: without its start-up jitter, which would
	// spread the first probes over their period and blur the comparison.
	a := startAgentConfig(t, c, func(cfg *engine.Config) { cfg.Prober.NoStartupJitter = true })
	readiness := func(path string) string {
		return fmt.Sprintf(`{"httpGet":{"port":8080,"path":%q},"periodSeconds":10}`, path)
	}
	start := func(name string, command []string, probe, extensions string) string {
		annotations := map[string]string{spec.ReadinessAnnotation: probe}
		if extensions != "" {
			annotations[spec.ExtensionsAnnotation] = extensions
		}
		p := runPodNamed(t, c, name, nil)
		p.startContainer(container{name: "app", image: targetImage, command: command, annotations: annotations})
		return name
	}
	slowStart := []string{"/bin/target", "-start-delay", "2s"}
	fast := start(uniqueName("start-interval"), slowStart, readiness("/ready"), `{"readinessProbe":{"startInterval":"500ms"}}`)
	started := time.Now()
	slow := start(uniqueName("period-only"), slowStart, readiness("/ready"), "")
	teapot := start(uniqueName("teapot"), nil, readiness("/status/418"), `{"readinessProbe":{"httpGet":{"validStatusCodes":[418]}}}`)
	head := start(uniqueName("head"), nil, readiness("/ready"), `{"readinessProbe":{"httpGet":{"method":"HEAD","validStatusCodes":[200]}}}`)
	picky := start(uniqueName("picky"), nil, readiness("/ready"), `{"readinessProbe":{"httpGet":{"failIfBodyNotMatchesRegexp":"^ok$"}}}`)

	ready := func(c pods.ContainerReport) bool { return c.Ready }
	at := a.waitFor(t, fast, "app", "ready with a 500 ms start interval", 8*time.Second, ready)
	t.Logf("start interval: ready %v after the container was started (it listens after 2 s)", at.Sub(started).Round(10*time.Millisecond))
	ctr, ok := a.container(slow, "app")
	require.True(t, ok)
	assert.False(t, ctr.Ready, "periodSeconds alone: the second probe is 10 s after the first")
	a.waitFor(t, teapot, "app", "418 is valid here", 10*time.Second, ready)
	a.waitFor(t, head, "app", "HEAD answered 200", 10*time.Second, ready)
	a.waitFor(t, picky, "app", "the body does not match", 10*time.Second, func(c pods.ContainerReport) bool {
		for _, p := range c.Probes {
			if p.Type == results.Readiness && p.Last != nil {
				return p.Last.Output == `HTTP probe failed: the body does not match "^ok$"`
			}
		}
		return false
	})
	ctr, _ = a.container(picky, "app")
	assert.False(t, ctr.Ready)
}
