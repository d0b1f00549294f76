package cri

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// A container's termination message, read where kubelet reads it: when it
// converts an exited container's runtime status into its own
// (kuberuntime_container.go, convertToKubeContainerStatus). Only
// containers made with kubelet's annotations say where the message is;
// others keep the runtime's own message.

// Kubelet's container annotations (kuberuntime/labels.go) naming the
// container path of its termination message file and what to do when it
// is empty.
const (
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
)

// Kubelet's bounds (pkg/kubelet/container/runtime.go): at most
// MaxContainerTerminationMessageLength bytes of the file (its end), and
// with FallbackToLogsOnError at most the last
// MaxContainerTerminationMessageLogLines lines of the log, of which the
// last MaxContainerTerminationMessageLogLength bytes.
const (
	maxTerminationMessage  = 4 << 10
	maxTerminationLogBytes = 2 << 10
	maxTerminationLogLines = 80
	// maxTerminationLogScan bounds how much of the log's end is read to
	// find those lines (kubelet reads back as far as they go): 80 lines
	// that do not fit hold far more than 2 KiB of text, so what is shown
	// is the same unless most of those bytes are lines the CRI format
	// does not parse.
	maxTerminationLogScan = 256 << 10
)

// Kubelet's texts and names.
const (
	policyFallbackToLogsOnError = "FallbackToLogsOnError" // v1.TerminationMessageFallbackToLogsOnError
	reasonContainerCannotRun    = "ContainerCannotRun"
)

// withTerminationMessage is convertToKubeContainerStatus's enrichment of
// an exited container's message: the runtime's message (cut to
// bounded.Message: a runtime's error can quote a workload), then ": " and
// the termination message when there is one. kubelet 1.36 appends the
// termination message to the runtime's message rather than replacing it;
// containerd sets none for an ordinary exit, so the message is usually the
// termination message alone.
func withTerminationMessage(st *runtimeapi.ContainerStatus) string {
	msg := bounded.String(st.GetMessage(), bounded.Message)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		return msg
	}
	a := st.GetAnnotations()
	// A container that could not even start has no logs to fall back to.
	fallback := a[AnnotationTerminationMessagePolicy] == policyFallbackToLogsOnError &&
		st.GetExitCode() != 0 && st.GetReason() != reasonContainerCannotRun
	text, checkLogs := terminationMessage(st.GetMounts(), a[AnnotationTerminationMessagePath], fallback)
	if checkLogs {
		text = lastStringFromLog(st.GetLogPath())
	}
	if text == "" {
		return msg
	}
	if msg != "" {
		msg += ": "
	}
	return msg + text
}

// terminationMessage is kubelet's getTerminationMessage: the end of the
// file mounted at the container's terminationMessagePath, and whether the
// log is to be read instead (fallback and the file empty or missing).
func terminationMessage(mounts []*runtimeapi.Mount, containerPath string, fallback bool) (string, bool) {
	if containerPath == "" {
		return "", fallback
	}
	containerPath = filepath.Clean("/" + containerPath) // volumeutil.MakeAbsolutePath on Linux
	for _, m := range mounts {
		if m.GetContainerPath() != containerPath {
			continue
		}
		data, err := readFileEnd(m.GetHostPath(), maxTerminationMessage)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fallback
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", m.GetHostPath(), err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// errNotRegular refuses what is not a plain file where a termination
// message is: a link (which would lead out of the host path's directory,
// to whatever it names), a FIFO (a read would wait for a writer), a
// device or a directory.
var errNotRegular = errors.New("not a regular file (links are not followed)")

// readFileEnd returns at most the last limit bytes of the regular file at
// path (kubelet's tail.ReadAtMost). The file's own name is opened without
// following a link, and without blocking; the directory above it is the
// runtime's (the mount's host path). What is read is bounded whatever the
// file does meanwhile.
func readFileEnd(path string, limit int64) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("host path %q is not absolute", path)
	}
	dir, name := filepath.Split(filepath.Clean(path))
	if name == "" {
		return nil, errNotRegular
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, errNotRegular
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return readEnd(f, limit)
}

// readEnd reads at most the last limit bytes of f, which must be a
// regular file.
func readEnd(f *os.File, limit int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	size := fi.Size()
	n := min(size, limit)
	if n <= 0 {
		return nil, nil
	}
	buf := make([]byte, n)
	read, err := f.ReadAt(buf, size-n)
	if err != nil && !errors.Is(err, io.EOF) { // the file shrank meanwhile: what was there
		return nil, err
	}
	return buf[:read], nil
}

// lastStringFromLog is kubelet's readLastStringFromContainerLogs: the
// text of the CRI log's last 80 lines, of which the last 2 KiB.
func lastStringFromLog(path string) string {
	text, err := logTail(path)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return text
}

func logTail(path string) (string, error) {
	if path == "" {
		return "", errors.New("the runtime reports no log path")
	}
	// kubelet resolves links in the log's path (the runtime and kubelet
	// own it); only a regular file is read, without blocking.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return "", fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	window, err := readEnd(f, maxTerminationLogScan)
	if err != nil {
		return "", fmt.Errorf("failed to read log file %q: %w", path, err)
	}
	if int64(len(window)) < fi.Size() {
		// The window starts within a line: not a whole record.
		if i := bytes.IndexByte(window, '\n'); i >= 0 {
			window = window[i+1:]
		} else {
			window = nil
		}
	}
	return logText(window, maxTerminationLogLines, maxTerminationLogBytes), nil
}

// logText is the content of the last n lines of a CRI log (k8s.io/cri-
// client's ReadLogs with TailLines: a line is a record, partial or not),
// as both streams write it into one ring of limit bytes: its last limit
// bytes. A record not ended by a newline yet is not counted, as kubelet's
// tail leaves it out; records that do not parse are skipped.
func logText(log []byte, n, limit int) string {
	if i := bytes.LastIndexByte(log, '\n'); i >= 0 {
		log = log[:i+1]
	} else {
		return ""
	}
	start := len(log)
	for lines := 0; lines < n && start > 0; lines++ {
		start = bytes.LastIndexByte(log[:start-1], '\n') + 1
	}
	var out []byte
	for _, line := range bytes.SplitAfter(log[start:], []byte{'\n'}) {
		if content, ok := criLogContent(line); ok {
			out = append(out, content...)
			if len(out) > 2*limit {
				out = append(out[:0], out[len(out)-limit:]...)
			}
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return string(out)
}

// criLogContent is k8s.io/cri-client's parseCRILog: a record is
// "<RFC 3339 time> <stdout|stderr> <tags> <content>"; the content of a
// partial record (tag P) loses its newline, a full one keeps it.
func criLogContent(line []byte) ([]byte, bool) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return nil, false
	}
	if _, err := time.Parse(time.RFC3339Nano, string(ts)); err != nil {
		return nil, false
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return nil, false
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return nil, false
	}
	tag, _, _ := strings.Cut(string(tags), ":")
	if tag == string(runtimeapi.LogTagPartial) {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	}
	return content, true
}
