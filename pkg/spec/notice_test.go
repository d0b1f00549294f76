package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What is not a Pod manifest is skipped with a notice, not an error: other
// names, subdirectories, YAML that is no Kubernetes object, objects that
// define no containers, crictl configs. What defines containers that would
// be neither run nor probed (a Deployment, a list of pods, a pod without
// apiVersion and kind) is an error. Fails on the old code: a README or a
// Service failed validate.
func TestLoadSkipsWhatIsNotAManifest(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"README.md":    "# Pods\n\nSome text: here\n",
		"LICENSE":      "Apache License\n",
		"notes.txt":    "hello",
		"pods.yaml":    webPod(3) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
		"values.yaml":  "replicas: 3\nimage: nginx\n",
		"text.yaml":    "just some text\n",
		"service.yml":  "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
		"package.json": `{"name": "tools", "version": "1.0.0"}`,
		"crictl.json":  `{"metadata": {"name": "app"}, "image": {"image": "busybox"}}`,
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: app, image: x}]
`,
		"list.yaml": `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: app, image: x}]}}
`,
		"typeless.yaml": "metadata: {name: a}\nspec:\n  containers: [{name: app, image: x}]\n",
		"kindless.yaml": "apiVersion: v1\nmetadata: {name: a}\nspec:\n  containers: [{name: app, image: x}]\n",
		"v2pod.yaml":    "apiVersion: v2\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: app, image: x}]\n",
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "old"), 0o755))

	r := Load(dir)
	require.Len(t, r.Pods, 1)
	assert.Equal(t, "web", r.Pods[0].Name)
	in := func(s string) string { return filepath.Join(dir, s) }
	assert.Equal(t, []string{
		"skipped " + in("LICENSE") + ": not a manifest (no extension)",
		"skipped " + in("README.md") + ": not a manifest (.md)",
		"skipped " + in("notes.txt") + ": not a manifest (.txt)",
		"skipped " + in("old") + ": a directory: manifests in subdirectories are not read",
		"skipped " + in("crictl.json") + ":1: not a manifest: a crictl container config (the agent reads its annotations from the runtime once crictl has used it; name the file alone to validate it)",
		"skipped " + in("package.json") + ": not a manifest (no apiVersion or kind)",
		"skipped " + in("pods.yaml") + ":12: kind ConfigMap (v1): not a Pod: nothing in it is probed",
		"skipped " + in("service.yml") + ":1: kind Service (v1): not a Pod: nothing in it is probed",
		"skipped " + in("text.yaml") + ": not a manifest (text, not a Kubernetes object)",
		"skipped " + in("values.yaml") + ": not a manifest (no apiVersion or kind)",
	}, notices(r.Skipped))
	assert.Equal(t, []string{
		in("deploy.yaml") + ":2: kind Deployment (apps/v1): only Pods are read, as kubelet reads static pods: the containers of this Deployment are neither run nor probed; write them in a Pod manifest (apiVersion: v1, kind: Pod), or move the file out of the directory",
		in("kindless.yaml") + ":1: kind is missing: add kind: Pod",
		in("list.yaml") + `:2: kind List: only single Pods are read: write each pod as a document of its own, separated by "---" lines`,
		in("typeless.yaml") + ":1: apiVersion and kind are missing: add apiVersion: v1 and kind: Pod",
		in("v2pod.yaml") + `:1: apiVersion "v2": a Pod's apiVersion is v1: set apiVersion: v1`,
	}, messages(r.Errors))
	assert.False(t, r.OK())

	var kinds []NoticeKind
	for _, n := range r.Skipped {
		kinds = append(kinds, n.Kind)
	}
	assert.Equal(t, []NoticeKind{NoticeNotManifestFile, NoticeNotManifestFile, NoticeNotManifestFile, NoticeDirectory,
		NoticeCRIConfig, NoticeNotObject, NoticeNotPod, NoticeNotPod, NoticeNotObject, NoticeNotObject}, kinds)

	// The agent: the same pods and errors; what it skips it logs, apart.
	d := NewManifestDir(dir, nil)
	d.Reload()
	pods, errs := d.Pods()
	assert.Equal(t, r.Pods, pods)
	assert.Equal(t, r.Errors, errs)
	assert.Equal(t, r.Skipped, d.Skipped())

	// Only skipped files: all is well.
	for _, name := range []string{"deploy.yaml", "list.yaml", "typeless.yaml", "kindless.yaml", "v2pod.yaml"} {
		require.NoError(t, os.Remove(in(name)))
	}
	r = Load(dir)
	assert.Empty(t, r.Errors)
	assert.True(t, r.OK(), "notices are not problems")
	assert.NotEmpty(t, r.Skipped)
}

// A file given by name is read whatever its name; a missing one is an
// error that says so.
func TestLoadFileByName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.txt")
	require.NoError(t, os.WriteFile(path, []byte(webPod(3)), 0o644))
	r := Load(path)
	require.Len(t, r.Pods, 1)
	assert.True(t, r.OK())

	r = Load(filepath.Join(dir, "missing.yaml"))
	require.Len(t, r.Errors, 1)
	assert.Equal(t, filepath.Join(dir, "missing.yaml")+": cannot read it: no such file or directory", r.Errors[0].Error())

	// A file of YAML that is no manifest: a notice, not an error.
	require.NoError(t, os.WriteFile(path, []byte("a: b\n"), 0o644))
	r = Load(path)
	assert.True(t, r.OK())
	assert.Equal(t, []string{"skipped " + path + ": not a manifest (no apiVersion or kind)"}, notices(r.Skipped))
	assert.False(t, strings.Contains(r.Skipped[0].String(), ":1:"), "the whole file")
}
