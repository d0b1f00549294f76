//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	require.FileExists(t, binaryPath, "build it first (make build)")
	cmd := exec.CommandContext(t.Context(), binaryPath, args...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out) + string(ee.Stderr), err
	}
	return string(out), err
}

// Contract (issue 2): `cri-prober pods` shows each pod with its IP and
// containers, as a table and as JSON.
func TestPodsCommand(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "cli")
	pod.start("sleeper", "sleep", "3600")
	name := pod.config.GetMetadata().GetName()

	out, err := runBinary(t, "pods", "--runtime-endpoint", endpoint, "--namespace", testNamespace)
	require.NoError(t, err, out)
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == name {
			row = f
		}
	}
	require.NotNil(t, row, "pod %s missing from:\n%s", name, out)
	assert.Equal(t, testNamespace, row[0])
	assert.True(t, inSubnet(t, row[2]), "IP column %q", row[2])
	assert.Equal(t, "sleeper", row[3])
	assert.Equal(t, "Running", row[6])

	out, err = runBinary(t, "pods", "--runtime-endpoint", endpoint, "-o", "json")
	require.NoError(t, err, out)
	var snap struct {
		Pods []struct {
			ID, Name   string
			IPs        []string
			Containers []struct{ Name, State string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &snap))
	var found bool
	for _, p := range snap.Pods {
		if p.ID == pod.id {
			found = true
			require.Len(t, p.IPs, 1)
			assert.True(t, inSubnet(t, p.IPs[0]))
			require.Len(t, p.Containers, 1)
			assert.Equal(t, "Running", p.Containers[0].State)
		}
	}
	assert.True(t, found, "pod %s not in JSON", pod.id)
}

// Contract: --watch follows containerd's events on its own (the runtime
// reports itself as containerd) and prints an exit as it happens.
func TestPodsWatchPrintsExit(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "watch")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaryPath, "pods", "--runtime-endpoint", endpoint, "--namespace", testNamespace, "--watch", "-o", "json", "--relist-period", "1m")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	diesWithTheTest(cmd)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		cmd.Wait()
	}()

	eventually(t, 10*time.Second, "watch follows containerd events", func() bool {
		return strings.Contains(stderr.String(), "Following containerd events")
	})
	id := pod.start("quitter", "sh", "-c", "exit 7")

	// The relist period is a minute: only the event stream can make the
	// exit show within the test's deadline.
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var ev struct {
			Type      string
			Container *struct {
				ID       string
				ExitCode int32
			}
		}
		if json.Unmarshal(lines.Bytes(), &ev) != nil || ev.Container == nil || ev.Container.ID != id {
			continue
		}
		if ev.Type == "ContainerExited" {
			assert.Equal(t, int32(7), ev.Container.ExitCode)
			return
		}
	}
	t.Fatalf("no ContainerExited for %s; stderr:\n%s", id, stderr.String())
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contract: an unreachable runtime is one clear line and exit code 1.
func TestPodsCommandRuntimeUnreachable(t *testing.T) {
	parallel(t)
	out, err := runBinary(t, "pods", "--runtime-endpoint", "unix:///nonexistent/containerd.sock")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one line: %q", out)
	assert.Contains(t, out, "does not exist")
}

// Contract (issue 3): `cri-prober run` probes pods from manifests and logs
// kubelet-style events: type, reason, pod, container, message.
func TestRunCommandLogsProbeEvents(t *testing.T) {
	c := dial(t)
	name := uniqueName("run")
	dir := manifestDir(t, name, `  - name: app
    image: localhost/busybox:test
    livenessProbe:
      exec: {command: [sh, -c, "echo sick; exit 1"]}
      periodSeconds: 1
      failureThreshold: 2
`)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaryPath, privateLinks(t, []string{"run", "--runtime-endpoint", endpoint, "--pod-manifests", dir})...)
	var logs lockedBuffer
	cmd.Stderr = &logs
	diesWithTheTest(cmd)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		cmd.Wait()
	}()
	eventually(t, 10*time.Second, "agent probing", func() bool { return strings.Contains(logs.String(), `"Probing"`) })

	runPodNamed(t, c, name, nil).start("app", "sleep", "3600")
	pod := testNamespace + "/" + name
	eventually(t, 15*time.Second, "liveness failure logged", func() bool {
		return strings.Contains(logs.String(), `reason="LivenessProbeFailed" pod="`+pod+`" containerName="app" message="Container app failed liveness probe"`)
	})
	// The exec output ends in a newline, kept as kubelet keeps it; where
	// klog would print such a value as a raw block, the agent's records
	// stay one line, the newline escaped.
	assert.Contains(t, logs.String(), `"Event" type="Warning" reason="Unhealthy" pod="`+pod+`" containerName="app" message="Liveness probe failed: sick\n"`)
}
