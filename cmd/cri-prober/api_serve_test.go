package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// startRun runs `cri-prober run` with args against a fake runtime until
// the test ends, and returns its stderr.
func startRun(t *testing.T, args ...string) func() string {
	t.Helper()
	return startRunOn(t, fakeruntime.NewForTest(t), args...)
}

// startRunOn is startRun against the fake runtime rt.
func startRunOn(t *testing.T, rt *fakeruntime.Runtime, args ...string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	var mu sync.Mutex
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none"}, args...), io.Discard,
			writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) }))
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return func() string { mu.Lock(); defer mu.Unlock(); return stderr.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// request GETs path from the agent at url with the Host header host (""
// for the URL's) and the basic auth user:password ("" for none).
func request(t *testing.T, client *http.Client, url, host, auth string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if user, password, ok := strings.Cut(auth, ":"); ok {
		req.SetBasicAuth(user, password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// --listen unix:///path serves on a socket only the agent's user can use,
// removed when the agent stops.
func TestRunListensOnAUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "api") // a socket's path must be short
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "api.sock")
	t.Run("serving", func(t *testing.T) {
		startRun(t, "--listen", "unix://"+path)
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
		defer client.CloseIdleConnections()
		require.Eventually(t, func() bool {
			code, _, err := request(t, client, "http://localhost/healthz", "", "")
			return err == nil && code == http.StatusOK
		}, 10*time.Second, 10*time.Millisecond)
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		_, body, err := request(t, client, "http://localhost/metrics", "", "")
		require.NoError(t, err)
		for _, name := range []string{"cri_prober_api_connections ", `cri_prober_api_rejected_total{reason="host"} 0`, "cri_prober_api_event_streams 0"} {
			assert.Contains(t, body, name, "the API's metrics are on /metrics")
		}
	})
	assert.NoFileExists(t, path, "removed when the agent stops")
}

// The Host check and the web configuration file are run's flags.
func TestRunChecksHostAndWebConfig(t *testing.T) {
	listen := freeLoopbackPort(t)
	config := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt("dave123"), from exporter-toolkit's tests.
	require.NoError(t, os.WriteFile(config, []byte("basic_auth_users:\n  dave: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n"), 0o600))
	startRun(t, "--listen", listen, "--web.allowed-hosts", "node1,cri-prober.kube-system.svc", "--web.config.file", config)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + listen + "/healthz"
	require.Eventually(t, func() bool {
		code, _, err := request(t, client, url, "", "dave:dave123")
		return err == nil && code == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	for host, want := range map[string]int{
		listen: http.StatusOK, "localhost:9440": http.StatusOK, "node1:9440": http.StatusOK, "cri-prober.kube-system.svc": http.StatusOK,
		"evil.example:9440": http.StatusMisdirectedRequest,
	} {
		code, _, err := request(t, client, url, host, "dave:dave123")
		require.NoError(t, err)
		assert.Equal(t, want, code, host)
	}
	code, _, err := request(t, client, url, "", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "basic auth from --web.config.file")
}

// Mistakes in the API's flags stop the agent at start, saying what to fix.
func TestRunRefusesBadAPIFlags(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--web.config.file", "/nonexistent/web.yml"}, "--web.config.file /nonexistent/web.yml"},
		{[]string{"--web.max-event-streams", "128"}, "--web.max-event-streams (128) must be below --web.max-connections (128)"},
		{[]string{"--web.max-connections", "0"}, "must be positive"},
		{[]string{"--web.allowed-hosts", "a/b"}, `--web.allowed-hosts: "a/b" is not a host name`},
		{[]string{"--listen", "unix://relative.sock"}, "absolute path"},
	} {
		var stderr bytes.Buffer
		ctx := klog.NewContext(context.Background(), logr.Discard())
		err := run(ctx, append([]string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none"}, tt.args...), io.Discard, &stderr)
		require.Error(t, err, "%v", tt.args)
		assert.Contains(t, stderr.String()+err.Error(), tt.want, "%v", tt.args)
	}
}

// The API's flags have config file keys, as every flag.
func TestAPIFlagsInTheConfigFile(t *testing.T) {
	var o runOptions
	fs := newRunCommand(&o).Flags()
	require.NoError(t, fs.Parse([]string{"--web.max-connections", "64"}))
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("listen: unix:///run/cri-prober/api.sock\nweb.config.file: /etc/cri-prober/web-config.yml\n"+
		"web.allowed-hosts: node1,node1.example\nweb.max-connections: 32\nweb.max-event-streams: 8\n"), 0o600))
	require.NoError(t, applyConfig(fs, path))
	assert.Equal(t, "unix:///run/cri-prober/api.sock", o.listen)
	assert.Equal(t, "/etc/cri-prober/web-config.yml", o.webConfigFile)
	assert.Equal(t, "node1,node1.example", o.allowedHosts)
	assert.Equal(t, 64, o.maxConnections, "the command line wins")
	assert.Equal(t, 8, o.maxEventStreams)
}

// An address another process holds (a local user can bind 127.0.0.1:9440
// while the agent restarts) no longer stops the agent: it probes and
// restarts as ever, tries the address again, and serves it once free;
// cri_prober_api_up says which. Fails on the old code: run exited with
// "address already in use".
func TestRunProbesWhileItsAPIAddressIsHeld(t *testing.T) {
	old := listenRetry
	listenRetry = 20 * time.Millisecond
	t.Cleanup(func() { listenRetry = old })
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := squatter.Addr().String()
	impostor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })} //nolint:errcheck // test
	served := make(chan struct{})
	go func() { defer close(served); impostor.Serve(squatter) }() //nolint:errcheck // closed below

	rt := fakeruntime.NewForTest(t)
	stderr := startRunOn(t, rt, "--listen", addr)
	require.Eventually(t, func() bool { return rt.Calls("ListContainers") >= 3 }, 10*time.Second, 10*time.Millisecond,
		"the agent lists the runtime while its address is held: %s", stderr())

	impostor.Close()
	<-served
	client := &http.Client{Timeout: time.Second}
	require.Eventually(t, func() bool {
		code, body, err := request(t, client, "http://"+addr+"/metrics", "", "")
		return err == nil && code == http.StatusOK && strings.Contains(body, "cri_prober_api_up 1")
	}, 10*time.Second, 10*time.Millisecond, "the agent serves the address once it is free")
}
