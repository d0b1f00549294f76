package cri

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criLog writes lines as containerd writes a container's log: a full
// record per line, on stdout.
func criLog(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "2026-11-21T09:00:00.000000001Z stdout F %s\n", l)
	}
	return b.String()
}

// kubelet's convertToKubeContainerStatus for an exited container, row by
// row: "container shape → status message".
func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	secret := write("secret", "the host's secret")
	bye := write("bye", "bye\nfrom the app")
	empty := write("empty", "")
	big := write("big", strings.Repeat("a", 100)+strings.Repeat("z", maxTerminationMessage))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(secret, link))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	logPath := write("0.log", criLog("starting", "panic: it broke"))
	missing := filepath.Join(dir, "missing")

	const path = "/dev/termination-log"
	status := func(exit int32, reason, message, policy, hostPath string) *runtimeapi.ContainerStatus {
		st := &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: exit, Reason: reason, Message: message,
			Annotations: map[string]string{AnnotationTerminationMessagePath: path, AnnotationTerminationMessagePolicy: policy}, LogPath: logPath}
		if hostPath != "" {
			st.Mounts = []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: secret}, {ContainerPath: path, HostPath: hostPath}}
		}
		return st
	}
	tests := []struct {
		name string
		st   *runtimeapi.ContainerStatus
		want string
	}{
		{"running: the runtime's message, nothing read", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING, Message: "m",
			Annotations: map[string]string{AnnotationTerminationMessagePath: path}, Mounts: []*runtimeapi.Mount{{ContainerPath: path, HostPath: bye}}}, "m"},
		{"exited without kubelet's annotations: the runtime's message", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED,
			ExitCode: 1, Message: "from the runtime", Mounts: []*runtimeapi.Mount{{ContainerPath: path, HostPath: bye}}}, "from the runtime"},
		{"the file's text is the message", status(0, "Completed", "", "File", bye), "bye\nfrom the app"},
		{"the runtime's message, then the file's", status(137, "OOMKilled", "out of memory", "File", bye), "out of memory: bye\nfrom the app"},
		{"an empty file: no message", status(1, "Error", "", "File", empty), ""},
		{"no file: no message", status(1, "Error", "", "File", missing), ""},
		{"no mount at the path: no message", status(1, "Error", "", "File", ""), ""},
		{"a relative path as the mount's absolute one", func() *runtimeapi.ContainerStatus {
			st := status(0, "Completed", "", "File", bye)
			st.Annotations[AnnotationTerminationMessagePath] = "dev/../dev/termination-log"
			return st
		}(), "bye\nfrom the app"},
		{"at most the file's last 4 KiB", status(1, "Error", "", "File", big), strings.Repeat("z", maxTerminationMessage)},
		{"FallbackToLogsOnError, failed, empty file: the log's end", status(1, "Error", "", "FallbackToLogsOnError", empty), "starting\npanic: it broke\n"},
		{"FallbackToLogsOnError, failed, no file: the log's end", status(2, "Error", "", "FallbackToLogsOnError", missing), "starting\npanic: it broke\n"},
		{"FallbackToLogsOnError, failed, the file says: the file", status(1, "Error", "", "FallbackToLogsOnError", bye), "bye\nfrom the app"},
		{"FallbackToLogsOnError, succeeded: no log", status(0, "Completed", "", "FallbackToLogsOnError", empty), ""},
		{"FallbackToLogsOnError, could not run: no log", status(128, "ContainerCannotRun", "exec: not found", "FallbackToLogsOnError", empty), "exec: not found"},
		{"FallbackToLogsOnError without a log path", func() *runtimeapi.ContainerStatus {
			st := status(1, "Error", "", "FallbackToLogsOnError", empty)
			st.LogPath = ""
			return st
		}(), "Error on reading termination message from logs: the runtime reports no log path"},
		{"a link is not followed out of the directory", status(1, "Error", "", "File", link),
			"Error on reading termination log " + link + ": not a regular file (links are not followed)"},
		{"a FIFO is not read (nor waited on)", status(1, "Error", "", "File", fifo),
			"Error on reading termination log " + fifo + ": not a regular file (links are not followed)"},
		{"the runtime's message is bounded", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, Message: strings.Repeat("m", 5000)},
			strings.Repeat("m", 1024) + "… (3976 more bytes cut)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withTerminationMessage(tt.st)
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, "the host's secret")
		})
	}
}

// k8s.io/cri-client's ReadLogs with TailLines 80 into kubelet's 2 KiB
// ring: "log shape → text".
func TestLogText(t *testing.T) {
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("line %d", i)
	}
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name string
		log  string
		want string
	}{
		{"empty", "", ""},
		{"the lines' text, newlines kept", criLog("a", "b"), "a\nb\n"},
		{"the last 80 lines", criLog(many...), strings.Join(many[20:], "\n") + "\n"},
		{"the last 2 KiB", criLog("first", long), long[3000-2047:] + "\n"},
		{"partial records make one line", "2026-11-21T09:00:00Z stderr P par\n2026-11-21T09:00:00Z stderr F tial\n", "partial\n"},
		{"tags after a colon are ignored", "2026-11-21T09:00:00Z stdout P:x a\n2026-11-21T09:00:00Z stdout F:y b\n", "ab\n"},
		{"a record not ended yet is not counted", criLog("done") + "2026-11-21T09:00:00Z stdout F half", "done\n"},
		{"what does not parse is skipped", "garbage\n2026-11-21T09:00:00Z stdin F no\nnot-a-time stdout F no\n" + criLog("yes"), "yes\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, logText([]byte(tt.log), maxTerminationLogLines, maxTerminationLogBytes))
		})
	}
}

// The log's end is read within a bounded window; a window that starts
// within a record drops it.
func TestLogTailWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	huge := strings.Repeat("h", maxTerminationLogScan)
	require.NoError(t, os.WriteFile(path, []byte(criLog(huge, "last words")), 0o644))
	text, err := logTail(path)
	require.NoError(t, err)
	assert.Equal(t, "last words\n", text)
}
