//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Contract (issue 21, security review findings 3 and 6), on containerd:
// a crictl user's annotation probe cannot aim the agent at another host
// (the container's problem, naming the flag that allows it, and never
// probed); aimed at its own pod, what it fetched is not kept (kubelet
// keeps no success output); and no probe, from any source, reaches a
// cloud metadata address: refused before anything is sent, an error
// thrown away, so the container is never ready and never restarted for
// it.
func TestProbesStayAwayFromTheNodesSecrets(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgentConfig(t, c, func(cfg *engine.Config) { cfg.Prober.NoStartupJitter = true })
	const headers = `"httpHeaders":[{"name":"Metadata-Flavor","value":"Google"}]`

	aimed := uniqueName("aimed")
	runPodNamed(t, c, aimed, nil).startContainer(container{name: "app", image: targetImage, annotations: map[string]string{
		spec.ReadinessAnnotation: `{"httpGet":{"host":"127.0.0.1","port":8080,"path":"/headers",` + headers + `},"periodSeconds":1}`,
	}})
	own := uniqueName("own")
	runPodNamed(t, c, own, nil).startContainer(container{name: "app", image: targetImage, annotations: map[string]string{
		spec.ReadinessAnnotation: `{"httpGet":{"port":8080,"path":"/headers",` + headers + `},"periodSeconds":1}`,
	}})
	metadata := uniqueName("metadata")
	a.writeManifest(t, metadata+".yaml", metadata, `  - name: app
    image: localhost/target:test
    readinessProbe:
      httpGet: {host: 169.254.169.254, port: 80, path: /computeMetadata/v1/instance/service-accounts/default/token}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {host: 169.254.169.254, port: 80}
      periodSeconds: 1
      failureThreshold: 1
`)
	runPodNamed(t, c, metadata, nil).startContainer(container{name: "app", image: targetImage})

	a.waitFor(t, aimed, "app", "its host refused", 10*time.Second, func(c pods.ContainerReport) bool { return len(c.Problems) > 0 })
	got, _ := a.container(aimed, "app")
	assert.Contains(t, got.Problems[0], "container app: cri-prober.io/readiness-probe.httpGet.host: Forbidden")
	assert.Contains(t, got.Problems[0], "--annotation-probe-hosts=any")
	assert.False(t, got.Probed)

	a.waitReady(t, own, "app", true, 10*time.Second)
	got, _ = a.container(own, "app")
	for _, p := range got.Probes {
		if p.Type == results.Readiness {
			require.NotNil(t, p.Last)
			assert.Equal(t, results.OutcomeSuccess, p.Last.Outcome)
			assert.Empty(t, p.Last.Output, "what the probe fetched is not kept")
		}
	}
	p, _ := a.pod(own)
	for _, h := range a.engine.Histories.For(p.Key) {
		for _, o := range h.Recent {
			if o.Outcome == results.OutcomeSuccess { // a failure's output is kept, as kubelet's events carry it
				assert.Empty(t, o.Output, "nor in the history")
			}
		}
	}

	refused := a.waitEvent(t, metadata, "app", "Unhealthy", "refused to probe 169.254.169.254", 15*time.Second)
	assert.Contains(t, refused.Message, "--allow-probe-destination 169.254.169.254/32")
	// Liveness with failureThreshold 1 errs every second: were a refusal
	// a failure, the container would be restarted at once.
	eventually(t, 15*time.Second, "five refused liveness runs", func() bool {
		return len(a.events.matching(metadata, "app", "Unhealthy", "Liveness probe errored")) >= 5
	})
	got, _ = a.container(metadata, "app")
	assert.False(t, got.Ready)
	assert.Zero(t, got.RestartCount, "never restarted for a probe the agent refused to send")
	assert.Empty(t, a.events.matching(metadata, "app", "Killing", ""))
	assert.False(t, strings.Contains(a.events.String(), "Metadata-Flavor: Google"), "nothing fetched in an event")
}
