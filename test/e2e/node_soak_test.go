//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/test/harness"
)

// nodeUse is what the agent's pods leave on the node at one moment: the
// bytes and files under the pod logs directory, the links of the link
// directory, and the runtime's containers and sandboxes of the test's pods.
type nodeUse struct {
	logBytes, logFiles, links, containers, sandboxes int64
}

// measureNode reads nodeUse, never following a link (a pod could plant one).
func measureNode(t *testing.T, o *owner, linkDir string, names ...string) nodeUse {
	t.Helper()
	var u nodeUse
	require.NoError(t, filepath.WalkDir(o.logsDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed by a rotation while walked
		}
		u.logFiles++
		u.logBytes += info.Size()
		return nil
	}))
	links, err := os.ReadDir(linkDir)
	require.NoError(t, err)
	u.links = int64(len(links))
	for _, n := range names {
		for _, sb := range o.sandboxes(t, n) {
			u.sandboxes++
			list, err := o.client.ListContainers(t.Context(), &runtimeapi.ContainerFilter{PodSandboxId: sb.GetId()})
			require.NoError(t, err)
			u.containers += int64(len(list))
		}
	}
	return u
}

// Contract (issue 29): a node kept for months stays bounded. For
// CRI_PROBER_E2E_NODE_SOAK (make soak: 30m; unset: skipped, the behaviours
// have their own e2e tests), `cri-prober run` keeps a chatty static pod
// (about 1 MiB/s of log) and a crash loop restarted every second: the pod
// logs directory stays under the rotation's bound (max files × max size per
// container, plus what one monitor interval writes), the dead instances
// and their log files are collected every minute, one link per container
// instance kept, and the agent's goroutines, fds and RSS stay flat.
func TestNodeSoakOnContainerd(t *testing.T) {
	v := os.Getenv("CRI_PROBER_E2E_NODE_SOAK")
	if v == "" {
		t.Skip("CRI_PROBER_E2E_NODE_SOAK is not set (make soak sets it)")
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "CRI_PROBER_E2E_NODE_SOAK")
	const (
		maxSize  = 10 << 20 // kubelet's containerLogMaxSize
		maxFiles = 5        // kubelet's containerLogMaxFiles
		rate     = 1 << 20  // what the chatty container writes a second
		interval = 10 * time.Second
	)
	c := dial(t)
	o := &owner{client: c, dir: t.TempDir(), rootDir: t.TempDir(), logsDir: t.TempDir()}
	linkDir := t.TempDir()
	chatty, crash := uniqueName("chatty"), uniqueName("crashloop")
	o.write(t, "chatty.yaml", ownedManifest(chatty, `  containers:
  - name: chatty
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; line=$(head -c 1023 /dev/zero | tr '\\0' x); while true; do i=0; while [ $i -lt 1024 ]; do echo $line; i=$((i+1)); done; sleep 1; done"]
`))
	o.write(t, "crash.yaml", ownedManifest(crash, `  containers:
  - name: crash
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo started; exit 1"]
`))
	listen := freePort(t)
	a := startProcess(t, "http://"+listen, binaryPath, "run", "--runtime-endpoint", endpoint, "--static-pod-path", o.dir,
		"--pod-manifests-interval", "1s", "--listen", listen, "--hostname-override", e2eNode, "--root-dir", o.rootDir,
		"--pod-logs-dir", o.logsDir, "--cgroup-root", "/cri-prober-e2e", "--container-log-link-dir", linkDir,
		"--max-container-restart-period", "1s")
	a.waitHealthy(t)
	t.Cleanup(func() {
		// The agent removes its pods once their manifests are gone (the
		// test's context is over by now: the runtime is asked without it).
		os.Remove(filepath.Join(o.dir, "chatty.yaml"))
		os.Remove(filepath.Join(o.dir, "crash.yaml"))
		eventuallyQuiet(60*time.Second, func() bool {
			list, err := c.ListPodSandbox(context.Background(), nil)
			if err != nil {
				return false
			}
			for _, sb := range list {
				if n := sb.GetMetadata().GetName(); n == podName(chatty) || n == podName(crash) {
					return false
				}
			}
			return true
		})
	})
	eventually(t, 60*time.Second, "the chatty pod running", func() bool { return o.running(t, chatty, "chatty") != "" })
	g0, f0, r0 := a.resources(t)

	// A soak runs for wall-clock time by nature: the node is sampled on a
	// ticker while the workload writes and crashes.
	bound := int64(maxFiles*maxSize + 2*rate*int(interval/time.Second) + 1<<20)
	var peak nodeUse
	var rows []string
	start := time.Now()
	tick := time.NewTicker(d / 10)
	defer tick.Stop()
	for time.Since(start) < d {
		<-tick.C
		u := measureNode(t, o, linkDir, chatty, crash)
		peak.logBytes, peak.logFiles = max(peak.logBytes, u.logBytes), max(peak.logFiles, u.logFiles)
		peak.links, peak.containers, peak.sandboxes = max(peak.links, u.links), max(peak.containers, u.containers), max(peak.sandboxes, u.sandboxes)
		_, fds, rss := a.resources(t)
		rows = append(rows, fmt.Sprintf("| %s | %.1f | %d | %d | %d | %d | %.0f | %.1f |", time.Since(start).Round(time.Second),
			float64(u.logBytes)/(1<<20), u.logFiles, u.links, u.containers, u.sandboxes, fds, rss))
		assert.LessOrEqual(t, u.logBytes, bound, "the pod logs directory over the rotation's bound at %s", time.Since(start).Round(time.Second))
	}
	g1, f1, r1 := a.resources(t)
	// Two pods: the chatty container's current and rotated files (and a
	// compression's .tmp for a moment), the crash loop's newest dead
	// instance and the one starting (kubelet's pod container deletor
	// removes the older dead one, with its log file and link, at each
	// exit); sampled while they change, so one more of each.
	assert.LessOrEqual(t, peak.logFiles, int64(maxFiles+1+2+1), "log files")
	assert.LessOrEqual(t, peak.containers, int64(1+2+1), "containers")
	assert.LessOrEqual(t, peak.links, int64(1+2+1), "links")
	assert.LessOrEqual(t, peak.sandboxes, int64(2), "sandboxes")
	assert.LessOrEqual(t, g1, g0+5, "agent goroutines flat")
	assert.LessOrEqual(t, f1, f0+5, "agent fds flat")
	assert.LessOrEqual(t, r1, r0*1.3+10, "agent RSS flat")

	report := fmt.Sprintf("Last `make soak` node soak: %s, %s, `cri-prober run` keeping a static pod writing about 1 MiB/s of log "+
		"and a crash loop (`exit 1`, `--max-container-restart-period 1s`), kubelet's log rotation (10Mi × 5, every 10 s), pod container "+
		"deletor (an older dead instance removed at each exit) and container GC (every minute). Bound on the pod logs directory: %.0f MiB.\n\n"+
		"| time | pod logs MiB | log files | links | containers | sandboxes | agent fds | agent RSS MiB |\n|---|---|---|---|---|---|---|---|\n%s\n\n"+
		"| agent | goroutines | open fds | RSS MiB |\n|---|---|---|---|\n| pods running | %.0f | %.0f | %.1f |\n| after the soak | %.0f | %.0f | %.1f |\n",
		time.Now().UTC().Format("2006-01-02"), d, float64(bound)/(1<<20), strings.Join(rows, "\n"), g0, f0, r0, g1, f1, r1)
	t.Log("\n" + report)
	if path := os.Getenv("CRI_PROBER_E2E_SOAK_REPORT"); path != "" && !t.Failed() {
		require.NoError(t, harness.WriteSection(path, "soak-node", report))
	}
}
