package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/inputs"
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
		"pods.yaml":    inputs.WebPod(3) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
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

	var kinds []spec.NoticeKind
	for _, n := range r.Skipped {
		kinds = append(kinds, n.Kind)
	}
	assert.Equal(t, []spec.NoticeKind{spec.NoticeNotManifestFile, spec.NoticeNotManifestFile, spec.NoticeNotManifestFile, spec.NoticeDirectory,
		spec.NoticeCRIConfig, spec.NoticeNotObject, spec.NoticeNotPod, spec.NoticeNotPod, spec.NoticeNotObject, spec.NoticeNotObject}, kinds)

	// The agent: the same pods and errors; what it skips it logs, apart.
	d := NewDir(dir, nil)
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
	require.NoError(t, os.WriteFile(path, []byte(inputs.WebPod(3)), 0o644))
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

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../spec/testdata/good/pods.yaml")
	require.NoError(t, err)
	bad, err := os.ReadFile("../spec/testdata/bad/no-handler.yaml")
	require.NoError(t, err)
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	write("a.yaml", good)
	write("b.yml", bad)
	write("c.json", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"containers":[{"name":"x","image":"y"}]}}`))
	write("notes.txt", []byte("hello"))
	write(".a.yaml.swp", []byte("editor junk"))

	r := Load(dir)
	var names []string
	for _, p := range r.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	assert.Equal(t, []string{"shop/web", "default/worker"}, names, "the bad file does not stop the good ones")
	msgs := messages(r.Errors)
	require.Len(t, msgs, 2, "%q", msgs)
	assert.Contains(t, msgs[0], "b.yml:10: pod shop/no-handler: container app: spec.containers[0].livenessProbe: Required value")
	assert.Contains(t, msgs[1], "c.json:1: pod shop/web: pod is already defined at "+filepath.Join(dir, "a.yaml")+":2; this definition is ignored")
	assert.Equal(t, []string{"skipped " + filepath.Join(dir, "notes.txt") + ": not a manifest (.txt)"}, notices(r.Skipped), "not an error")
	pods, errs := LoadDir(dir)
	assert.Equal(t, r.Pods, pods)
	assert.Equal(t, r.Errors, errs)

	_, errs = LoadDir(filepath.Join(dir, "missing"))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "cannot read the manifest directory")
}

func TestManifestDirReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	d := NewDir(dir, nil)
	assert.True(t, d.Reload(), "the first read is a change")
	pods, errs := d.Pods()
	assert.Empty(t, pods)
	assert.Empty(t, errs)
	<-d.Changed()
	assert.False(t, d.Reload(), "nothing changed")

	good, err := os.ReadFile("../spec/testdata/good/pods.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pods.yaml"), good, 0o644))
	assert.True(t, d.Reload())
	pods, _ = d.Pods()
	assert.Len(t, pods, 2)
	select {
	case <-d.Changed():
	default:
		t.Fatal("no change signalled")
	}

	require.NoError(t, os.Remove(filepath.Join(dir, "pods.yaml")))
	assert.True(t, d.Reload())
	pods, _ = d.Pods()
	assert.Empty(t, pods)
}

func TestManifestDirMissing(t *testing.T) {
	d := NewDir(filepath.Join(t.TempDir(), "nope"), nil)
	assert.True(t, d.Reload())
	_, errs := d.Pods()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "cannot read the manifest directory")
	assert.False(t, d.Reload(), "the same error is not news")
}

// A file given by name and the same bytes on standard input give the same
// pods, configs and errors (validate FILE and validate -f -).
func TestLoadFileIsLoadData(t *testing.T) {
	files, err := filepath.Glob("../spec/testdata/cri/*")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			r, stdin := Load(path), LoadData(path, data)
			assert.Equal(t, r.Errors, stdin.Errors)
			assert.Equal(t, len(r.Configs), len(stdin.Configs))
			assert.Equal(t, len(r.Pods), len(stdin.Pods))
		})
	}
}

// Files given by name (play FILE... -) follow a manifest directory's rule
// for a pod defined twice, with its message: the first definition wins, in
// the order given, across files and standard input alike.
func TestLoadFilesDuplicatePod(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(a, []byte(inputs.WebPod(3)), 0o644))
	require.NoError(t, os.WriteFile(b, []byte(inputs.WebPod(5)), 0o644))
	r, err := LoadFiles([]string{a, "-", b, filepath.Join(dir, "missing.yaml")}, strings.NewReader(inputs.WebPod(7)))
	require.NoError(t, err)
	require.Len(t, r.Pods, 1)
	assert.Equal(t, a+":1", r.Pods[0].Source, "the first definition wins")
	assert.Equal(t, []string{
		"-:1: pod shop/web: pod is already defined at " + a + ":1; this definition is ignored: remove one, or rename this pod",
		b + ":1: pod shop/web: pod is already defined at " + a + ":1; this definition is ignored: remove one, or rename this pod",
		filepath.Join(dir, "missing.yaml") + ": cannot read it: no such file or directory",
	}, messages(r.Errors))

	// The same files as a directory: the same message.
	d := Load(dir)
	require.Len(t, d.Pods, 1)
	assert.Equal(t, messages(r.Errors)[1], messages(d.Errors)[0])
}
