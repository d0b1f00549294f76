//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/node"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// These tests are the agent as kubelet running static pods: it makes the
// pods of the manifests in its static pod path (run --static-pod-path)
// through CRI, alone, and keeps them as kubelet v1.36.3 does; each states
// what the real kubelet (../shared/kubelet) did with the same manifest.

// e2eNode is the node name the static pods are named after.
const e2eNode = "e2e-node"

// owner is the engine making the pods of a static pod directory, in
// process, with its own root and log directories and a cgroup root apart
// from any kubelet's.
type owner struct {
	*agent
	client  *cri.Client
	dir     string
	rootDir string
	logsDir string
}

// startOwner runs an engine that makes the pods of a fresh static pod
// directory; when the test ends it removes them (as removing their
// manifests does) and checks that nothing is left on the host.
func startOwner(t *testing.T, c *cri.Client) *owner {
	t.Helper()
	return startOwnerWith(t, c, func(*engine.Config) {})
}

// startOwnerWith is startOwner with the engine's config changed by set.
func startOwnerWith(t *testing.T, c *cri.Client, set func(*engine.Config)) *owner {
	t.Helper()
	o := &owner{agent: &agent{events: &eventLog{}}, client: c, dir: t.TempDir(), rootDir: t.TempDir(), logsDir: t.TempDir()}
	node, err := node.Discover(node.Options{HostnameOverride: e2eNode, RootDir: o.rootDir, CgroupRoot: "/cri-prober-e2e/kubepods"})
	require.NoError(t, err)
	node.PodLogsDir = o.logsDir
	static := manifests.NewDir(o.dir, nil, manifests.AsStatic(spec.Static{NodeName: node.Name}))
	static.Reload()
	cfg := engine.Config{
		Client: c, EventsAddress: c.Socket(), Restart: restart.Config{Mode: restart.Recreate}, Recorder: o.events,
		StaticPods: static, ManifestInterval: 100 * time.Millisecond, Node: node,
	}
	set(&cfg)
	o.engine, err = engine.New(context.Background(), cfg)
	require.NoError(t, err)
	o.restarter = o.engine.Restarter
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { o.engine.Run(ctx) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events:\n%s", o.events)
		}
		entries, _ := os.ReadDir(o.dir)
		for _, e := range entries {
			os.Remove(filepath.Join(o.dir, e.Name()))
		}
		gone := eventuallyQuiet(2*time.Minute, func() bool {
			return !slices.ContainsFunc(o.engine.View().Pods(), func(p *pods.Pod) bool { return p.Static })
		})
		cancel()
		wg.Wait()
		// Whatever a failed test left mounted under the root goes, so that
		// the temporary directories can be removed.
		exec.Command("umount", "-R", "--lazy", o.rootDir).Run() //nolint:errcheck // nothing mounted is fine
		if !gone {
			t.Errorf("cleanup: the pods were not removed: %v", o.engine.View().Pods())
		}
	})
	return o
}

// eventuallyQuiet polls cond until it holds or timeout passes.
func eventuallyQuiet(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(50 * time.Millisecond)
	}
	return true
}

// write puts a manifest into the static pod directory, atomically (a dot
// file renamed), as an operator should.
func (o *owner) write(t *testing.T, file, text string) {
	t.Helper()
	tmp := filepath.Join(o.dir, "."+file)
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(o.dir, file)))
}

// podName is the name kubelet gives the static pod of a manifest's name.
func podName(name string) string { return name + "-" + e2eNode }

// sandboxes lists the runtime's sandboxes of a pod by its name, newest
// first.
func (o *owner) sandboxes(t *testing.T, name string) []*runtimeapi.PodSandbox {
	t.Helper()
	list, err := o.client.ListPodSandbox(t.Context(), nil)
	require.NoError(t, err)
	var out []*runtimeapi.PodSandbox
	for _, sb := range list {
		if sb.GetMetadata().GetName() == podName(name) && sb.GetMetadata().GetNamespace() == testNamespace {
			out = append(out, sb)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].GetCreatedAt() > out[j-1].GetCreatedAt(); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// running returns the ID of the running instance of a container of the
// pod ("" if none).
func (o *owner) running(t *testing.T, name, ctr string) string {
	t.Helper()
	for _, sb := range o.sandboxes(t, name) {
		list, err := o.client.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: sb.GetId()})
		require.NoError(t, err)
		for _, c := range list {
			if c.GetMetadata().GetName() == ctr && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c.GetId()
			}
		}
	}
	return ""
}

