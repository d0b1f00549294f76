package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A static pod's local storage limits bind nothing under kubelet (it
// never evicts a static pod): each is a warning naming its field, unless
// the agent enforces them; a manifest of pods others make has none.
func TestLocalStorageWarnings(t *testing.T) {
	const doc = `apiVersion: v1
kind: Pod
metadata: {name: t, namespace: shop}
spec:
  volumes:
  - {name: scratch, emptyDir: {sizeLimit: 1Mi}}
  - {name: ram, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  - {name: plain, emptyDir: {}}
  initContainers:
  - name: setup
    image: localhost/busybox:test
    resources: {limits: {ephemeral-storage: 2Mi}}
  containers:
  - name: app
    image: localhost/busybox:test
    resources:
      limits: {ephemeral-storage: 1Mi}
      requests: {ephemeral-storage: 512Ki}
  - name: requested
    image: localhost/busybox:test
    resources: {requests: {ephemeral-storage: 512Ki}}
  - name: quiet
    image: localhost/busybox:test
`
	tests := []struct {
		name   string
		static *Static
		want   []string
	}{
		{name: "ignored, kubelet's outcome", static: &staticNode, want: []string{
			`t.yaml:6: pod shop/t-node1: spec.volumes[0].emptyDir.sizeLimit: Invalid value: "1Mi": volume "scratch": kubelet never evicts a static pod (it counts as critical), so this limit binds nothing`,
			`t.yaml:12: pod shop/t-node1: container setup: spec.initContainers[0].resources.limits[ephemeral-storage]: Invalid value: "2Mi": kubelet never evicts a static pod`,
			`t.yaml:17: pod shop/t-node1: container app: spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: "1Mi": kubelet never evicts a static pod`,
			`t.yaml:21: pod shop/t-node1: container requested: spec.containers[1].resources.requests[ephemeral-storage]: Invalid value: "512Ki": binds nothing`,
		}},
		{name: "enforced", static: &Static{NodeName: "node1", LocalStorageLimits: LocalStorageEnforce}, want: []string{
			`t.yaml:21: pod shop/t-node1: container requested: spec.containers[1].resources.requests[ephemeral-storage]: Invalid value: "512Ki": binds nothing`,
		}},
		{name: "pods others make", static: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := loadData("t.yaml", []byte(doc), tt.static)
			require.Empty(t, r.Errors)
			require.Len(t, r.Warnings, len(tt.want), "%s", errorTexts(r.Warnings))
			for i, w := range tt.want {
				assert.Contains(t, r.Warnings[i].Error(), w)
			}
		})
	}
}

// A pod-level ephemeral-storage is left out by kubelet's pod-level
// resources (cpu, memory and hugepages only): a warning says so.
func TestPodLevelEphemeralStorageWarning(t *testing.T) {
	const doc = `apiVersion: v1
kind: Pod
metadata: {name: t, namespace: shop}
spec:
  resources: {limits: {ephemeral-storage: 1Mi}}
  containers:
  - {name: app, image: localhost/busybox:test}
`
	r := loadData("t.yaml", []byte(doc), &staticNode)
	require.Empty(t, r.Errors)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0].Error(), `spec.resources.limits[ephemeral-storage]: Invalid value: "1Mi": ignored: pod-level resources take cpu, memory and hugepages only`)
}
