package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A wait given up because of a signal never exits 0: a cancelled CI step
// must not carry on as if the pod were ready. It exits as a shell reports
// the signal (130 for SIGINT, 143 for SIGTERM); a timeout exits 1.
func TestWaitExitCodes(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.SetExecHandler(func(context.Context, string, []string, time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte("not yet")}, nil
	})
	sb := rt.AddSandbox("ci", "web", "uid-web", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{
		spec.ReadinessAnnotation: `{"exec":{"command":["check"]},"periodSeconds":1}`,
	}))
	args := []string{"--for", "ready", "--pod", "ci/web", "--runtime-endpoint", rt.Endpoint()}

	for _, tt := range []struct {
		name  string
		cause error
		want  int
	}{
		{"SIGINT", interrupted{syscall.SIGINT}, 130},
		{"SIGTERM", interrupted{syscall.SIGTERM}, 143},
		{"cancelled otherwise", context.Canceled, 130},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(300*time.Millisecond, func() { cancel(tt.cause) })
			var out, errb bytes.Buffer
			err := run(ctx, append([]string{"wait"}, args...), &out, &errb)
			var coded exitCode
			require.True(t, errors.As(err, &coded), "an exit code, not success: %v", err)
			assert.Equal(t, tt.want, coded.Code())
			assert.Contains(t, err.Error(), "while waiting: pod ci/web was not seen ready")
		})
	}

	t.Run("timeout", func(t *testing.T) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(append([]string{"wait"}, args...), "--timeout", "300ms"), &out, &errb)
		assert.ErrorIs(t, err, errProblemsFound, "exit code 1")
		assert.Contains(t, out.String(), "timed out after 300ms: pod ci/web is not ready")
	})
}

// fakeAgent serves the state API's pod and event endpoints from a
// function of the request count, for the commands that ask an agent.
func fakeAgent(t *testing.T, pod func(n int) (int, string)) string {
	t.Helper()
	var mu sync.Mutex
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/pods/ci/web", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		code, body := pod(n)
		mu.Unlock()
		w.WriteHeader(code)
		io.WriteString(w, body)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// wait --server asks a running agent: a pod it does not know yet is
// waited for, then the condition is read from what the agent reports; on
// a terminal (here: --progress always) a line says what it waits for.
func TestWaitAsksAnAgent(t *testing.T) {
	notReady := `{"namespace":"ci","name":"web","containers":[{"name":"app","id":"c1","state":"Running","started":true,"ready":false,
		"probes":{"readiness":{"result":"failure","lastProbeTime":"2026-01-01T00:00:00Z","output":"HTTP probe failed with statuscode: 503","consecutive":1,"threshold":3,"stable":"Failure"}}}]}`
	ready := strings.Replace(notReady, `"ready":false`, `"ready":true`, 1)
	server := fakeAgent(t, func(n int) (int, string) {
		switch {
		case n <= 2:
			return http.StatusNotFound, `{"error":"pod not found"}`
		case n <= 4:
			return http.StatusOK, notReady
		default:
			return http.StatusOK, ready
		}
	})
	out, errOut, err := runCLI(t, "wait", "ci/web", "--for", "ready", "--server", server, "--progress", "always", "--timeout", "20s")
	require.NoError(t, err, errOut)
	assert.Equal(t, "pod ci/web is ready\n", out)
	assert.Contains(t, errOut, "\r\x1b[Kwaiting for ci/web to be ready: no such pod yet (0s)")
	assert.Contains(t, errOut, "waiting for ci/web to be ready: app Running, not ready")
	assert.True(t, strings.HasSuffix(errOut, "\r\x1b[K"), "the line is erased before the answer: %q", errOut)

	// Timed out: the last results, from the agent, and exit code 1.
	server = fakeAgent(t, func(int) (int, string) { return http.StatusOK, notReady })
	out, errOut, err = runCLI(t, "wait", "-n", "ci", "web", "--server", server, "--timeout", "300ms")
	assert.ErrorIs(t, err, errProblemsFound, errOut)
	assert.Contains(t, out, "timed out after 300ms: pod ci/web is not ready")
	assert.Contains(t, out, "readiness: failure (1/3): HTTP probe failed with statuscode: 503")
	assert.Empty(t, errOut, "no progress line when stderr is no terminal")

	// An agent that cannot be reached is an error (2), not a timeout.
	_, _, err = runCLI(t, "wait", "ci/web", "--server", "unix:///nonexistent.sock", "--timeout", "5s")
	var coded exitCode
	require.ErrorAs(t, err, &coded)
	assert.Equal(t, 2, coded.Code())
}

// status -w prints the table, then a pod's row again each time an event
// comes and the pod has changed (as kubectl get -w), and nothing for an
// event that changed nothing.
func TestStatusWatch(t *testing.T) {
	var state atomic.Int32
	pods := []string{
		`{"pods":[{"namespace":"ci","name":"web","phase":"Running","containers":[{"name":"app","state":"Running","ready":false,"probes":{}}]}]}`,
		`{"pods":[{"namespace":"ci","name":"web","phase":"Running","containers":[{"name":"app","state":"Running","ready":true,"probes":{}}]}]}`,
	}
	sent := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/pods", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, pods[state.Load()])
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"type":"Normal","reason":"Nothing","namespace":"ci","pod":"web"}`+"\n\n")
		w.(http.Flusher).Flush()
		state.Store(1)
		io.WriteString(w, `data: {"type":"Normal","reason":"Ready","namespace":"ci","pod":"web"}`+"\n\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"status", "-w", "-s", srv.URL}, out, io.Discard) }()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "ci ") == 2 }, 10*time.Second, 10*time.Millisecond, "the second row: %q", out.String())
	<-sent
	cancel()
	require.NoError(t, <-done)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5, out.String())
	assert.Contains(t, lines[0], "NAMESPACE")
	assert.Contains(t, lines[1], "0/1")
	assert.Contains(t, lines[3], "1/1", "printed again, without the header")
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
