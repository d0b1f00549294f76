package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// logPod is a fake runtime with a pod whose containers write their logs
// where kubelet has them written: <log directory>/<container>/<attempt>.log.
type logPod struct {
	rt      *fakeruntime.Runtime
	dir     string
	sandbox string
}

func newLogPod(t *testing.T, opts ...fakeruntime.SandboxOption) *logPod {
	rt := fakeruntime.NewForTest(t)
	now := time.Date(2024, 1, 2, 15, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	rt.SetClock(func() time.Time { // one instant per instance: creation orders them
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	})
	dir := filepath.Join(t.TempDir(), "shop_web_uid1")
	p := &logPod{rt: rt, dir: dir}
	p.sandbox = rt.AddSandbox("shop", "web", "uid1", append([]fakeruntime.SandboxOption{fakeruntime.WithLogDirectory(dir)}, opts...)...)
	return p
}

// add adds an instance of a container with a log file holding lines.
func (p *logPod) add(t *testing.T, name string, attempt uint32, state runtimeapi.ContainerState, lines ...string) string {
	t.Helper()
	rel := filepath.Join(name, strconv.Itoa(int(attempt))+".log")
	require.NoError(t, os.MkdirAll(filepath.Join(p.dir, name), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, rel), []byte(strings.Join(lines, "")), 0o644))
	return p.rt.AddContainer(p.sandbox, name, state, fakeruntime.WithAttempt(attempt), fakeruntime.WithLogPath(rel))
}

func (p *logPod) path(name string, attempt uint32) string {
	return filepath.Join(p.dir, name, strconv.Itoa(int(attempt))+".log")
}

func rec(sec, stream, tag, content string) string {
	return "2024-01-02T15:04:" + sec + "Z " + stream + " " + tag + " " + content + "\n"
}

func (p *logPod) logs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCLI(t, append([]string{"logs", "-r", p.rt.Endpoint()}, args...)...)
}

func TestLogs(t *testing.T) {
	p := newLogPod(t)
	p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING,
		rec("01", "stdout", "F", "one"),
		rec("02", "stderr", "F", "two \x1b[31mred\x1b[0m"),
		rec("03", "stdout", "P", "thr"),
		rec("04", "stdout", "F", "ee"))

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"the only container, both streams in order, bytes unchanged into a pipe", []string{"shop/web"},
			"one\ntwo \x1b[31mred\x1b[0m\nthree\n"},
		{"NAME with -n, and the container as the second argument", []string{"-n", "shop", "web", "app"},
			"one\ntwo \x1b[31mred\x1b[0m\nthree\n"},
		{"tail counts a split line once", []string{"shop/web", "--tail", "2"}, "two \x1b[31mred\x1b[0m\nthree\n"},
		{"timestamps", []string{"shop/web", "-c", "app", "--timestamps", "--tail", "1"}, "2024-01-02T15:04:03.000000000Z three\n"},
		{"since-time", []string{"shop/web", "--since-time", "2024-01-02T15:04:02Z"}, "two \x1b[31mred\x1b[0m\nthree\n"},
		{"since, relative to now", []string{"shop/web", "--since", "1h"}, ""},
		{"limit-bytes", []string{"shop/web", "--limit-bytes", "6"}, "one\ntw"},
		{"stderr only", []string{"shop/web", "--stream", "stderr"}, "two \x1b[31mred\x1b[0m\n"},
		{"prefix", []string{"shop/web", "--prefix", "--stream", "stdout"}, "[pod/web/app] one\n[pod/web/app] three\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, err := p.logs(t, tt.args...)
			require.NoError(t, err, stderr)
			assert.Equal(t, tt.want, out)
			assert.Empty(t, stderr)
		})
	}
}

