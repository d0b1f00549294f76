package api

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/events"
)

// serving is a Server serving on a listener until the test ends.
type serving struct {
	*Server
	ring *events.Ring
	addr string // host:port, or a socket's path
}

// serve serves a test server made with cfg (Pods, Events and Health
// filled in when unset) on l as sc.
func serve(t *testing.T, l net.Listener, cfg Config, sc ServeConfig) serving {
	t.Helper()
	base, ring := newServer(healthy)
	if cfg.Events == nil {
		cfg.Events = ring
	}
	cfg.Pods, cfg.Health, cfg.Ledger = base.pods, base.health, base.ledger
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, sc) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return serving{Server: s, ring: cfg.Events, addr: l.Addr().String()}
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	return l
}

// getHost sends GET path with the Host header host.
func getHost(t *testing.T, client *http.Client, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// A web page's script can make a browser on the node send requests to the
// agent under the page's own name (DNS rebinding). The agent answers only
// to its own addresses and the names it is given.
func TestServeRefusesRequestsForOtherHosts(t *testing.T) {
	// As if --listen named the agent by a name that resolves to loopback.
	s := serve(t, listenLoopback(t), Config{}, ServeConfig{Address: "agent.example:9440", AllowedHosts: []string{"node1", " Prober.kube-system.svc. "}})
	_, port, _ := net.SplitHostPort(s.addr)
	url := "http://" + s.addr + "/api/v1/pods"
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "localhost.:" + port,
		"node1:" + port, "node1", "prober.kube-system.svc", "agent.example:" + port, "127.0.0.1:8080" /* a tunnel's port */} {
		code, _ := getHost(t, http.DefaultClient, url, host)
		assert.Equal(t, http.StatusOK, code, host)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example", "127.0.0.1.nip.io:" + port, "10.0.0.1:" + port,
		"node1.evil.example"} {
		code, body := getHost(t, http.DefaultClient, url, host)
		assert.Equal(t, http.StatusMisdirectedRequest, code, host)
		assert.Contains(t, body, "--web.allowed-hosts", "what to do")
		assert.NotContains(t, body, strings.Split(host, ":")[0], "nothing the client sent is echoed")
	}
	assert.Equal(t, 6.0, testutil.ToFloat64(s.m.rejected.WithLabelValues(rejectedHost)))
}

func TestHostPolicy(t *testing.T) {
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 9440} }
	for _, tt := range []struct {
		listen  net.Addr
		allowed []string
		yes, no []string
	}{
		{tcp("127.0.0.1"), nil, []string{"127.0.0.1:9440", "localhost:9440", "[::1]:9440", "[::ffff:127.0.0.1]:9440", "", "[0:0:0:0:0:0:0:1]"},
			[]string{"10.0.0.5:9440", "127.0.0.2:9440", "example.com", "localhost:http", "[::1", "a:b:c"}},
		{tcp("10.0.0.5"), nil, []string{"10.0.0.5:9440", "10.0.0.5"}, []string{"localhost:9440", "127.0.0.1:9440", "node1:9440", "10.0.0.6:9440"}},
		{tcp("10.0.0.5"), []string{"node1", "10.0.0.6:1234"}, []string{"node1:9440", "NODE1", "10.0.0.6:9440"}, []string{"node2:9440"}},
		{tcp("0.0.0.0"), nil, []string{"10.0.0.5:9440", "192.168.1.1", "[fe80::1]:9440", "localhost:9440"}, []string{"node1:9440", "example.com"}},
		{tcp("::"), nil, []string{"10.0.0.5:9440", "[2001:db8::1]:9440"}, []string{"node1"}},
		{tcp("10.0.0.5"), []string{"*"}, []string{"evil.example", "anything"}, nil},
		{&net.UnixAddr{Name: "/run/cri-prober/api.sock", Net: "unix"}, nil, []string{"evil.example", "localhost"}, nil},
	} {
		p, err := newHostPolicy(tt.listen, tt.allowed)
		require.NoError(t, err)
		for _, h := range tt.yes {
			assert.True(t, p.allows(h), "listening on %s, allowed %v: %q", tt.listen, tt.allowed, h)
		}
		for _, h := range tt.no {
			assert.False(t, p.allows(h), "listening on %s, allowed %v: %q", tt.listen, tt.allowed, h)
		}
	}
	_, err := newHostPolicy(tcp("127.0.0.1"), []string{"ok", "not/a/host"})
	require.ErrorContains(t, err, `--web.allowed-hosts: "not/a/host" is not a host name`)
}

