package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var staticNode = Static{NodeName: "Node1", Now: func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }}

const staticWeb = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  volumes:
  - {name: data, emptyDir: {}}
  containers:
  - name: app
    image: localhost/busybox:test
    volumeMounts: [{name: data, mountPath: /data}]
`

// A static pod is what kubelet's file source makes of its manifest:
// named <name>-<node> (the node name lowercased), a UID that hashes the
// manifest, the node and the file, kubelet's config annotations, the
// node name and the API server's defaults.
func TestStaticPodIdentity(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	require.NoError(t, os.WriteFile(file, []byte(staticWeb), 0o644))
	r := load(file, &staticNode)
	require.Empty(t, r.Errors)
	require.Len(t, r.Pods, 1)
	p := r.Pods[0]
	assert.Equal(t, "web-node1", p.Name)
	assert.Equal(t, "shop", p.Namespace)
	assert.Len(t, p.UID, 32, "fnv128a, hex")
	obj := p.Object
	assert.Equal(t, "web-node1", obj.Name)
	assert.Equal(t, "Node1", obj.Spec.NodeName)
	assert.Equal(t, p.UID, obj.Annotations[ConfigHashAnnotation])
	assert.Equal(t, "file", obj.Annotations[ConfigSourceAnnotation])
	assert.NotEmpty(t, obj.Annotations[ConfigFirstSeenAnnotation])
	assert.Equal(t, "/dev/termination-log", obj.Spec.Containers[0].TerminationMessagePath, "the API server's defaults")

	again := load(file, &staticNode).Pods[0]
	assert.Equal(t, p.UID, again.UID, "the same manifest is the same pod: the agent adopts it after a restart")

	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(staticWeb, "busybox:test", "busybox:other", 1)), 0o644))
	assert.NotEqual(t, p.UID, load(file, &staticNode).Pods[0].UID, "an edited manifest is another pod")
	moved := filepath.Join(dir, "moved.yaml")
	require.NoError(t, os.WriteFile(moved, []byte(staticWeb), 0o644))
	assert.NotEqual(t, p.UID, load(moved, &staticNode).Pods[0].UID, "and so is one in another file")
	other := staticNode
	other.NodeName = "node2"
	assert.NotEqual(t, p.UID, load(file, &other).Pods[0].UID)

	attach := load(file, nil)
	require.Len(t, attach.Pods, 1)
	assert.Equal(t, "web", attach.Pods[0].Name, "read for pods made by others, a manifest is matched as written")
}

// What kubelet refuses in a static pod, and what the agent cannot set up,
// is refused at the field's line, saying what to do instead.
func TestStaticPodRefusals(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want string
	}{
		{name: "a secret volume", spec: `
  volumes:
  - name: creds
    secret: {secretName: creds}
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: "t.yaml:7: pod shop/t: spec.volumes[0].secret: Forbidden: static pods may not reference secrets (kubelet refuses the pod): there is no API server to read them from; put the files on the node and mount them with a hostPath volume, or set the values in env"},
		{name: "a config map in env", spec: `
  containers:
  - name: app
    image: localhost/busybox:test
    env:
    - name: A
      valueFrom: {configMapKeyRef: {name: cfg, key: a}}`,
			want: "pod shop/t: spec.containers[0].env[0].valueFrom.configMapKeyRef: Forbidden: static pods may not reference configmaps"},
		{name: "a service account", spec: `
  serviceAccountName: robot
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: "t.yaml:5: pod shop/t: spec.serviceAccountName: Forbidden: static pods may not reference serviceaccounts (kubelet refuses the pod): there is no API server to read them from; remove serviceAccountName"},
		{name: "a claim", spec: `
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: "static pods may not reference persistentvolumeclaims"},
		{name: "an nfs volume", spec: `
  volumes:
  - name: data
    nfs: {server: nas, path: /x}
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: `spec.volumes[0]: Forbidden: volume "data": not supported by cri-prober, which sets up emptyDir, hostPath and downwardAPI volumes only`},
		{name: "a projected volume of pod fields", spec: `
  volumes:
  - name: info
    projected:
      sources:
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: `t.yaml:7: pod shop/t: spec.volumes[0].projected: Forbidden: volume "info": kubelet cannot set up a projected volume without an API server`},
		{name: "no image", spec: `
  containers:
  - {name: app}`,
			want: "pod shop/t-node1: spec.containers[0].image: Required value: the image to run"},
		{name: "a mount of no volume", spec: `
  containers:
  - name: app
    image: localhost/busybox:test
    volumeMounts: [{name: data, mountPath: /data}]`,
			want: `spec.containers[0].volumeMounts[0].name: Not found: "data"`},
		{name: "dnsPolicy None without servers", spec: `
  dnsPolicy: None
  containers:
  - {name: app, image: localhost/busybox:test}`,
			want: "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when DNSPolicy is None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: t, namespace: shop}\nspec:" + tt.spec + "\n"
			r := loadData("t.yaml", []byte(doc), &staticNode)
			assert.Empty(t, r.Pods, "refused")
			require.NotEmpty(t, r.Errors)
			assert.Contains(t, r.Errors[0].Error(), tt.want)

			attach := loadData("t.yaml", []byte(doc), nil)
			assert.NotContains(t, errorTexts(attach.Errors), "static pods may not", "a manifest read for pods made by others needs none of it")
		})
	}
}

func errorTexts(errs []*Error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.String()
}
