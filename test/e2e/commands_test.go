//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

var crictlPath = os.Getenv("CRI_PROBER_E2E_CRICTL")

// exitCode runs the binary and returns its output and exit code.
func exitCode(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := runBinary(t, args...)
	if ee, ok := err.(*exec.ExitError); ok {
		return out, ee.ExitCode()
	}
	require.NoError(t, err)
	return out, 0
}

// Contract (issue 5): `probe` runs one probe through the agent's handlers:
// the container's own (from annotations) or given inline; exit 0 success,
// 1 failure, 2 error.
func TestProbeCommand(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "probecmd")
	name := pod.config.GetMetadata().GetName()
	id := pod.startContainer(container{name: "web", image: targetImage,
		annotations: map[string]string{spec.ReadinessAnnotation: `{"httpGet":{"port":8080,"path":"/ready"}}`}})
	ref := testNamespace + "/" + name
	rt := []string{"--runtime-endpoint", endpoint}
	probe := func(args ...string) (string, int) {
		return exitCode(t, append(append([]string{"probe"}, rt...), args...)...)
	}
	eventually(t, 10*time.Second, "target serving", func() bool {
		_, code := probe(ref, "-c", "web", "--tcp", "8080")
		return code == 0
	})

	out, code := probe(ref, "-c", "web", "--readiness")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "result:   success\noutput:   ready")

	out, code = probe("--container-id", id[:8], "--http-get", "8080/status/503")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "result:   failure\noutput:   HTTP probe failed with statuscode: 503")

	out, code = probe("--container-id", id, "--", "cat", "/etc/passwd")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "root:x:0:0")

	// The command after -- is taken word for word: a shell script works.
	out, code = probe("-n", testNamespace, name, "-c", "web", "--", "sh", "-c", "echo 'two  spaces' && test -f /etc/passwd")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "output:   two  spaces")

	out, code = probe("--container-id", id, "--timeout", "1s", "--", "sleep", "5")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, `output:   command timed out: "sleep 5" timed out after 1s`)

	out, code = probe(ref, "--grpc", "5000", "-c", "web")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "service healthy")

	out, code = probe("--liveness", ref, "-c", "web")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "has no liveness probe")

	out, code = probe("--container-id", "doesnotexist", "--tcp", "80")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, `no container with ID "doesnotexist"`)

	out, code = probe("--container-id", id)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "give a probe: for a container")
}

// writeCrictlConfigs writes crictl JSON configs for a pod in the e2e
// namespace whose container has a readiness probe given as annotation.
func writeCrictlConfigs(t *testing.T, name, readiness string) (podJSON, ctrJSON string) {
	t.Helper()
	dir := t.TempDir()
	pod := map[string]any{
		"metadata": map[string]any{"name": name, "namespace": testNamespace, "uid": uniqueName("uid")},
		"hostname": name,
		"linux":    map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"pid": 1}}},
	}
	ctr := map[string]any{
		"metadata":    map[string]any{"name": "web"},
		"image":       map[string]any{"image": targetImage},
		"annotations": map[string]string{spec.ReadinessAnnotation: readiness},
		"linux":       map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"pid": 1}}},
	}
	podJSON, ctrJSON = filepath.Join(dir, "pod.json"), filepath.Join(dir, "ctr.json")
	for path, v := range map[string]any{podJSON: pod, ctrJSON: ctr} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	return podJSON, ctrJSON
}

// removePodNamed removes the sandboxes with this name when the test ends
// (crictl made them, so the test does not know their IDs, nor does a
// parallel test's client list them).
func removePodNamed(t *testing.T, name string) {
	t.Helper()
	c := dialNode(t)
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, p := range list {
			if p.GetMetadata().GetName() == name {
				if err := c.StopPodSandbox(ctx, p.GetId()); err != nil {
					t.Errorf("cleanup: %v", err)
				}
				if err := c.RemovePodSandbox(ctx, p.GetId()); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		}
	})
}