// report is the pod's report as the agent's API shows it.
func (o *owner) report(name string) (pods.PodReport, bool) {
	return o.engine.ReportPod(testNamespace, podName(name))
}

// execOut runs a command in a container and returns its stdout.
func (o *owner) execOut(t *testing.T, id string, argv ...string) string {
	t.Helper()
	resp, err := o.client.ExecSync(t.Context(), id, argv, 10*time.Second)
	require.NoError(t, err)
	require.Zero(t, resp.GetExitCode(), "%v: %s%s", argv, resp.GetStdout(), resp.GetStderr())
	return string(resp.GetStdout())
}

// Contract (kubelet's static pods, kuberuntime's SyncPod): the pod of a
// manifest alone — no crictl — is made as kubelet makes it: named
// <name>-<node> with kubelet's labels and annotations; its regular init
// container run to completion first, then its sidecar, whose startup
// probe gates the app container; postStart run after the app's first
// start, before it is probed or reported ready; env and downward API as
// kubelet resolves them; its logs in kubelet's layout.
//
// kubelet v1.36.3 with the same manifest: setup ran and exited 0, then
// proxy started; app was created only after proxy's startup probe passed
// (~2 s); app was Ready 3 s after its start, when its postStart ended.
func TestOwnedPodFromItsManifest(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startOwner(t, c)
	name := uniqueName("owned")
	o.write(t, "pod.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels: {app: web}
spec:
  terminationGracePeriodSeconds: 3
  volumes:
  - {name: data, emptyDir: {}}
  - name: info
    downwardAPI:
      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]
  initContainers:
  - name: setup
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo from-setup > /data/setup"]
    volumeMounts: [{name: data, mountPath: /data}]
  - name: proxy
    image: localhost/busybox:test
    imagePullPolicy: Never
    restartPolicy: Always
    command: ["/bin/sh", "-c", "sleep 2; touch /tmp/up; exec sleep 3600"]
    startupProbe:
      exec: {command: ["test", "-f", "/tmp/up"]}
      periodSeconds: 1
      failureThreshold: 30
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo app started; exec sleep 3600"]
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: GREETING, value: "hi $(POD_NAME)"}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: info, mountPath: /info}
    lifecycle:
      postStart: {exec: {command: ["/bin/sh", "-c", "sleep 3; touch /tmp/post"]}}
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`, name, testNamespace))

	var appStarted time.Time
	eventually(t, 30*time.Second, "app running", func() bool {
		if o.running(t, name, "app") != "" {
			appStarted = time.Now()
			return true
		}
		return false
	})
	r, ok := o.report(name)
	require.True(t, ok)
	assert.False(t, r.Ready, "not ready while its postStart runs")
	ready := o.waitFor(t, podName(name), "app", "ready", 20*time.Second, func(c pods.ContainerReport) bool { return c.Ready })
	assert.GreaterOrEqual(t, ready.Sub(appStarted), 2500*time.Millisecond, "ready only once postStart ended (3 s)")

	// Order: setup completed before proxy started, proxy started before
	// app was created.
	setup := o.events.matching(podName(name), "setup", restart.ReasonStarted, "")
	proxyStarted := o.events.matching(podName(name), "proxy", restart.ReasonStarted, "")
	appCreated := o.events.matching(podName(name), "app", restart.ReasonCreated, "")
	require.Len(t, setup, 1)
	require.Len(t, proxyStarted, 1)
	require.Len(t, appCreated, 1)
	assert.True(t, setup[0].Time.Before(proxyStarted[0].Time))
	assert.GreaterOrEqual(t, appCreated[0].Time.Sub(proxyStarted[0].Time), 1500*time.Millisecond, "app waits for proxy's startup probe")
	assert.NotEmpty(t, o.events.matching(podName(name), "app", "Pulled", `Container image "localhost/busybox:test" already present on machine and can be accessed by the pod`))

	// kubelet's identity and metadata.
	sbs := o.sandboxes(t, name)
	require.Len(t, sbs, 1)
	sb := sbs[0]
	assert.Equal(t, map[string]string{"app": "web", "io.kubernetes.pod.name": podName(name), "io.kubernetes.pod.namespace": testNamespace,
		"io.kubernetes.pod.uid": sb.GetMetadata().GetUid()}, sb.GetLabels())
	assert.Equal(t, "file", sb.GetAnnotations()["kubernetes.io/config.source"])
	assert.Equal(t, sb.GetMetadata().GetUid(), sb.GetAnnotations()["kubernetes.io/config.hash"])
	app := o.running(t, name, "app")
	env := o.execOut(t, app, "env")
	assert.Contains(t, env, "POD_NAME="+podName(name))
	assert.Contains(t, env, "NODE="+e2eNode)
	assert.Contains(t, env, "GREETING=hi "+podName(name))
	assert.Equal(t, "from-setup\n", o.execOut(t, app, "cat", "/data/setup"), "the init container's emptyDir")
	assert.Equal(t, "app=\"web\"", o.execOut(t, app, "cat", "/info/labels"), "the downward API")
	assert.Equal(t, podName(name)+"\n", o.execOut(t, app, "hostname"))
	hosts := o.execOut(t, app, "cat", "/etc/hosts")
	assert.Contains(t, hosts, "# Kubernetes-managed hosts file.")
	assert.Contains(t, hosts, podName(name))

	// kubelet's log layout: crictl logs and cri-prober logs read it.
	logFile := filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+sb.GetMetadata().GetUid(), "app", "0.log")
	eventually(t, 5*time.Second, "the app's log in kubelet's layout", func() bool {
		data, err := os.ReadFile(logFile)
		return err == nil && strings.Contains(string(data), "app started")
	})

	// Conditions as kubelet's status shows them.
	r, _ = o.report(name)
	assert.True(t, r.Ready)
	conds := map[string]string{}
	for _, cond := range r.Conditions {
		conds[string(cond.Type)] = string(cond.Status)
	}
	assert.Equal(t, map[string]string{"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}, conds)
}

// Contract (kubelet's SyncPod): a static pod whose sandbox someone stops
// behind the agent's back gets a new sandbox (attempt 1) and every
// container again; one whose manifest is edited is another pod (a new
// UID), the old one stopped and removed; one whose manifest is removed is
// stopped (its preStop hook run, within its grace period) and removed,
// with what it left on the host.
//
// kubelet v1.36.3: crictl stopp on its static pod → "Pod sandbox changed,
// it will be killed and re-created." and a new sandbox of attempt 1 within
// ~2 s; editing the file gave a new pod UID; removing the file ran preStop
// and removed the pod's sandbox and directory.
func TestOwnedPodLifecycle(t *testing.T) {
	c := dial(t)
	o := startOwner(t, c)
	name := uniqueName("life")
	text := func(msg string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; echo %s; while true; do sleep 0.2; done"]
    lifecycle:
      preStop: {exec: {command: ["/bin/sh", "-c", "echo stopping > /proc/1/fd/1"]}}
`, name, testNamespace, msg)
	}
	o.write(t, "pod.yaml", text("one"))
	eventually(t, 30*time.Second, "running", func() bool { return o.running(t, name, "app") != "" })
	first := o.sandboxes(t, name)[0]

	// Stopped behind its back: a new sandbox, attempt 1, and the container.
	require.NoError(t, c.StopPodSandbox(t.Context(), first.GetId()))
	eventually(t, 30*time.Second, "a new sandbox with the container", func() bool {
		sbs := o.sandboxes(t, name)
		return len(sbs) >= 2 && sbs[0].GetMetadata().GetAttempt() == 1 && sbs[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_READY &&
			o.running(t, name, "app") != ""
	})
	assert.NotEmpty(t, o.events.matching(podName(name), "", restart.ReasonSandboxChanged, "Pod sandbox changed, it will be killed and re-created."))

	// Edited: another pod (new UID), the old one removed.
	oldUID := first.GetMetadata().GetUid()
	o.write(t, "pod.yaml", text("two"))
	eventually(t, 30*time.Second, "the edited manifest's pod, the old one gone", func() bool {
		sbs := o.sandboxes(t, name)
		return len(sbs) == 1 && sbs[0].GetMetadata().GetUid() != oldUID && o.running(t, name, "app") != ""
	})
	eventually(t, 30*time.Second, "the old pod's directory removed (after its sandbox)", func() bool {
		_, err := os.Stat(filepath.Join(o.rootDir, "pods", oldUID))
		return os.IsNotExist(err)
	})

	// A version that does not load: as under kubelet ("Could not process
	// manifest file"), its pod is stopped and removed; once the file
	// loads again the pod is made again, the same pod (same UID).
	twoUID := o.sandboxes(t, name)[0].GetMetadata().GetUid()
	o.write(t, "pod.yaml", strings.Replace(text("two"), "terminationGracePeriodSeconds: 5", "terminationGracePeriodSeconds: -5", 1))
	eventually(t, 30*time.Second, "the pod of a file that does not load removed", func() bool { return len(o.sandboxes(t, name)) == 0 })
	o.write(t, "pod.yaml", text("two"))
	eventually(t, 30*time.Second, "made again once it loads", func() bool {
		sbs := o.sandboxes(t, name)
		return len(sbs) == 1 && sbs[0].GetMetadata().GetUid() == twoUID && o.running(t, name, "app") != ""
	})

	// Removed: preStop, then the pod and its files go.
	sb := o.sandboxes(t, name)[0]
	uid := sb.GetMetadata().GetUid()
	app := o.running(t, name, "app")
	require.NoError(t, os.Remove(filepath.Join(o.dir, "pod.yaml")))
	eventually(t, 30*time.Second, "removed", func() bool { return len(o.sandboxes(t, name)) == 0 })
	assert.NotEmpty(t, o.events.matching(podName(name), "app", restart.ReasonKilling, "Stopping container app"))
	eventually(t, 30*time.Second, "its directory removed", func() bool {
		_, err := os.Stat(filepath.Join(o.rootDir, "pods", uid))
		return os.IsNotExist(err)
	})
	_, err := os.Stat(filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+uid))
	assert.True(t, os.IsNotExist(err), "its logs removed")
	_, err = c.ContainerStatus(t.Context(), app, false)
	assert.True(t, cri.IsNotFound(err), "its containers removed")
}

