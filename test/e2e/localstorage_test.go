//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/eviction"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// localStorageManifests are a static pod whose container writes 2 MiB
// into a 1Mi emptyDir, and one whose container writes 2 MiB into its
// writable layer past its 1Mi ephemeral-storage limit.
func localStorageManifests(o *owner, t *testing.T, volume, layer string) {
	o.write(t, "volume.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 30
  volumes:
  - {name: scratch, emptyDir: {sizeLimit: 1Mi}}
  containers:
  - name: writer
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "head -c 2097152 /dev/zero > /data/fill && touch /tmp/done; exec sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /data}]
`, volume, testNamespace))
	o.write(t, "layer.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: writer
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "head -c 2097152 /dev/zero > /fill && touch /tmp/done; exec sleep 3600"]
    resources:
      limits: {ephemeral-storage: 1Mi}
`, layer, testNamespace))
}

// Contract (kubelet's eviction manager, eviction_manager.go
// localStorageEviction): kubelet never evicts a static pod ("cannot evict
// a critical pod"), so by default the pods run on past their limits, and
// the agent says so at load time, naming each field. kubelet v1.36.3 with
// the same manifests: both pods stayed Running with 2 MiB written, and
// its log said "Eviction manager: cannot evict a critical pod".
func TestOwnedPodLocalStorageLimitsIgnored(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwner(t, c)
	volume, layer := uniqueName("scratch"), uniqueName("layer")
	localStorageManifests(o, t, volume, layer)

	for _, name := range []string{volume, layer} {
		eventually(t, 60*time.Second, name+" wrote 2 MiB", func() bool {
			id := o.running(t, name, "writer")
			if id == "" {
				return false
			}
			resp, err := c.ExecSync(t.Context(), id, []string{"test", "-f", "/tmp/done"}, 5*time.Second)
			return err == nil && resp.GetExitCode() == 0
		})
	}
	// The load-time warning names the file's field, once per manifest.
	warned := func(name, field string) bool {
		return len(o.events.matching(podName(name), "", spec.ReasonLocalStorageLimitIgnored, field)) == 1
	}
	assert.True(t, warned(volume, `spec.volumes[0].emptyDir.sizeLimit: Invalid value: "1Mi": volume "scratch": kubelet never evicts a static pod`), "%s", o.events)
	assert.True(t, warned(layer, `spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: "1Mi": kubelet never evicts a static pod`), "%s", o.events)

	// A round of the eviction manager evicts nothing: kubelet's outcome.
	o.engine.Eviction.Synchronize(t.Context())
	assert.Empty(t, o.engine.Eviction.Evicted())
	for _, name := range []string{volume, layer} {
		r, ok := o.report(name)
		require.True(t, ok)
		assert.Equal(t, corev1.PodRunning, r.Phase, name)
		assert.NotEmpty(t, o.running(t, name, "writer"), name)
	}
}

// Contract (kubelet's emptyDirLimitEviction and
// podEphemeralStorageLimitEviction, for a pod that is not critical): with
// --local-storage-limits=enforce the pods are evicted: Failed, reason
// Evicted, kubelet's message, the Evicted event, their containers
// stopped, and they stay so (a Failed static pod is not started again
// until its manifest changes). The layer pod's one container holds the
// pod's only limit, so the pod's total trips first, as under kubelet.
func TestOwnedPodLocalStorageLimitsEnforced(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwnerWith(t, c, func(cfg *engine.Config) {
		cfg.Eviction = eviction.Config{LocalStorageLimits: spec.LocalStorageEnforce, MonitoringPeriod: time.Second}
	})
	volume, layer := uniqueName("scratch"), uniqueName("layer")
	localStorageManifests(o, t, volume, layer)

	for name, msg := range map[string]string{
		volume: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
		layer:  "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ",
	} {
		var r pods.PodReport
		eventually(t, 90*time.Second, name+" evicted", func() bool {
			var ok bool
			r, ok = o.report(name)
			return ok && r.Reason == pods.ReasonEvicted
		})
		assert.Equal(t, corev1.PodFailed, r.Phase, name)
		assert.Equal(t, msg, r.Message, name)
		ev := o.events.matching(podName(name), "", eviction.ReasonEvicted, "")
		require.Len(t, ev, 1, "%s", o.events)
		assert.Equal(t, msg, ev[0].Message)
		assert.Equal(t, "Warning", ev[0].Type)
		eventually(t, 30*time.Second, name+"'s container stopped", func() bool { return o.running(t, name, "writer") == "" })
	}
	// Not started again.
	for _, name := range []string{volume, layer} {
		r, _ := o.report(name)
		assert.Equal(t, corev1.PodFailed, r.Phase)
		assert.Empty(t, o.running(t, name, "writer"))
		assert.Len(t, o.events.matching(podName(name), "writer", restart.ReasonStarted, ""), 1, "started once")
	}
}