// A flood of idle connections holds at most the cap of descriptors, and a
// client that comes after it still gets its answer: each new connection
// takes the place of the oldest idle one.
func TestIdleConnectionsCannotKeepClientsOut(t *testing.T) {
	const max = 8
	reg := prometheus.NewRegistry()
	s := serve(t, listenLoopback(t), Config{Registerer: reg, MaxEventStreams: 2}, ServeConfig{MaxConnections: max})
	var idle []net.Conn
	for range 5 * max {
		c, err := net.Dial("tcp", s.addr)
		require.NoError(t, err)
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// Once they are all accepted, all but the cap have been closed.
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.m.dropped.WithLabelValues(droppedIdleAtLimit)) >= 4*max },
		10*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, testutil.ToFloat64(s.m.connections), float64(max))

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		code, body := getHost(t, client, "http://"+s.addr+"/healthz", s.addr)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok\n", body)
	}
	closed := 0
	deadline := time.Now().Add(time.Second) // the others are still open
	for _, c := range idle {
		c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	assert.GreaterOrEqual(t, closed, 4*max, "the flood's connections were closed by the agent")
	assert.LessOrEqual(t, testutil.ToFloat64(s.m.connections), float64(max))

	got, err := testutil.GatherAndCount(reg, "cri_prober_api_connections", "cri_prober_api_rejected_total", "cri_prober_api_dropped_total", "cri_prober_api_event_streams")
	require.NoError(t, err)
	assert.Equal(t, 10, got, "the metrics are registered, every reason from the start")
}

// fakeListener hands out the server ends of pipes.
type fakeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// At the cap with every connection busy, a new connection is closed at
// once, and Accept goes on to the next: it never waits for a slot.
func TestConnectionLimitClosesNewConnectionsWhenAllAreBusy(t *testing.T) {
	f := &fakeListener{conns: make(chan net.Conn, 10), closed: make(chan struct{})}
	m := newMetrics(nil)
	l := newConnLimiter(f, 2, m)
	dial := func() net.Conn {
		client, server := net.Pipe()
		f.conns <- server
		return client
	}
	accept := func() net.Conn {
		c, err := l.Accept()
		require.NoError(t, err)
		return c
	}
	dial()
	busy1 := accept()
	l.connState(busy1, http.StateNew)
	l.connState(busy1, http.StateActive)
	dial()
	idle := accept()
	l.connState(idle, http.StateNew)

	// At the cap: the idle one makes room.
	third := dial()
	busy2 := accept()
	assert.Equal(t, 1.0, testutil.ToFloat64(m.dropped.WithLabelValues(droppedIdleAtLimit)))
	_, err := idle.Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe, "the idle one was closed")
	l.connState(busy2, http.StateActive)

	// Every connection busy: the next is closed at once, and Accept goes
	// on to the one after, which gets the slot freed meanwhile.
	accepted := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		assert.NoError(t, err)
		accepted <- c
	}()
	refused := dial()
	_, err = refused.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "closed at once")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.rejected.WithLabelValues(rejectedConnectionLimit)))
	busy2.Close()
	dial()
	<-accepted
	assert.Equal(t, 2.0, testutil.ToFloat64(m.connections))
	_ = third

	// TLS connections are told apart through their net.Conn.
	l.connState(tls.Server(busy1, &tls.Config{}), http.StateIdle)
	l.mu.Lock()
	assert.True(t, busy1.(*limitedConn).idle)
	l.mu.Unlock()

	require.NoError(t, l.Close())
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "a shutdown never waits for a slot")
}

