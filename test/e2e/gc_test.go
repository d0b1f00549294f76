//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/gc"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// gcPeriod stands for kubelet's ContainerGCPeriod (1 minute) in these
// tests.
const gcPeriod = 2 * time.Second

// logRemover stands in for the node's log files (pkg/logs) where pod sync
// and the garbage collection remove an instance's: its log and rotated
// files, under the owner's log directory only.
type logRemover struct{ dir string }

func (l logRemover) Link(string, string, *cri.Container) error { return nil }

func (l logRemover) Remove(_, _ string, inst *cri.Container) error {
	if inst.LogPath == "" || !strings.HasPrefix(inst.LogPath, l.dir+string(filepath.Separator)) {
		return nil
	}
	files, _ := filepath.Glob(inst.LogPath + ".*")
	for _, f := range append(files, inst.LogPath) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// startCollectingOwner is startOwner with a 1 s back-off cap and the
// garbage collection every gcPeriod, removing log files with instances.
func startCollectingOwner(t *testing.T, c *cri.Client) *owner {
	t.Helper()
	return startOwnerWith(t, c, func(cfg *engine.Config) {
		cfg.Restart.MaxContainerRestartPeriod = time.Second
		cfg.GC.Period = gcPeriod
		rm := logRemover{dir: cfg.Node.PodLogsDir}
		cfg.TestRestartOptions = append(cfg.TestRestartOptions, restart.WithContainerLogs(rm))
		cfg.TestGCOptions = append(cfg.TestGCOptions, gc.WithContainerLogs(rm))
	})
}

// containers are the containers of the pod's sandboxes.
func (o *owner) containers(t *testing.T, name string) []*runtimeapi.Container {
	t.Helper()
	var out []*runtimeapi.Container
	for _, sb := range o.sandboxes(t, name) {
		list, err := o.client.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: sb.GetId()})
		require.NoError(t, err)
		out = append(out, list...)
	}
	return out
}

// restartCount is the container's restart count in the pod's report.
func (o *owner) restartCount(name, ctr string) int32 {
	r, ok := o.report(name)
	if !ok {
		return 0
	}
	for _, c := range r.Containers {
		if c.Name == ctr {
			return c.RestartCount
		}
	}
	return 0
}

// Contract (kubelet's container GC, kuberuntime_gc.go, with its defaults:
// every minute, MinAge 0, MaxPerPodContainer 1; and removeContainer's
// removeContainerLog): a crash-looping container keeps at most one dead
// instance besides the one that runs, and its log directory about as many
// files, however many times it restarted (kubelet v1.36.3: `crictl ps -a`
// shows the running instance and one exited; /var/log/pods/…/app holds
// N.log and N-1.log). Today's agent left one log file per attempt.
func TestCrashLoopCollected(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startCollectingOwner(t, c)
	name := uniqueName("gc-crash")
	o.write(t, "pod.yaml", ownedManifest(name, `  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: [sh, -c, "exit 1"]
`))
	eventually(t, 90*time.Second, "restarted 8 times", func() bool { return o.restartCount(name, "app") >= 8 })

	logFiles := func() []string {
		r, _ := o.report(name)
		files, _ := filepath.Glob(filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+r.UID, "app", "*.log*"))
		return files
	}
	eventually(t, 10*gcPeriod, "at most the newest dead instance kept beside the current one, and their log files", func() bool {
		return len(o.containers(t, name)) <= 2 && len(logFiles()) <= 2
	})
	// Bounded while it goes on crashing: a collection each period, a
	// restart about each second between.
	deadline := time.Now().Add(3 * gcPeriod)
	for time.Now().Before(deadline) {
		if n := len(logFiles()); n > 2+int(gcPeriod/time.Second)+2 {
			t.Fatalf("%d log files for a container while it crash-loops: %v", n, logFiles())
		}
		<-time.After(200 * time.Millisecond)
	}
}

// Contract (kubelet's evictSandboxes): a pod whose sandbox was made again
// keeps only its newest dead sandbox; the older ones, once their
// containers are collected, are removed (kubelet v1.36.3: after two
// re-makes, `crictl pods` shows the ready sandbox and one NotReady).
// Today's agent kept every one while the pod lives.
func TestOldSandboxesCollected(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startCollectingOwner(t, c)
	name := uniqueName("gc-sandbox")
	o.write(t, "pod.yaml", ownedManifest(name, `  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: [sleep, "3600"]
`))
	for attempt := uint32(1); attempt <= 2; attempt++ {
		eventually(t, 30*time.Second, "running", func() bool { return o.running(t, name, "app") != "" })
		cur := o.sandboxes(t, name)[0]
		require.NoError(t, c.StopPodSandbox(t.Context(), cur.GetId()))
		eventually(t, 30*time.Second, "a new sandbox with the container", func() bool {
			sbs := o.sandboxes(t, name)
			return len(sbs) > 0 && sbs[0].GetMetadata().GetAttempt() == attempt && sbs[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_READY &&
				o.running(t, name, "app") != ""
		})
	}
	eventually(t, 10*gcPeriod, "the ready sandbox and at most the newest dead one", func() bool {
		sbs := o.sandboxes(t, name)
		return len(sbs) <= 2 && sbs[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
	})
}

// Contract (kubelet's volume manager once a pod's runtime may be removed,
// and SyncTerminatedPod): a static pod that completed, its manifest still
// there, has its volumes torn down: an emptyDir's contents removed, a
// memory emptyDir (tmpfs) unmounted, its pod cgroup removed; its pod
// directory stays (kubelet
// v1.36.3: /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/
// is empty once the pod is Succeeded). Today's agent kept them until the
// manifest is removed.
func TestCompletedPodVolumesTornDown(t *testing.T) {
	parallel(t)
	c := dial(t)
	o := startCollectingOwner(t, c)
	name := uniqueName("gc-job")
	o.write(t, "job.yaml", ownedManifest(name, `  restartPolicy: Never
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory}}
  containers:
  - name: task
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: [sh, -c, "echo data > /scratch/file && echo data > /mem/file"]
    volumeMounts: [{name: scratch, mountPath: /scratch}, {name: mem, mountPath: /mem}]
`))
	var uid string
	eventually(t, 30*time.Second, "the job Succeeded", func() bool {
		r, ok := o.report(name)
		uid = r.UID
		return ok && r.Phase == corev1.PodSucceeded
	})
	podDir := filepath.Join(o.rootDir, "pods", uid)
	scratch := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch")
	mem := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "mem")
	eventually(t, 10*gcPeriod, "its emptyDir contents removed, its tmpfs unmounted", func() bool {
		_, errScratch := os.Stat(filepath.Join(scratch, "file"))
		_, errMem := os.Stat(filepath.Join(mem, "file"))
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		return os.IsNotExist(errScratch) && os.IsNotExist(errMem) && !strings.Contains(string(mounts), " "+mem+" ")
	})
	_, err := os.Stat(podDir)
	require.NoError(t, err, "the pod directory stays while the pod does")
	eventually(t, 10*gcPeriod, "its pod cgroup removed in every hierarchy", func() bool {
		left, _ := filepath.Glob("/sys/fs/cgroup/*/cri-prober-e2e/kubepods/*/pod" + uid)
		top, _ := filepath.Glob("/sys/fs/cgroup/*/cri-prober-e2e/kubepods/pod" + uid)
		return len(left)+len(top) == 0
	})
}
