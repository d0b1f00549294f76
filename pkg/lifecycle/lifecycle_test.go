package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// fakeExec answers RunInContainer with a canned response.
type fakeExec struct {
	resp *runtimeapi.ExecSyncResponse
	err  error
	got  []string
}

func (f *fakeExec) RunInContainer(_ context.Context, _ string, cmd []string) (*runtimeapi.ExecSyncResponse, error) {
	f.got = cmd
	return f.resp, f.err
}

func execHandler(cmd ...string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

var target = Target{ContainerID: "c1", Container: &spec.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}}}

// Exec hooks: exit 0 passes; a non-zero exit fails with kubelet's message,
// the output bounded; a runtime error fails.
func TestExec(t *testing.T) {
	ok := &fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("done")}}
	msg, err := NewRunner(ok).Run(context.Background(), execHandler("sh", "-c", "true"), target)
	require.NoError(t, err)
	assert.Empty(t, msg)
	assert.Equal(t, []string{"sh", "-c", "true"}, ok.got)

	huge := strings.Repeat("x", 3*bounded.Output)
	failing := &fakeExec{resp: &runtimeapi.ExecSyncResponse{ExitCode: 3, Stdout: []byte(huge), Stderr: []byte("boom")}}
	msg, err = NewRunner(failing).Run(context.Background(), execHandler("false"), target)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "command 'false' exited with 3: boom")
	assert.Contains(t, msg, `Exec lifecycle hook ([false]) for Container "app" failed - error: command 'false' exited with 3: boom, message: "xxx`)
	assert.Less(t, len(msg), 2*bounded.Output, "output bounded")

	_, err = NewRunner(&fakeExec{err: errors.New("container gone")}).Run(context.Background(), execHandler("true"), target)
	assert.EqualError(t, err, "container gone")
}

// HTTP hooks: any response succeeds (kubelet judges no status), a named
// port resolves, no answer fails, an HTTPS hook answered in HTTP is retried
// in HTTP and told.
func TestHTTP(t *testing.T) {
	var gotAgent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAgent = r.Header.Get("User-Agent")
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	httpGet := func(scheme corev1.URIScheme, p intstr.IntOrString) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/hook", Port: p, Host: "127.0.0.1", Scheme: scheme}}
	}
	r := NewRunner(&fakeExec{})
	_, err := r.Run(context.Background(), httpGet(corev1.URISchemeHTTP, intstr.FromInt(port)), target)
	require.NoError(t, err, "a 500 is a response: the hook ran")
	assert.Equal(t, "kube-lifecycle/1.36", gotAgent)

	named := target
	named.Container = &spec.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	_, err = r.Run(context.Background(), httpGet(corev1.URISchemeHTTP, intstr.FromString("web")), named)
	require.NoError(t, err)
	_, err = r.Run(context.Background(), httpGet(corev1.URISchemeHTTP, intstr.FromString("nope")), named)
	assert.EqualError(t, err, `strconv.Atoi: parsing "nope": invalid syntax`, "kubelet's error")

	var fellBack string
	withFallback := target
	withFallback.OnHTTPFallback = func(host string) { fellBack = host }
	_, err = r.Run(context.Background(), httpGet(corev1.URISchemeHTTPS, intstr.FromInt(port)), withFallback)
	require.NoError(t, err, "retried in HTTP")
	assert.Equal(t, "127.0.0.1:"+u.Port(), fellBack)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	msg, err := r.Run(context.Background(), httpGet(corev1.URISchemeHTTP, intstr.FromInt(closedPort)), target)
	require.Error(t, err)
	assert.Contains(t, msg, `HTTP lifecycle hook (/hook) for Container "app" failed - error: `)

	noIP := &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(80), Scheme: corev1.URISchemeHTTP}}
	_, err = r.Run(context.Background(), noIP, target)
	assert.Error(t, err, "no host and no pod IP")
}

// Sleep hooks sleep, and end early (a failure) when the caller gives up.
func TestSleep(t *testing.T) {
	r := NewRunner(&fakeExec{})
	fired := make(chan time.Time)
	r.after = func(time.Duration) <-chan time.Time { return fired }
	sleep := &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}
	done := make(chan error, 1)
	go func() { _, err := r.Run(context.Background(), sleep, target); done <- err }()
	fired <- time.Now()
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg, err := r.Run(ctx, sleep, target)
	assert.EqualError(t, err, "container terminated before sleep hook finished")
	assert.Contains(t, msg, `Sleep lifecycle hook (5) for Container "app" failed`)
}

// A tcpSocket handler is kept in the API for compatibility; kubelet fails
// it every time, and so does the agent.
func TestTCPSocketHandlerFails(t *testing.T) {
	h := &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}
	msg, err := NewRunner(&fakeExec{}).Run(context.Background(), h, target)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid handler")
	assert.Contains(t, msg, "Cannot run handler")
}