// watch opens an event stream on a raw connection and reads its
// response's status line and headers (and nothing more).
func watch(t *testing.T, addr string, rcvbuf int) (net.Conn, *http.Response) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "GET /api/v1/events?watch=1 HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 16), nil)
	require.NoError(t, err)
	return c, resp
}

// Streams hold their connections for as long as the clients like: beyond
// the cap a client is told to come back later.
func TestEventStreamsAreCapped(t *testing.T) {
	s := serve(t, listenLoopback(t), Config{MaxEventStreams: 2}, ServeConfig{})
	first, resp := watch(t, s.addr, 0)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, resp = watch(t, s.addr, 0)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, resp = watch(t, s.addr, 0)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.True(t, resp.Close, "the connection is closed with the answer")
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), "--web.max-event-streams")
	assert.Equal(t, 1.0, testutil.ToFloat64(s.m.rejected.WithLabelValues(rejectedStreamLimit)))
	assert.Equal(t, 2.0, testutil.ToFloat64(s.m.streams))

	// A listing is not a stream: it still works.
	code, _ := getHost(t, http.DefaultClient, "http://"+s.addr+"/api/v1/events", s.addr)
	assert.Equal(t, http.StatusOK, code)

	first.Close()
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.m.streams) == 1 }, 10*time.Second, 5*time.Millisecond)
	_, resp = watch(t, s.addr, 0)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a slot freed is a slot")
}

// A stream client that never reads is dropped once the socket's buffers
// are full for the write timeout, instead of holding its goroutine and
// connection for ever.
func TestEventStreamClientThatNeverReadsIsDropped(t *testing.T) {
	s := serve(t, listenLoopback(t), Config{MaxEventStreams: 2, StreamWriteTimeout: 100 * time.Millisecond}, ServeConfig{})
	_, resp := watch(t, s.addr, 4096)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1.0, testutil.ToFloat64(s.m.streams))

	msg := strings.Repeat("x", events.MaxMessage)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			s.ring.Record(events.Event{Time: time.Now(), Reason: "Flood", Message: msg})
		}
	}()
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.m.dropped.WithLabelValues(droppedSlowStream)) == 1 },
		30*time.Second, 10*time.Millisecond, "the stream is dropped")
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.m.streams) == 0 }, 10*time.Second, 5*time.Millisecond, "its slot freed")
}

// The server's read and write timeouts are for requests and responses; a
// stream that is read outlives them.
func TestEventStreamOutlivesTheServerTimeouts(t *testing.T) {
	const timeout = 100 * time.Millisecond
	l := listenLoopback(t)
	base, ring := newServer(healthy)
	base.keepWarm = timeout / 4
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- base.Serve(ctx, l, ServeConfig{ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	c, resp := watch(t, l.Addr().String(), 0)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := bufio.NewReader(resp.Body)
	// Keep-alive comments for ten times the timeouts, then an event.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	for time.Since(start) < 10*timeout {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, []string{": keep-alive\n", "\n"}, line)
	}
	ring.Record(events.Event{Time: time.Now(), Reason: "Late", Message: "still here"})
	for {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "data: ") {
			assert.Contains(t, line, `"reason":"Late"`)
			break
		}
	}
}

func TestServeOnUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.sock")

	// A socket left by an agent that died is taken over.
	stale, err := net.Listen("unix", path)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	l, err := Listen("unix://" + path)
	require.NoError(t, err)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the agent's user alone")

	// A live socket (another agent) and anything but a socket are left alone.
	_, err = Listen("unix://" + path)
	require.ErrorContains(t, err, "another process listens on it")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	_, err = Listen("unix://" + file)
	require.ErrorContains(t, err, "exists and is not a socket")
	require.FileExists(t, file)
	require.NoError(t, os.Symlink(path, filepath.Join(dir, "link")))
	_, err = Listen("unix://" + filepath.Join(dir, "link"))
	require.ErrorContains(t, err, "exists and is not a socket", "a link is not followed")
	_, err = Listen("unix://relative.sock")
	require.ErrorContains(t, err, "absolute path")

	base, _ := newServer(healthy)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- base.Serve(ctx, l, ServeConfig{}) }()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	code, body := getHost(t, client, "http://agent/healthz", "anything")
	assert.Equal(t, http.StatusOK, code, "no Host check: no browser reaches a unix socket")
	assert.Equal(t, "ok\n", body)
	client.CloseIdleConnections()

	cancel()
	require.NoError(t, <-done)
	assert.NoFileExists(t, path, "removed on shutdown")
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cri-prober"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// daveHash is bcrypt("dave123") (from exporter-toolkit's own tests).
const daveHash = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq"

