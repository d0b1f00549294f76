//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Contract: a sandbox another client creates with a pod's UID and another
// name is not that pod. It is kept apart, with a problem and a
// PodUIDConflict event on both, and gets nothing of the pod's manifest:
// the exec probe, with the manifest's env expanded into it, runs in the
// pod's container only, although the other sandbox is newer (before, the
// newest ready sandbox and instance were the pod's current ones).
func TestUIDReuseKeptApart(t *testing.T) {
	parallel(t)
	c := dial(t)
	a := startAgent(t, c)
	name, other := uniqueName("web"), uniqueName("other")
	a.writeManifest(t, "web.yaml", name, `  - name: app
    env:
    - {name: TOKEN, value: s3cr3t}
    readinessProbe:
      exec: {command: ["sh", "-c", "echo $(TOKEN) > /tmp/got"]}
      periodSeconds: 1
`)
	web := runPodNamed(t, c, name, nil)
	webApp := web.start("app", "sleep", sleeper)
	theirs := runPodWithUID(t, c, other, web.config.GetMetadata().GetUid(), nil)
	theirApp := theirs.start("app", "sleep", sleeper)

	a.waitReady(t, name, "app", true, 10*time.Second)
	web.exec(webApp, "grep", "-qx", "s3cr3t", "/tmp/got")
	a.waitFor(t, other, "app", "running, unprobed", 5*time.Second, func(c pods.ContainerReport) bool { return c.ID == theirApp && !c.Probed })
	theirs.exec(theirApp, "sh", "-c", "test ! -e /tmp/got")

	p, ok := a.pod(other)
	require.True(t, ok)
	assert.Equal(t, theirs.id, p.SandboxID)
	assert.Empty(t, p.Source, "no manifest")
	require.Len(t, p.Problems, 1)
	assert.Contains(t, p.Problems[0], "is that of pod "+testNamespace+"/"+name)
	p, _ = a.pod(name)
	assert.Equal(t, web.id, p.SandboxID)
	require.Len(t, p.Problems, 1)
	assert.Contains(t, p.Problems[0], "pod "+testNamespace+"/"+other+" (sandbox "+theirs.id+") has this pod's UID")
	a.waitEvent(t, name, "", pods.ReasonUIDConflict, theirs.id, 5*time.Second)
	a.waitEvent(t, other, "", pods.ReasonUIDConflict, web.id, 5*time.Second)
}