// Which container, and which of its instances, as kubectl and kubelet
// choose them.
func TestLogsChoosesAsKubectl(t *testing.T) {
	t.Run("several containers: say which", func(t *testing.T) {
		p := newLogPod(t)
		p.add(t, "init", 0, runtimeapi.ContainerState_CONTAINER_EXITED, rec("01", "stdout", "F", "init done"))
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("02", "stdout", "F", "app"))
		p.add(t, "sidecar", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("03", "stdout", "F", "sidecar"))
		_, stderr, err := p.logs(t, "shop/web")
		assert.ErrorIs(t, err, errUsage)
		assert.Contains(t, stderr, `pod "web" has 3 containers: say which with -c (one of init, app, sidecar), or use --all-containers`)

		out, _, err := p.logs(t, "shop/web", "-c", "sidecar")
		require.NoError(t, err)
		assert.Equal(t, "sidecar\n", out)

		out, _, err = p.logs(t, "shop/web", "--all-containers", "--prefix")
		require.NoError(t, err)
		assert.Equal(t, "[pod/web/init] init done\n[pod/web/app] app\n[pod/web/sidecar] sidecar\n", out, "in the order they were created")

		_, _, err = p.logs(t, "shop/web", "-c", "nope")
		assert.ErrorContains(t, err, `container "nope" in pod "web" is not available: the runtime has none of that name in the pod (it has init, app, sidecar)`)
		assert.NotErrorIs(t, err, errUsage)
	})

	t.Run("the default-container annotation", func(t *testing.T) {
		p := newLogPod(t, fakeruntime.WithSandboxAnnotations(map[string]string{defaultContainerAnnotation: "app"}))
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("02", "stdout", "F", "app"))
		p.add(t, "sidecar", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("03", "stdout", "F", "sidecar"))
		out, _, err := p.logs(t, "shop/web")
		require.NoError(t, err)
		assert.Equal(t, "app\n", out)
	})

	t.Run("an annotation naming no container", func(t *testing.T) {
		p := newLogPod(t, fakeruntime.WithSandboxAnnotations(map[string]string{defaultContainerAnnotation: "gone"}))
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
		p.add(t, "sidecar", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
		_, stderr, err := p.logs(t, "shop/web")
		assert.ErrorIs(t, err, errUsage)
		assert.Contains(t, stderr, "Default container name \"gone\" not found in pod web\n")
	})

	t.Run("an annotation of 200 KB naming no container: quoted bounded", func(t *testing.T) {
		p := newLogPod(t, fakeruntime.WithSandboxAnnotations(map[string]string{defaultContainerAnnotation: strings.Repeat("x", 200<<10)}))
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
		p.add(t, "sidecar", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
		_, stderr, err := p.logs(t, "shop/web")
		assert.ErrorIs(t, err, errUsage)
		assert.Contains(t, stderr, "more bytes cut)\" not found in pod web\n")
		assert.Less(t, len(stderr), 2<<10)
	})

	t.Run("the current instance, -p the one before", func(t *testing.T) {
		p := newLogPod(t)
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, rec("01", "stdout", "F", "first run"))
		p.add(t, "app", 1, runtimeapi.ContainerState_CONTAINER_EXITED, rec("02", "stdout", "F", "second run"))
		p.add(t, "app", 2, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("03", "stdout", "F", "third run"))
		out, _, err := p.logs(t, "shop/web")
		require.NoError(t, err)
		assert.Equal(t, "third run\n", out)
		out, _, err = p.logs(t, "shop/web", "-p")
		require.NoError(t, err)
		assert.Equal(t, "second run\n", out)
	})

	t.Run("waiting to restart: the last run's log", func(t *testing.T) {
		p := newLogPod(t)
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, rec("01", "stdout", "F", "crashed"))
		p.add(t, "app", 1, runtimeapi.ContainerState_CONTAINER_CREATED)
		out, _, err := p.logs(t, "shop/web")
		require.NoError(t, err)
		assert.Equal(t, "crashed\n", out)
		out, _, err = p.logs(t, "shop/web", "-p")
		require.NoError(t, err)
		assert.Equal(t, "crashed\n", out)
	})

	t.Run("exited, not restarted: its own log; -p has none", func(t *testing.T) {
		p := newLogPod(t)
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, rec("01", "stdout", "F", "done"))
		out, _, err := p.logs(t, "shop/web", "-f")
		require.NoError(t, err, "following an exited container ends at once")
		assert.Equal(t, "done\n", out)
		_, _, err = p.logs(t, "shop/web", "-p")
		assert.ErrorContains(t, err, `previous terminated container "app" in pod "web" not found`)
	})

	t.Run("created, never started", func(t *testing.T) {
		p := newLogPod(t)
		p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_CREATED)
		_, stderr, err := p.logs(t, "shop/web")
		assert.ErrorContains(t, err, `container "app" in pod "web" is waiting to start: ContainerCreating`)
		assert.Equal(t, 1, report(err, io.Discard), "a runtime answer, not a usage error")
		assert.Contains(t, stderr, "cri-prober: container")
	})
}