// TLS and basic auth come from the exporters' web configuration file, and
// the limits hold behind TLS.
func TestServeWithWebConfig(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	config := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  dave: %s\n",
		certFile, keyFile, daveHash), 0o600))
	s := serve(t, listenLoopback(t), Config{MaxEventStreams: 1}, ServeConfig{WebConfigFile: config, MaxConnections: 2})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	get := func(user, password, host string) int {
		req, err := http.NewRequest(http.MethodGet, "https://"+s.addr+"/api/v1/pods", nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		req.Host = host
		resp, err := client.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get("", "", s.addr))
	assert.Equal(t, http.StatusUnauthorized, get("dave", "wrong", s.addr))
	assert.Equal(t, http.StatusOK, get("dave", "dave123", s.addr))
	assert.Equal(t, http.StatusMisdirectedRequest, get("dave", "dave123", "evil.example"), "the Host check holds behind TLS")

	resp, err := http.Get("http://" + s.addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "no plain HTTP")

	// Idle TLS connections (handshake not begun) make room, as plain ones.
	var idle []net.Conn
	for range 6 {
		c, err := net.Dial("tcp", s.addr)
		require.NoError(t, err)
		defer c.Close()
		idle = append(idle, c)
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.m.dropped.WithLabelValues(droppedIdleAtLimit)) >= 4 },
		10*time.Second, 5*time.Millisecond)
	assert.Equal(t, http.StatusOK, get("dave", "dave123", s.addr))
	assert.LessOrEqual(t, testutil.ToFloat64(s.m.connections), 2.0)
}

func TestCheckSaysWhatToFix(t *testing.T) {
	s := New(Config{MaxEventStreams: 8})
	require.NoError(t, s.Check(ServeConfig{}))
	assert.ErrorContains(t, s.Check(ServeConfig{MaxConnections: 8}), "--web.max-event-streams (8) must be below --web.max-connections (8)")
	assert.ErrorContains(t, s.Check(ServeConfig{AllowedHosts: []string{"a b"}}), "--web.allowed-hosts")
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n"), 0o600))
	err := s.Check(ServeConfig{WebConfigFile: bad})
	assert.ErrorContains(t, err, "--web.config.file "+bad)
	assert.ErrorContains(t, err, "web-configuration.md")
	assert.Error(t, s.Check(ServeConfig{WebConfigFile: filepath.Join(dir, "missing.yml")}))

	// Serve refuses what Check refuses, and closes the listener.
	l := listenLoopback(t)
	require.Error(t, s.Serve(context.Background(), l, ServeConfig{MaxConnections: 4}))
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
}

// As served: Go's profiles on a unix socket, not on a loopback port
// without a web configuration.
func TestProfilesServedOnlyToVettedClients(t *testing.T) {
	tcp := serve(t, listenLoopback(t), Config{Profiling: true}, ServeConfig{})
	code, _ := getHost(t, http.DefaultClient, "http://"+tcp.addr+"/debug/pprof/", tcp.addr)
	assert.Equal(t, http.StatusNotFound, code, "a loopback port: any local user, any web page")

	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := Listen("unix://" + path)
	require.NoError(t, err)
	serve(t, l, Config{Profiling: true}, ServeConfig{})
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	t.Cleanup(client.CloseIdleConnections)
	code, _ = getHost(t, client, "http://agent/debug/pprof/", "agent")
	assert.Equal(t, http.StatusOK, code, "the unix socket: the agent's user alone")
	code, _ = getHost(t, client, "http://agent/debug/pprof/cmdline", "agent")
	assert.Equal(t, http.StatusNotFound, code)
}

