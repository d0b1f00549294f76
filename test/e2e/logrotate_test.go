//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/logs"
)

// Contract (kubelet's ContainerLogManager, container_log_manager.go, and
// kuberuntime's legacyLogSymlink): a container printing about 1.7 MiB/s
// of log under containerLogMaxSize 1Mi and containerLogMaxFiles 3 keeps at
// most 3 files: the current one, written by the runtime after each
// ReopenContainerLog, the last rotated one as it was
// (0.log.<20060102-150405>) and the older ones gzipped (.gz); cri-prober
// logs still reads the latest lines; the container's link in the link
// directory points at its current file.
//
// kubelet v1.36.3 with containerLogMaxSize: 1Mi, containerLogMaxFiles: 3,
// containerLogMonitorInterval: 3s: 0.log, 0.log.<ts>.gz and 0.log.<ts>
// after the second rotation, the link /var/log/containers/
// <pod>_<ns>_chatty-<id>.log to 0.log.
func TestContainerLogRotation(t *testing.T) {
	parallel(t)
	c := dial(t)
	linkDir := t.TempDir()
	o := startOwnerWith(t, c, func(cfg *engine.Config) {
		cfg.ContainerLogs = logs.Config{MaxSize: 1 << 20, MaxFiles: 3, MonitorInterval: logs.MinMonitorInterval, LinkDir: linkDir}
	})
	name := uniqueName("chatty")
	o.write(t, "pod.yaml", ownedManifest(name, `  terminationGracePeriodSeconds: 1
  containers:
  - name: chatty
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); yes chatty-line-of-forty-eight-bytes-abcdefghijklmno | head -n 20000; echo seq $i; sleep 1; done"]
`))
	var id string
	eventually(t, 30*time.Second, "the chatty container runs", func() bool { id = o.running(t, name, "chatty"); return id != "" })
	sb := o.sandboxes(t, name)[0]
	dir := filepath.Join(o.logsDir, testNamespace+"_"+podName(name)+"_"+sb.GetMetadata().GetUid(), "chatty")

	// Two rotations at least: the first file rotated is compressed at the
	// second.
	rotated := regexp.MustCompile(`^0\.log\.\d{8}-\d{6}(\.gz)?$`)
	list := func() []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	eventually(t, 60*time.Second, "a compressed rotated log file", func() bool {
		return slices.ContainsFunc(list(), func(n string) bool { return strings.HasSuffix(n, logs.CompressSuffix) })
	})
	for range 3 { // across rounds: never more than max-files files
		names := list()
		assert.LessOrEqual(t, len(names), 3, names)
		for _, n := range names {
			if n == "0.log" || strings.HasSuffix(n, logs.TmpSuffix) { // .tmp: a compression under way
				continue
			}
			assert.Regexp(t, rotated, n, "kubelet's name of a rotated file")
		}
		<-time.After(logs.MinMonitorInterval)
	}
	info, err := os.Stat(filepath.Join(dir, "0.log"))
	require.NoError(t, err)
	assert.Less(t, info.Size(), int64(16<<20), "the current file is rotated")

	out, err := runBinary(t, "logs", "-r", endpoint, testNamespace+"/"+podName(name), "--tail", "1")
	require.NoError(t, err, out)
	assert.Regexp(t, `^(chatty-line-of-forty-eight-bytes-abcdefghijklmno|seq \d+)\n$`, out)

	link := filepath.Join(linkDir, podName(name)+"_"+testNamespace+"_chatty-"+id+".log")
	target, err := os.Readlink(link)
	require.NoError(t, err, "the container's link")
	assert.Equal(t, filepath.Join(dir, "0.log"), target)
}