// The pod a name stands for is the one status and the state API mean
// (pods.View.ByName), kept-apart case included: a pod re-created under
// another pod's UID is kept apart, and its ready sandbox loses to the
// name's other pod, whose sandbox is not ready. logs read the kept-apart
// pod's log before, by its own copy of "a ready sandbox, else the newest".
func TestLogsMeanThePodStatusMeans(t *testing.T) {
	p := newLogPod(t) // shop/web uid1: its sandbox stopped below
	p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, rec("01", "stdout", "F", "uid1's app"))
	_, err := p.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandbox})
	require.NoError(t, err)
	p.rt.AddSandbox("shop", "db", "uid2") // holds uid2 first
	apart := &logPod{rt: p.rt, dir: filepath.Join(t.TempDir(), "shop_web_uid2")}
	apart.sandbox = p.rt.AddSandbox("shop", "web", "uid2", fakeruntime.WithLogDirectory(apart.dir)) // ready, newest
	apart.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("02", "stdout", "F", "the kept-apart pod's app"))

	client, err := cri.Dial(context.Background(), p.rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	poller, err := cri.NewPoller(client, cri.PollerConfig{})
	require.NoError(t, err)
	snap, err := poller.Relist(context.Background())
	require.NoError(t, err)
	view := pods.Resolve(snap, pods.Inputs{})
	meant, ok := view.ByName("shop", "web")
	require.True(t, ok)
	require.Equal(t, p.sandbox, meant.Sandbox.ID, "what status and the state API show as shop/web")
	keptApart := slices.ContainsFunc(view.Pods(), func(q *pods.Pod) bool { return q.Sandbox != nil && q.Sandbox.ID == apart.sandbox && q.KeptApart() })
	require.True(t, keptApart, "the re-created pod is kept apart")

	out, stderr, err := p.logs(t, "shop/web")
	require.NoError(t, err, stderr)
	assert.Equal(t, "uid1's app\n", out, "the log of the pod status shows")
}

func TestLogsErrors(t *testing.T) {
	p := newLogPod(t)
	p.rt.AddContainer(p.sandbox, "nolog", runtimeapi.ContainerState_CONTAINER_RUNNING)
	p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("01", "stdout", "F", "hello"))
	p.add(t, "gone", 0, runtimeapi.ContainerState_CONTAINER_EXITED)
	require.NoError(t, os.Remove(p.path("gone", 0)))

	_, _, err := p.logs(t, "shop/nope")
	assert.ErrorContains(t, err, `pod "nope" not found in namespace "shop"`)
	_, _, err = p.logs(t, "shop/web", "-c", "nolog")
	assert.ErrorContains(t, err, `container "nolog" in pod "web" has no log file: it was created without a log path`)
	_, _, err = p.logs(t, "shop/web", "-c", "gone")
	assert.ErrorContains(t, err, `container "gone" in pod "web": its log file is gone (the container was removed, or its log rotated away at that moment): lstat `+p.path("gone", 0))

	// One container without a log hides none of the others'; the exit
	// code still says something was missing.
	out, stderr, err := p.logs(t, "shop/web", "--all-containers")
	assert.ErrorIs(t, err, errProblemsFound)
	assert.Equal(t, 1, report(err, io.Discard))
	assert.Equal(t, "hello\n", out)
	assert.Contains(t, stderr, `error: container "nolog" in pod "web" has no log file`)
	assert.Contains(t, stderr, `error: container "gone" in pod "web": its log file`)

	// What the runtime reported is shown safely in errors too.
	p.rt.AddContainer(p.sandbox, "evil\x1b[2J", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithLogPath("evil\x1b]0;pwned\x07.log"))
	_, stderr, err = p.logs(t, "shop/web", "-c", "evil\x1b[2J")
	require.Error(t, err)
	assert.NotContains(t, stderr, "\x1b")
	assert.Contains(t, stderr, `evil\x1b]0;pwned\x07.log`)
	_, stderr, _ = p.logs(t, "shop/web")
	assert.NotContains(t, stderr, "\x1b")

	_, _, err = runCLI(t, "logs", "shop/web", "-r", "unix:///nonexistent/cri.sock")
	assert.ErrorContains(t, err, "/nonexistent/cri.sock")
}

func TestLogsUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "want POD [CONTAINER], got 0 argument(s)"},
		{[]string{"shop/web", "app", "-c", "app"}, "the container is given twice (argument and -c): give one"},
		{[]string{"shop/web", "-c", "app", "--all-containers"}, `--all-containers and container "app": give one`},
		{[]string{"shop/web", "--tail", "-2"}, "--tail -2: want a number of lines, or -1 for all"},
		{[]string{"shop/web", "--limit-bytes", "-1"}, "--limit-bytes -1: want a number of bytes (0: no limit)"},
		{[]string{"shop/web", "--since", "-1s"}, "--since -1s: want a positive duration"},
		{[]string{"shop/web", "--since", "1s", "--since-time", "2024-08-30T06:00:00Z"}, "--since and --since-time: give at most one"},
		{[]string{"shop/web", "--since-time", "yesterday"}, `--since-time "yesterday": want an RFC 3339 time`},
		{[]string{"shop/web", "--stream", "stdin"}, `--stream "stdin": want all, stdout or stderr`},
		{[]string{"a/b/c"}, `pod "a/b/c": want NAMESPACE/NAME, or NAME with -n NAMESPACE`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, stderr, err := runCLI(t, append([]string{"logs"}, tt.args...)...)
			assert.ErrorIs(t, err, errUsage)
			assert.Contains(t, stderr, tt.want)
			assert.Contains(t, stderr, "See 'cri-prober logs --help' for usage.")
		})
	}
}

// runLogs runs the command in the background, as a follow does.
func runLogs(ctx context.Context, p *logPod, out io.Writer, args ...string) chan error {
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"logs", "-r", p.rt.Endpoint()}, args...), out, io.Discard)
	}()
	return done
}

func appendLog(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close()) // as the runtime does when the container's output ends
}

// eventually waits (in real time, at most ten seconds) for cond.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// -f prints what the container writes until it exits; Ctrl-C ends it
// without an error.
func TestLogsFollow(t *testing.T) {
	p := newLogPod(t)
	id := p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("01", "stdout", "F", "one"))
	var out syncBuffer
	done := runLogs(t.Context(), p, &out, "shop/web", "-f")
	eventually(t, func() bool { return out.String() == "one\n" }, "the log so far")
	appendLog(t, p.path("app", 0), rec("02", "stdout", "F", "two"))
	eventually(t, func() bool { return out.String() == "one\ntwo\n" }, "a new line")

	require.NoError(t, p.rt.SetContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	appendLog(t, p.path("app", 0), rec("03", "stdout", "F", "bye"))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with the container")
	}
	assert.Equal(t, "one\ntwo\nbye\n", out.String())

	p.add(t, "other", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("01", "stdout", "F", "still running"))
	ctx, cancel := context.WithCancel(t.Context())
	var out2 syncBuffer
	done = runLogs(ctx, p, &out2, "shop/web", "-c", "other", "-f")
	eventually(t, func() bool { return out2.String() == "still running\n" }, "the log so far")
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "an interrupted follow is no error")
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with its context")
	}
}