// nodeAddress is an address of this machine that is not loopback, as a
// client of the API on another host would come from; "" if it has none.
func nodeAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// With basic auth (the remote setup), a source whose requests keep
// failing authentication is refused at accept before it costs another
// bcrypt (which exporter-toolkit runs one at a time), and holds at most
// an eighth of the connections; clients on loopback are never limited as
// a source (they are every local client at once). Fails on the old code:
// every request cost a bcrypt, and one source could take every slot.
func TestAFailingSourceIsRefusedBeforeItCostsABcrypt(t *testing.T) {
	node := nodeAddress(t)
	if node == "" {
		t.Skip("no address but loopback: no other source to try")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "basic_auth_users:\n  dave: %s\n", daveHash), 0o600))
	l, err := Listen(net.JoinHostPort(node, "0"))
	require.NoError(t, err)
	s := serve(t, l, Config{}, ServeConfig{WebConfigFile: config, MaxConnections: 64, AllowedHosts: []string{"*"}})
	_, port, _ := net.SplitHostPort(s.addr)
	get := func(from, password string) (int, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(node, port)+"/healthz", nil)
		require.NoError(t, err)
		req.SetBasicAuth("dave", password)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	for range maxFailures {
		code, err := get(node, "wrong")
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, code)
	}
	_, err = get(node, "wrong")
	assert.Error(t, err, "refused at accept: no request read, no bcrypt")
	_, err = get(node, "dave123")
	assert.Error(t, err, "the source is refused whatever it sends, for a while")
	assert.Positive(t, testutil.ToFloat64(s.m.rejected.WithLabelValues(rejectedAuthFailures)))

	// From loopback (this machine's other clients), served as ever.
	lo := serve(t, listenLoopback(t), Config{}, ServeConfig{WebConfigFile: config})
	client := &http.Client{Timeout: 10 * time.Second}
	for range 2 * maxFailures {
		req, _ := http.NewRequest(http.MethodGet, "http://"+lo.addr+"/healthz", nil)
		req.SetBasicAuth("dave", "wrong")
		resp, err := client.Do(req)
		require.NoError(t, err, "loopback is never blocked as a source")
		resp.Body.Close()
	}

	// One source holds at most an eighth of the connections.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	other := serve(t, mustListen(t, net.JoinHostPort(node, "0")), Config{}, ServeConfig{MaxConnections: 64, AllowedHosts: []string{"*"}})
	for range 32 {
		c, err := net.Dial("tcp", other.addr)
		require.NoError(t, err)
		held = append(held, c)
		// Busy: a request begun, never finished.
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
	}
	// Each new one beyond the source's share is closed at once, or makes
	// room by closing the source's own oldest idle one (a connection whose
	// request the server had not begun to read yet).
	closed := func() float64 {
		return testutil.ToFloat64(other.m.rejected.WithLabelValues(rejectedSourceLimit)) + testutil.ToFloat64(other.m.dropped.WithLabelValues(droppedIdleAtLimit))
	}
	if !assert.Eventually(t, func() bool { return closed() >= 32-float64(perSource(64)) }, 10*time.Second, 5*time.Millisecond,
		"beyond %d connections, one source's are closed", perSource(64)) {
		t.Logf("open %v, refused %v, closed idle %v", testutil.ToFloat64(other.m.connections),
			testutil.ToFloat64(other.m.rejected.WithLabelValues(rejectedSourceLimit)), testutil.ToFloat64(other.m.dropped.WithLabelValues(droppedIdleAtLimit)))
	}
	assert.LessOrEqual(t, testutil.ToFloat64(other.m.connections), float64(perSource(64)), "of the 64 slots, the source holds its share")
}

func mustListen(t *testing.T, address string) net.Listener {
	t.Helper()
	l, err := Listen(address)
	require.NoError(t, err)
	return l
}