// startOwnerBinary runs `cri-prober run --static-pod-path dir` as a
// process (with every capability: it mounts the pods' volumes), with the
// root and log directories given.
func startOwnerBinary(t *testing.T, dir, rootDir, logsDir string) *runningAgent {
	t.Helper()
	listen := freePort(t)
	a := startProcess(t, "http://"+listen, binaryPath, "run", "--runtime-endpoint", endpoint, "--static-pod-path", dir, "--pod-manifests-interval", "200ms",
		"--listen", listen, "--hostname-override", e2eNode, "--root-dir", rootDir, "--pod-logs-dir", logsDir, "--cgroup-root", "/cri-prober-e2e")
	a.waitHealthy(t)
	return a
}

// execCounts counts the exec processes started in each container, from
// containerd's /tasks/exec-started events (the shim sends one once the
// exec runs with its output connected).
type execCounts struct {
	mu      sync.Mutex
	started map[string]int
	changed chan struct{} // closed and replaced at each count
}

// execStarts follows containerd's events from now on.
func execStarts(t *testing.T) *execCounts {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	stream, err := eventsapi.NewEventsClient(conn).Subscribe(ctx, &eventsapi.SubscribeRequest{
		Filters: []string{`namespace=="k8s.io",topic=="/tasks/exec-started"`},
	})
	require.NoError(t, err)
	ec := &execCounts{started: map[string]int{}, changed: make(chan struct{})}
	go func() {
		for {
			env, err := stream.Recv()
			if err != nil {
				return
			}
			var e eventtypes.TaskExecStarted
			if proto.Unmarshal(env.GetEvent().GetValue(), &e) == nil {
				ec.mu.Lock()
				ec.started[e.GetContainerID()]++
				close(ec.changed)
				ec.changed = make(chan struct{})
				ec.mu.Unlock()
			}
		}
	}()
	return ec
}

