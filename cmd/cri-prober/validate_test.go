package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// validate -o json|yaml: each file with its pods, each problem with its
// file, line, pod, container, field, message and severity, what was
// skipped; the exit code as without -o.
func TestValidateOutputData(t *testing.T) {
	dir := usersManifestDir(t)
	writeFile(t, dir, "api.yaml", `apiVersion: v1
kind: Pod
metadata: {name: api, namespace: shop}
spec:
  containers:
  - name: app
    image: app
    livenessProbe:
      httpGet: {port: http}
`)
	good := "../../pkg/spec/testdata/good/pods.yaml"

	out, _, err := runCLI(t, "validate", "-o", "json", dir, good)
	assert.ErrorIs(t, err, errProblemsFound, "exit code 1, as without -o")
	var got validateReport
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	want := validateReport{Pods: 3, Errors: 1, Warnings: 1, Files: []validatedFile{
		{File: filepath.Join(dir, "README.md"), Pods: []validatedPod{}, Configs: []validatedConfig{}, Problems: []validateProblem{},
			Skipped: []validateSkipped{{Reason: "not a manifest (.md)"}}},
		{File: filepath.Join(dir, "api.yaml"), Pods: []validatedPod{{Namespace: "shop", Name: "api", Line: 1}}, Configs: []validatedConfig{}, Skipped: []validateSkipped{},
			Problems: []validateProblem{{File: filepath.Join(dir, "api.yaml"), Line: 9, Namespace: "shop", Pod: "api", Container: "app",
				Field: "spec.containers[0].livenessProbe.httpGet.port", Severity: "warning",
				Message: `Invalid value: "http": no port named "http" among the container's ports: this probe errors at every run and never changes its result, as under kubelet; declare the port or use its number`}}},
		{File: filepath.Join(dir, "web.yaml"), Pods: []validatedPod{}, Configs: []validatedConfig{}, Skipped: []validateSkipped{},
			Problems: []validateProblem{{File: filepath.Join(dir, "web.yaml"), Line: 11, Namespace: "shop", Pod: "web", Container: "app",
				Field: "spec.containers[0].readinessProbe.periodSeconds", Severity: "error",
				Message: `duplicate key "periodSeconds" (first at line 10): remove one; a decoder would silently keep only the last`}}},
		{File: good, Pods: []validatedPod{{Namespace: "shop", Name: "web", Line: 2}, {Namespace: "default", Name: "worker", Line: 36}},
			Configs: []validatedConfig{}, Problems: []validateProblem{}, Skipped: []validateSkipped{}},
	}}
	assert.Equal(t, want, got)

	// The field names are the API: a CI step reads them as they are.
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	problem := raw["files"].([]any)[1].(map[string]any)["problems"].([]any)[0].(map[string]any)
	assert.ElementsMatch(t, []string{"file", "line", "namespace", "pod", "container", "field", "message", "severity"}, keys(problem))
	assert.ElementsMatch(t, []string{"files", "pods", "configs", "errors", "warnings"}, keys(raw))

	out, _, err = runCLI(t, "validate", "-o", "yaml", good)
	require.NoError(t, err, "exit code 0")
	var fromYAML validateReport
	require.NoError(t, yaml.Unmarshal([]byte(out), &fromYAML), out)
	assert.Equal(t, validateReport{Pods: 2, Files: want.Files[3:]}, fromYAML)

	out, _, err = runCLI(t, "validate", "-o", "json", "../../pkg/spec/testdata/cri/good-container.json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, 1, got.Configs)
	assert.Equal(t, []validatedConfig{{Kind: "container config", Container: "web"}}, got.Files[0].Configs)

	_, errOut, err := runCLI(t, "validate", "-o", "xml", good)
	assert.ErrorIs(t, err, errUsage, "exit code 2")
	assert.Contains(t, errOut, `-o "xml": want one of table, json, yaml`)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