// Contract (issue 5): a CI script creates a pod with crictl and gates on
// `cri-prober wait --for ready`, which exits 0 once the readiness probe
// passes; with a probe that never passes it exits 1 after the timeout and
// shows the last results.
func TestWaitInACrictlScript(t *testing.T) {
	parallel(t)
	require.NotEmpty(t, crictlPath, "CRI_PROBER_E2E_CRICTL: run through make test-e2e")
	script, err := filepath.Abs("testdata/crictl-wait.sh")
	require.NoError(t, err)
	run := func(name, readiness, timeout string) (string, int) {
		removePodNamed(t, name)
		podJSON, ctrJSON := writeCrictlConfigs(t, name, readiness)
		cmd := exec.CommandContext(t.Context(), script, podJSON, ctrJSON, testNamespace+"/"+name, timeout)
		cmd.Env = append(os.Environ(), "CRICTL="+crictlPath, "CRI_PROBER="+binaryPath, "CONTAINER_RUNTIME_ENDPOINT="+endpoint)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		require.NoError(t, err, string(out))
		return string(out), 0
	}

	name := uniqueName("cigate")
	start := time.Now()
	out, code := run(name, `{"httpGet":{"port":8080,"path":"/ready"},"periodSeconds":1}`, "60s")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "pod "+testNamespace+"/"+name+" is ready")
	t.Logf("crictl runp/create/start + wait --for ready took %s", time.Since(start).Round(time.Millisecond))

	out, code = run(uniqueName("cinever"), `{"httpGet":{"port":8080,"path":"/status/503"},"periodSeconds":1}`, "3s")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "timed out after 3s")
	assert.Contains(t, out, "readiness: failure")
	assert.Contains(t, out, "HTTP probe failed with statuscode: 503")
}

// Contract: wait --for started and healthy, from a manifest, and a pod that
// does not exist yet is waited for.
func TestWaitStartedAndHealthy(t *testing.T) {
	parallel(t)
	c := dial(t)
	dir := t.TempDir()
	name := uniqueName("waitfor")
	manifest := strings.Join([]string{
		"apiVersion: v1", "kind: Pod", "metadata: {name: " + name + ", namespace: " + testNamespace + "}", "spec:", "  containers:",
		"  - name: web", "    image: localhost/target:test",
		"    startupProbe: {httpGet: {port: 8080, path: /healthz}, periodSeconds: 1, failureThreshold: 30}",
		"    livenessProbe: {grpc: {port: 5000}, periodSeconds: 1}", "",
	}, "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(manifest), 0o644))

	done := make(chan struct{})
	var out string
	var code int
	go func() {
		defer close(done)
		out, code = exitCode(t, "wait", testNamespace+"/"+name, "-r", endpoint, "--for", "healthy", "--pod-manifests", dir, "--timeout", "60s")
	}()
	runPodNamed(t, c, name, nil).startContainer(container{name: "web", image: targetImage})
	<-done
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "is healthy")

	out, code = exitCode(t, "wait", "-n", testNamespace, name, "--runtime-endpoint", endpoint, "--for", "started", "-c", "web", "--pod-manifests", dir, "--timeout", "30s")
	assert.Equal(t, 0, code, out)
}

// Contract (issue 5): validate and explain, as shipped, on the examples.
// The demo's manifests are validated as a directory the agent reads: a
// copy, the test's own (the checkout may be another user's, which the
// agent refuses).
func TestValidateAndExplainBinary(t *testing.T) {
	parallel(t)
	demo := t.TempDir()
	data, err := os.ReadFile("../../examples/demo/pods.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(demo, "pods.yaml"), data, 0o644))
	out, code := exitCode(t, "validate", demo)
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "ok: 3 valid pod(s)\n", out)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: a\n    image: i\n    livenessProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 2\n"), 0o644))
	out, code = exitCode(t, "validate", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, bad+":10: pod default/x: container a: spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1")

	out, code = exitCode(t, "explain", "-f", "../../examples/demo/pods.yaml")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "gives up:            29s – 31s after the container starts, if it never passes")
}