// Following several containers, their lines interleave whole.
func TestLogsFollowAllContainers(t *testing.T) {
	p := newLogPod(t)
	app := p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("01", "stdout", "F", "app one"))
	side := p.add(t, "sidecar", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, rec("01", "stdout", "F", "sidecar one"))
	var out syncBuffer
	done := runLogs(t.Context(), p, &out, "shop/web", "-f", "--all-containers", "--prefix")
	eventually(t, func() bool { return strings.Count(out.String(), "\n") == 2 }, "both logs so far")
	appendLog(t, p.path("app", 0), rec("02", "stdout", "P", "app two, "))
	appendLog(t, p.path("sidecar", 0), rec("02", "stdout", "F", "sidecar two"))
	appendLog(t, p.path("app", 0), rec("03", "stdout", "F", "in two records"))
	eventually(t, func() bool { return strings.Count(out.String(), "\n") == 4 }, "the new lines")
	require.NoError(t, p.rt.SetContainerState(app, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	require.NoError(t, p.rt.SetContainerState(side, runtimeapi.ContainerState_CONTAINER_EXITED, 0))
	appendLog(t, p.path("app", 0), "")
	appendLog(t, p.path("sidecar", 0), "")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with the containers")
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.ElementsMatch(t, []string{"[pod/web/app] app one", "[pod/web/sidecar] sidecar one",
		"[pod/web/sidecar] sidecar two", "[pod/web/app] app two, in two records"}, lines)
}

// On a terminal, what the container wrote cannot drive it.
func TestLogsOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	p := newLogPod(t)
	p.add(t, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING,
		rec("01", "stdout", "F", "title \x1b]0;pwned\x07 clear \x1b[2J bidi \u202eevil"),
		rec("02", "stdout", "F", "ünïcode\tand tabs kept"))
	require.NoError(t, run(context.Background(), []string{"logs", "-r", p.rt.Endpoint(), "shop/web"}, slave, io.Discard))
	require.NoError(t, slave.Close())
	got, _ := io.ReadAll(master) // EIO once the other side is closed and read
	out := strings.ReplaceAll(string(got), "\r\n", "\n")
	assert.Equal(t, "title \\x1b]0;pwned\\x07 clear \\x1b[2J bidi \\u202eevil\nünïcode\tand tabs kept\n", out)
}

func TestTerminalWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"text, newlines, tabs and Unicode pass", []string{"a\tb\nçé 日本\n"}, "a\tb\nçé 日本\n"},
		{"escape sequences", []string{"\x1b[31mred\x1b[0m \x1b]52;c;cHduZWQ=\x07"}, `\x1b[31mred\x1b[0m \x1b]52;c;cHduZWQ=\x07`},
		{"CRLF kept, a lone CR escaped", []string{"dos\r\nhidden\rshown\n"}, "dos\r\nhidden\\x0dshown\n"},
		{"a CR at the end of a write waits for the next", []string{"dos\r", "\nprogress\r", "50%"}, "dos\r\nprogress\\x0d50%"},
		{"backspace, DEL, NUL", []string{"a\bb\x7f\x00"}, `a\x08b\x7f\x00`},
		{"C1 controls and bidi overrides", []string{"\u009b2J \u202e \u2066"}, `\u009b2J \u202e \u2066`},
		{"bytes that are no UTF-8", []string{"bad \xff\xfe end"}, `bad \xff\xfe end`},
		{"a character cut by a write's end", []string{"caf\xc3", "\xa9 \xe6\x97", "\xa5"}, "café 日"},
		{"held bytes flushed at the end", []string{"caf\xc3"}, `caf\xc3`},
		{"a CR flushed at the end", []string{"x\r"}, `x\x0d`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			w := &terminalWriter{w: &b}
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				assert.Equal(t, len(s), n)
			}
			w.Flush()
			assert.Equal(t, tt.want, b.String())
		})
	}
}

func TestSourceWriter(t *testing.T) {
	var b bytes.Buffer
	w := &sourceWriter{out: &b, prefix: []byte("[p] ")}
	for _, s := range []string{"one\ntw", "o\n", "", "three"} {
		_, err := w.Write([]byte(s))
		require.NoError(t, err)
	}
	w.Flush()
	assert.Equal(t, "[p] one\n[p] two\n[p] three", b.String(), "a prefix per line, however it is written")

	b.Reset()
	held := &sourceWriter{out: &b, held: true}
	_, _ = held.Write([]byte("part"))
	assert.Empty(t, b.String(), "held until the line ends")
	_, _ = held.Write([]byte(" two\nnext"))
	assert.Equal(t, "part two\n", b.String())
	_, _ = held.Write(bytes.Repeat([]byte("x"), maxHeld))
	assert.Equal(t, len("part two\nnext")+maxHeld, b.Len(), "a line longer than maxHeld goes out without its end")
	_, _ = held.Write([]byte("end"))
	assert.Equal(t, len("part two\nnext")+maxHeld, b.Len())
	held.Flush()
	assert.True(t, strings.HasSuffix(b.String(), "xxxend"), "the rest when the source ends")
}

// openPTY opens a pseudo-terminal: its master, to read what is shown, and
// its slave, the terminal the command writes to.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.True(t, isTerminal(s))
	return m, s
}
