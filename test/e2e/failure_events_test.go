//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Issue 23: with --probe-failure-events=threshold, a real liveness probe's
// failures below failureThreshold are ProbeFailureIgnored (Normal), the
// one that reaches it Unhealthy (Warning), and the container is restarted
// as before.
func TestProbeFailureEventsThreshold(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgentConfig(t, c, func(cfg *engine.Config) { cfg.Prober.FailureEvents = prober.FailureEventsThreshold })
	pod := runPod(t, c, "ignored")
	name := pod.config.GetMetadata().GetName()
	id := pod.startContainer(container{name: "web", image: targetImage,
		annotations: map[string]string{spec.LivenessAnnotation: `{"httpGet":{"port":8080,"path":"/healthz"},"periodSeconds":1,"failureThreshold":3}`}})
	a.waitFor(t, name, "web", "liveness succeeded", 10*time.Second, func(ctr pods.ContainerReport) bool {
		return len(ctr.Probes) == 1 && ctr.Probes[0].Last != nil && ctr.Probes[0].Last.Outcome == results.OutcomeSuccess
	})
	pod.exec(id, "touch", "/tmp/unhealthy")

	a.waitEvent(t, name, "web", prober.ReasonLivenessFailed, "Container web failed liveness probe", 15*time.Second)
	const out = "HTTP probe failed with statuscode: 500"
	var got []string
	for _, reason := range []string{prober.ReasonProbeFailureIgnored, prober.ReasonUnhealthy} {
		for _, e := range a.events.matching(name, "web", reason, "") {
			got = append(got, fmt.Sprintf("%s %s %d/%d %s", e.Type, e.Reason, e.Count, e.Threshold, e.Message))
		}
	}
	assert.Equal(t, []string{
		events.Normal + " ProbeFailureIgnored 1/3 Liveness probe failed (1/3, will be ignored): " + out,
		events.Normal + " ProbeFailureIgnored 2/3 Liveness probe failed (2/3, will be ignored): " + out,
		events.Warning + " Unhealthy 3/3 Liveness probe failed: " + out,
	}, got)
}
