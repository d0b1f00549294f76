//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
)

// Contract (kubelet v1.36.3's SyncPod and status manager): a liveness
// kill, the replacement's start and its postStart run in one sync, and
// the pod's status stays the one that sync began with: the killed
// instance running and ready from its exit until the replacement's
// postStart ended. run --not-ready-on-exit: not ready (the instance shown
// exited) from the exit until the replacement is ready.
//
// kubelet v1.36.3 with this pod (postStart 4 s there, 3 s here; exec and
// httpGet readiness alike), its read-only /pods sampled every 0.25 s:
// Ready in every sample from the liveness kill's exit to the end of the
// replacement's postStart (-2.2 s to +4.1 s of the exit on the killed
// instance, then the replacement, ready).
func TestOwnedReadinessThroughAProbeKillReplacement(t *testing.T) {
	for _, tt := range []struct {
		name           string
		notReadyOnExit bool
	}{
		{"kubelet's", false},
		{"not ready on exit", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t)
			o := startOwnerWith(t, c, func(cfg *engine.Config) { cfg.Restart.NotReadyOnExit = tt.notReadyOnExit })
			name := uniqueName("killready")
			o.write(t, "pod.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; touch /tmp/alive; sleep 3600 & wait"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["cat", "/tmp/alive"]}
      periodSeconds: 1
      failureThreshold: 1
    lifecycle:
      postStart: {exec: {command: ["sleep", "3"]}}
`, name, testNamespace))
			o.waitReady(t, podName(name), "app", true, 30*time.Second)
			old := o.running(t, name, "app")
			require.NotEmpty(t, old)
			o.execOut(t, old, "rm", "/tmp/alive")

			// Sampled until the replacement is ready.
			type sample struct {
				at    time.Time
				ready bool
				id    string
				state cri.ContainerState
			}
			var samples []sample
			deadline := time.Now().Add(30 * time.Second)
			for {
				r, ok := o.report(name)
				require.True(t, ok)
				s := sample{at: time.Now(), ready: r.Ready, id: r.Containers[0].ID, state: r.Containers[0].State}
				samples = append(samples, s)
				if s.id != old && s.ready {
					break
				}
				require.True(t, time.Now().Before(deadline), "the replacement ready within 30 s")
				<-time.After(50 * time.Millisecond)
			}
			st, err := c.ContainerStatus(t.Context(), old, false)
			require.NoError(t, err)
			exit := time.Unix(0, st.GetStatus().GetFinishedAt())
			require.False(t, exit.IsZero())
			replacement := samples[len(samples)-1].id
			st, err = c.ContainerStatus(t.Context(), replacement, false)
			require.NoError(t, err)
			replacementStarted := time.Unix(0, st.GetStatus().GetStartedAt())

			var held, shownReplacement int
			for _, s := range samples {
				since := s.at.Sub(exit)
				switch {
				case s.id != old:
					shownReplacement++
					assert.GreaterOrEqual(t, s.at.Sub(replacementStarted), 2500*time.Millisecond, "the replacement shown only once its postStart (3 s) ended")
				case since < 0:
					assert.True(t, s.ready, "ready before the exit (%s)", since)
				case !tt.notReadyOnExit:
					held++
					assert.True(t, s.ready, "ready after the exit, as kubelet shows it (+%s)", since)
					assert.Equal(t, cri.StateRunning, s.state, "the killed instance shown running (+%s)", since)
				case since > time.Second: // the exit listed (its event, else the next relist)
					held++
					assert.False(t, s.ready, "not ready after the exit (+%s)", since)
					assert.Equal(t, cri.StateExited, s.state, "the killed instance shown exited (+%s)", since)
				}
			}
			assert.Greater(t, held, 20, "sampled while the replacement's postStart ran")
			assert.Positive(t, shownReplacement)
		})
	}
}