// count is how many exec processes have started in container id, and a
// channel closed at the next start anywhere.
func (ec *execCounts) count(id string) (int, <-chan struct{}) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.started[id], ec.changed
}

// killAfterExecStart kills agent a as soon as one more exec process than
// before has started in container id (see execStarts), never while the
// shim starts one: a client gone while containerd 1.6's shim starts an
// exec leaves that shim deadlocked (the exec's start waits forever to open
// its output FIFO, whose reader went with the client, holding the
// process's pid lock; the exit handler waits on that lock holding the
// shim's, which every State, Exec and Kill of the pod's containers then
// waits on), so no probe is answered and no container stopped, under any
// agent or kubelet: not what these tests are about.
func killAfterExecStart(t *testing.T, a *runningAgent, execs *execCounts, id string, before int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		n, changed := execs.count(id)
		if n > before {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			require.FailNow(t, "no exec started", "in %s within 10s", id)
		}
	}
	a.kill()
}

// Contract: an agent killed (SIGKILL) while it makes a pod — during an
// init container, during the app's postStart — leaves what it made to the
// next agent, which adopts it: never a second sandbox, never a second
// instance of a container. (kubelet restarted under its static pods
// likewise adopts them by UID.)
func TestOwnedPodAdoptedAfterAgentKill(t *testing.T) {
	c := dial(t)
	dir, rootDir, logsDir := t.TempDir(), t.TempDir(), t.TempDir()
	name := uniqueName("adopt")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: info, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}]
  initContainers:
  - name: setup
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sleep", "3"]
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    volumeMounts: [{name: info, mountPath: /info}]
    lifecycle:
      postStart: {exec: {command: ["sleep", "3"]}}
    readinessProbe:
      exec: {command: ["cat", "/info/name"]}
      periodSeconds: 1
