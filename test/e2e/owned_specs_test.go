//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// ownedManifest is a Pod manifest for pod name in the test namespace; spec
// is the YAML under spec:, indented by 2.
func ownedManifest(name, spec string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, testNamespace, spec)
}

// waiting is a container's waiting reason in the pod's report.
func (o *owner) waiting(name, ctr string) string {
	r, ok := o.report(name)
	if !ok {
		return ""
	}
	for _, c := range r.Containers {
		if c.Name == ctr && c.Status.State.Waiting != nil {
			return c.Status.State.Waiting.Reason
		}
	}
	return ""
}

// Contract (kubelet's image manager and generateContainerConfig): what
// keeps a container from being made shows as kubelet shows it, the rest
// of the node going on: an image that cannot be pulled (no registry here)
// is ErrImagePull, then ImagePullBackOff with back-off; an image absent
// with pull policy Never is ErrImageNeverPull; runAsNonRoot with an image
// that runs as root is CreateContainerConfigError; a hostPath volume whose
// type check fails is a FailedMount event and ContainerCreating.
//
// kubelet v1.36.3 with the same manifests: "Pulling image", "Failed to
// pull image … dial tcp …: connect: connection refused", "Error:
// ErrImagePull", then "Back-off pulling image" and ImagePullBackOff;
// "Container image \"localhost/absent:1\" is not present with pull policy
// of Never" (ErrImageNeverPull); "Error: container has runAsNonRoot and
// image will run as root (pod: …, container: app)"; FailedMount
// "MountVolume.SetUp failed for volume \"conf\" : hostPath type check
// failed: /nonexistent/conf is not a file".
func TestOwnedPodsThatCannotStart(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwner(t, c)
	pull, never, root, mount := uniqueName("pull"), uniqueName("never"), uniqueName("root"), uniqueName("mount")
	app := func(image, policy, extra string) string {
		return fmt.Sprintf("  containers:\n  - name: app\n    image: %s\n    imagePullPolicy: %s\n    command: [sleep, \"3600\"]\n%s", image, policy, extra)
	}
	o.write(t, "pull.yaml", ownedManifest(pull, app("localhost/busybox:test", "Always", "")))
	o.write(t, "never.yaml", ownedManifest(never, app("localhost/absent:1", "Never", "")))
	o.write(t, "root.yaml", ownedManifest(root, app("localhost/busybox:test", "Never", "    securityContext: {runAsNonRoot: true}\n")))
	o.write(t, "mount.yaml", ownedManifest(mount, "  volumes:\n  - {name: conf, hostPath: {path: /nonexistent/conf, type: File}}\n"+
		app("localhost/busybox:test", "Never", "    volumeMounts: [{name: conf, mountPath: /conf}]\n")))

	o.waitEvent(t, podName(pull), "app", "Pulling", `Pulling image "localhost/busybox:test"`, 30*time.Second)
	o.waitEvent(t, podName(pull), "app", "Failed", `Failed to pull image "localhost/busybox:test"`, 30*time.Second)
	o.waitEvent(t, podName(pull), "app", "Failed", "Error: ErrImagePull", 5*time.Second)
	eventually(t, 30*time.Second, "ErrImagePull, then ImagePullBackOff", func() bool {
		return o.waiting(pull, "app") == "ImagePullBackOff" || o.waiting(pull, "app") == "ErrImagePull"
	})
	o.waitEvent(t, podName(pull), "app", "BackOff", `Back-off pulling image "localhost/busybox:test"`, 30*time.Second)
	eventually(t, 15*time.Second, "ImagePullBackOff", func() bool { return o.waiting(pull, "app") == "ImagePullBackOff" })

	o.waitEvent(t, podName(never), "app", "ErrImageNeverPull", `Container image "localhost/absent:1" is not present with pull policy of Never`, 30*time.Second)
	eventually(t, 10*time.Second, "ErrImageNeverPull", func() bool { return o.waiting(never, "app") == "ErrImageNeverPull" })

	o.waitEvent(t, podName(root), "app", "Failed", "Error: container has runAsNonRoot and image will run as root", 30*time.Second)
	eventually(t, 10*time.Second, "CreateContainerConfigError", func() bool { return o.waiting(root, "app") == "CreateContainerConfigError" })

	o.waitEvent(t, podName(mount), "", "FailedMount", `MountVolume.SetUp failed for volume "conf" : hostPath type check failed: /nonexistent/conf is not a file`, 30*time.Second)
	eventually(t, 10*time.Second, "ContainerCreating", func() bool { return o.waiting(mount, "app") == "ContainerCreating" })
	assert.Empty(t, o.sandboxes(t, mount), "no sandbox until its volumes are set up, as kubelet")

	for _, n := range []string{pull, never, root, mount} {
		assert.Empty(t, o.running(t, n, "app"), n)
		r, _ := o.report(n)
		assert.Equal(t, corev1.PodPending, r.Phase, n)
	}
}

