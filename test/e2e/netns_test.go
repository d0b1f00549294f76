//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Contract (issue 8, kubernetes#86504): an application that listens only on
// the pod's 127.0.0.1 can be probed, over HTTP, TCP and gRPC, without curl
// in its image and without an exec probe, when its pod opts in with
// cri-prober.io/probe-network: pod. Without it the outcome is kubelet's
// (connection refused at the pod IP). Entering a pod's network namespace
// needs CAP_SYS_ADMIN; without it the probes err (never fail) and say why.
func TestProbeFromThePodsNetwork(t *testing.T) {
	c := dial(t)
	localOnly := []string{"/bin/target", "-http", "127.0.0.1:8080", "-grpc", "127.0.0.1:5000", "-tcp", "127.0.0.1:9000"}
	probes := map[string]string{
		spec.ReadinessAnnotation: `{"httpGet":{"port":8080,"path":"/ready"},"periodSeconds":1}`,
		spec.LivenessAnnotation:  `{"grpc":{"port":5000},"periodSeconds":1}`,
		spec.StartupAnnotation:   `{"tcpSocket":{"port":9000},"periodSeconds":1}`,
	}
	inside := uniqueName("netns-pod")
	runPodNamed(t, c, inside, map[string]string{spec.ProbeNetworkAnnotation: spec.ProbeNetworkPod}).
		startContainer(container{name: "app", image: targetImage, command: localOnly, annotations: probes})
	outside := uniqueName("netns-node")
	runPodNamed(t, c, outside, nil).
		startContainer(container{name: "app", image: targetImage, command: localOnly, annotations: probes})

	agent := startBinaryWith(t, t.TempDir(), freePort(t), "-all,+sys_admin")
	eventually(t, 15*time.Second, "the opted-in pod ready through all three kinds", func() bool {
		ctr, ok := agent.container(t, inside, "app")
		return ok && ctr.Ready && ctr.Started && ctr.Probes["liveness"].Result == "success"
	})
	eventually(t, 10*time.Second, "the other pod probed at its IP, as kubelet would", func() bool {
		ctr, ok := agent.container(t, outside, "app")
		return ok && ctr.Probes["startup"].Result == "failure"
	})
	ctr, _ := agent.container(t, outside, "app")
	assert.False(t, ctr.Ready)
	assert.Contains(t, ctr.Probes["startup"].Output, "connection refused")

	// The one-off `probe` command follows the pod's choice too.
	out, err := runBinary(t, "probe", "--runtime-endpoint", endpoint, testNamespace+"/"+inside, "-c", "app", "--startup")
	require.NoError(t, err, out)
	assert.Contains(t, out, "result:   success")
	out, err = runBinary(t, "probe", "--runtime-endpoint", endpoint, testNamespace+"/"+outside, "-c", "app", "--startup")
	require.Error(t, err)
	assert.Contains(t, out, "connection refused")

	// Without CAP_SYS_ADMIN: an error that says what is missing, no failure.
	agent.kill()
	weak := startBinaryWith(t, t.TempDir(), freePort(t), "-all")
	eventually(t, 10*time.Second, "the probe errs for want of the capability", func() bool {
		ctr, ok := weak.container(t, inside, "app")
		return ok && ctr.Probes["startup"].Error != ""
	})
	ctr, _ = weak.container(t, inside, "app")
	assert.Contains(t, ctr.Probes["startup"].Error, "needs CAP_SYS_ADMIN")
	assert.Equal(t, "unknown", ctr.Probes["startup"].Result)
}