`, name, testNamespace)), 0o644))
	o := &owner{client: c}
	t.Cleanup(func() {
		// The last agent is gone: the pod is removed by hand, its volumes
		// unmounted.
		list, _ := c.ListPodSandbox(context.Background(), nil)
		for _, sb := range list {
			if sb.GetMetadata().GetName() == podName(name) {
				c.StopPodSandbox(context.Background(), sb.GetId())   //nolint:errcheck // best effort
				c.RemovePodSandbox(context.Background(), sb.GetId()) //nolint:errcheck
			}
		}
		exec.Command("umount", "-R", "--lazy", rootDir).Run() //nolint:errcheck
	})
	count := func(ctr string) int {
		n := 0
		for _, sb := range o.sandboxes(t, name) {
			list, err := c.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: sb.GetId()})
			require.NoError(t, err)
			for _, x := range list {
				if x.GetMetadata().GetName() == ctr {
					n++
				}
			}
		}
		return n
	}

	// Killed while the init container runs.
	a := startOwnerBinary(t, dir, rootDir, logsDir)
	eventually(t, 20*time.Second, "setup running", func() bool { return o.running(t, name, "setup") != "" })
	a.kill()
	execs := execStarts(t)
	a = startOwnerBinary(t, dir, rootDir, logsDir)
	// Killed during the app's postStart, once its exec has started (the
	// agent probes the app only after its postStart: nothing else is
	// exec'd in it meanwhile).
	var app string
	eventually(t, 20*time.Second, "app running (its postStart in progress)", func() bool {
		app = o.running(t, name, "app")
		return app != ""
	})
	killAfterExecStart(t, a, execs, app, 0)
	assert.Equal(t, 1, count("setup"), "the init container ran once")
	a = startOwnerBinary(t, dir, rootDir, logsDir)
	if !assert.Eventually(t, func() bool {
		ctr, ok := a.container(t, podName(name), "app")
		return ok && ctr.Ready
	}, 20*time.Second, 50*time.Millisecond, "the pod ready under the third agent") {
		_, body := a.get(t, "/api/v1/pods")
		t.Fatalf("pods: %s", body)
	}
	assert.Len(t, o.sandboxes(t, name), 1, "one sandbox")
	assert.Equal(t, 1, count("setup"), "one instance of setup")
	assert.Equal(t, 1, count("app"), "one instance of app")
	assert.NotContains(t, a.logs.String(), `reason="Created"`, "the last agent made nothing")

	// Removed while no agent runs: the next agent still knows it made it
	// (its record) and removes it. Killed right after a readiness probe's
	// exec started, a period before the next one.
	started, _ := execs.count(app)
	killAfterExecStart(t, a, execs, app, started)
	uid := o.sandboxes(t, name)[0].GetMetadata().GetUid()
	require.NoError(t, os.Remove(filepath.Join(dir, "pod.yaml")))
	a = startOwnerBinary(t, dir, rootDir, logsDir)
	eventually(t, 20*time.Second, "the orphan removed", func() bool { return len(o.sandboxes(t, name)) == 0 })
	eventually(t, 5*time.Second, "its directory removed", func() bool {
		_, err := os.Stat(filepath.Join(rootDir, "pods", uid))
		return os.IsNotExist(err)
	})
}