// Contract (kubelet's RestartAllContainersOnContainerExits, beta and on
// in 1.36, and getPhase): a container's exit that a RestartAllContainers
// rule matches kills every container at once and starts the pod over in
// its sandbox, init containers first; a Never pod whose containers all
// completed is Succeeded and its sandbox stopped.
//
// kubelet v1.36.3: after app exited 42, every container was removed and
// setup ran again in the same sandbox (attempt 1), then app and side;
// the job pod ended Succeeded with its sandbox NotReady.
func TestOwnedPodRestartAllAndCompletion(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwner(t, c)
	all, job := uniqueName("restartall"), uniqueName("job")
	o.write(t, "all.yaml", ownedManifest(all, `  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes: [{name: state, emptyDir: {}}]
  initContainers:
  - name: setup
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo x >> /state/setups"]
    volumeMounts: [{name: state, mountPath: /state}]
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    command: ["/bin/sh", "-c", "if [ ! -f /state/once ]; then touch /state/once; sleep 1; exit 42; fi; exec sleep 3600"]
    volumeMounts: [{name: state, mountPath: /state}]
  - name: side
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`))
	o.write(t, "job.yaml", ownedManifest(job, `  restartPolicy: Never
  containers:
  - name: task
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo done"]
`))

	eventually(t, 60*time.Second, "app running again after the restart of every container", func() bool {
		id := o.running(t, all, "app")
		return id != "" && strings.Count(o.execOutQuiet(t, id, "cat", "/state/setups"), "x") == 2
	})
	sbs := o.sandboxes(t, all)
	require.Len(t, sbs, 1, "in its sandbox")
	list, err := c.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: sbs[0].GetId()})
	require.NoError(t, err)
	attempts := map[string]uint32{}
	for _, x := range list {
		attempts[x.GetMetadata().GetName()] = x.GetMetadata().GetAttempt()
	}
	assert.Equal(t, map[string]uint32{"setup": 1, "app": 1, "side": 1}, attempts, "every container made again, its restart count going on")

	eventually(t, 30*time.Second, "the job Succeeded, its sandbox stopped", func() bool {
		r, ok := o.report(job)
		sbs := o.sandboxes(t, job)
		return ok && r.Phase == corev1.PodSucceeded && len(sbs) == 1 && sbs[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	})
	r, _ := o.report(job)
	assert.False(t, r.Ready)
	for _, cond := range r.Conditions {
		if cond.Type == corev1.PodReady {
			assert.Equal(t, "PodCompleted", cond.Reason)
		}
	}
	assert.Equal(t, 1, len(o.events.matching(podName(job), "task", "Started", "")), "never started again")
}

// execOutQuiet is execOut that gives "" when the command fails.
func (o *owner) execOutQuiet(t *testing.T, id string, argv ...string) string {
	t.Helper()
	resp, err := o.client.ExecSync(t.Context(), id, argv, 10*time.Second)
	if err != nil || resp.GetExitCode() != 0 {
		return ""
	}
	return string(resp.GetStdout())
}

// Contract (kubectl logs over kubelet's log files): cri-prober logs prints
// a container's output, -p its previous instance's, --tail the last lines.
func TestLogsOfAnOwnedPod(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwner(t, c)
	name := uniqueName("logs")
	o.write(t, "pod.yaml", ownedManifest(name, `  terminationGracePeriodSeconds: 1
  volumes: [{name: state, emptyDir: {}}]
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "n=$(cat /state/n 2>/dev/null || echo 0); echo $((n+1)) > /state/n; echo run $n line 1; echo run $n line 2; if [ $n = 0 ]; then exit 3; fi; exec sleep 3600"]
    volumeMounts: [{name: state, mountPath: /state}]
`))
	o.waitFor(t, podName(name), "app", "restarted and running", 30*time.Second, func(c pods.ContainerReport) bool {
		return c.State == "Running" && c.Attempt == 1
	})
	out, err := runBinary(t, "logs", "-r", endpoint, testNamespace+"/"+podName(name))
	require.NoError(t, err, out)
	assert.Equal(t, "run 1 line 1\nrun 1 line 2\n", out)
	out, err = runBinary(t, "logs", "-r", endpoint, testNamespace+"/"+podName(name), "-p")
	require.NoError(t, err, out)
	assert.Equal(t, "run 0 line 1\nrun 0 line 2\n", out)
	out, err = runBinary(t, "logs", "-r", endpoint, "-n", testNamespace, podName(name), "-c", "app", "--tail", "1")
	require.NoError(t, err, out)
	assert.Equal(t, "run 1 line 2\n", out)
	// The files are where kubelet keeps them.
	sb := o.sandboxes(t, name)[0]
	matches, _ := filepath.Glob(filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+sb.GetMetadata().GetUid(), "app", "*.log"))
	assert.Len(t, matches, 2, "0.log and 1.log")
	_, err = os.Stat(filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+sb.GetMetadata().GetUid(), "app", "1.log"))
	assert.NoError(t, err)
}

// Contract (play, as docker compose up / podman kube play on kubelet's
// rules): play makes the pods of its files and follows them; --wait ready
// exits 0 once they are ready and leaves them running; --down removes
// them; --timeout stops them as kubelet deletes a pod (preStop, grace
// period) and removes them; a bad manifest makes nothing and exits 2 with
// its file, line and field.
func TestPlayCommand(t *testing.T) {
	c := dial(t)
	rootDir, logsDir := t.TempDir(), t.TempDir()
	t.Cleanup(func() { exec.Command("umount", "-R", "--lazy", rootDir).Run() }) //nolint:errcheck // best effort
	flags := []string{"-r", endpoint, "--hostname-override", e2eNode, "--root-dir", rootDir, "--pod-logs-dir", logsDir, "--cgroup-root", "/cri-prober-e2e"}
	name := uniqueName("play")
	file := filepath.Join(t.TempDir(), "pod.yaml")
	require.NoError(t, os.WriteFile(file, []byte(ownedManifest(name, `  terminationGracePeriodSeconds: 4
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.2; done"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    lifecycle:
      preStop: {exec: {command: ["sleep", "2"]}}
`)), 0o644))
	o := &owner{client: c}
	out, code := exitCode(t, append([]string{"play", file, "--wait", "ready", "--timeout", "60s"}, flags...)...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "every pod is ready")
	assert.Regexp(t, podName(name)+`\s+1/1\s+Running`, out, "the pods as they change")
	assert.Contains(t, out, "Started", "the events")
	require.NotEmpty(t, o.running(t, name, "app"), "left running")

	out, code = exitCode(t, append([]string{"play", "--down", file}, flags...)...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "removed")
	assert.Empty(t, o.sandboxes(t, name))

	// --timeout: stopped as kubelet deletes a pod. The preStop takes 2 s,
	// then the container gets TERM and the rest of its 4 s.
	start := time.Now()
	out, code = exitCode(t, append([]string{"play", file, "--timeout", "6s"}, flags...)...)
	require.Equal(t, 0, code, out)
	assert.GreaterOrEqual(t, time.Since(start), 8*time.Second, "6 s, then the preStop's 2 s")
	assert.Contains(t, out, "Stopping container app")
	assert.Empty(t, o.sandboxes(t, name), "removed")
	entries, _ := os.ReadDir(filepath.Join(rootDir, "pods"))
	assert.Empty(t, entries, "nothing left on the host")

	// A bad manifest: nothing made, exit 2, the file's line.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(ownedManifest(uniqueName("bad"), "  containers:\n  - name: app\n    image: localhost/busybox:test\n    livenessProbe: {exec: {command: []}}\n")), 0o644))
	out, code = exitCode(t, append([]string{"play", bad}, flags...)...)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "bad.yaml:8: pod "+testNamespace+"/")
	assert.Contains(t, out, "spec.containers[0].livenessProbe.exec.command: Required value")
}
