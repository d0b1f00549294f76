package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/exporter-toolkit/web"
	"k8s.io/klog/v2"
)

// The API's limits. A node agent's API has few clients (a Prometheus or
// two, a person running `cri-prober status` or `events -f`); the limits
// keep what anyone else can make it hold (descriptors, goroutines,
// buffers) far below what the probes need.
const (
	// DefaultMaxConnections caps the connections served at once. At the
	// cap a new connection takes the place of the oldest idle one (a
	// connection that has sent no request yet, or none since its last):
	// a flood of idle connections cannot keep a new client out, and holds
	// no more than this many descriptors. Only when every connection is
	// busy is a new one closed at once.
	DefaultMaxConnections = 128
	// DefaultMaxEventStreams caps the event streams: a stream holds its
	// connection as long as the client likes, so they must stay fewer
	// than the connections.
	DefaultMaxEventStreams = 32
	// DefaultStreamWriteTimeout bounds each write to an event stream.
	DefaultStreamWriteTimeout = 10 * time.Second
	// DefaultReadHeaderTimeout closes a connection that has not sent a
	// request's headers within it (a new one, or an idle one that began
	// a request).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request (every route is
	// a GET without a body).
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a response (not a stream's: see
	// DefaultStreamWriteTimeout): /metrics of a large node included.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection idle for longer:
	// above a 1m scrape interval, so a scraper's connection is reused.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers.
	DefaultMaxHeaderBytes = 16 << 10

	// streamRetryAfterSeconds is the Retry-After of a stream refused at
	// the cap.
	streamRetryAfterSeconds = 5
	// shutdownGrace is how long requests may finish once the agent stops.
	shutdownGrace = 5 * time.Second
	// unixScheme marks a unix socket in a listen address.
	unixScheme = "unix://"
	// socketMode is a unix socket's: its owner's (the agent's user) only.
	socketMode = 0o600
)

// ServeConfig says how the API is served. Zero fields take the defaults.
type ServeConfig struct {
	// Address is the listen address as given (--listen): when its host is
	// a name (node1.example:9440), Host headers may carry that name too.
	Address string
	// AllowedHosts are the names (or addresses) a request's Host header
	// may carry besides the listen address's own: say a node name or a
	// Service name that Prometheus scrapes. "*" allows any. Ports are not
	// compared: a DNS rebinding attack changes the name, not the port, and
	// a tunnel or port-forward changes the port, not the name.
	AllowedHosts []string
	// WebConfigFile is a Prometheus exporter web configuration (TLS,
	// basic auth, headers; prometheus/exporter-toolkit's format), read
	// again at every connection and request; "": plain HTTP.
	WebConfigFile string
	// MaxConnections caps the connections served at once (0:
	// DefaultMaxConnections).
	MaxConnections int

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

func (c ServeConfig) withDefaults() ServeConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return c
}

// Check says what is wrong with serving s as c, in the flags' words: run
// calls it before listening, so that a mistake stops the agent at once.
func (s *Server) Check(c ServeConfig) error { return CheckServe(c, cap(s.streams)) }

// CheckServe checks how the API is to be served, with maxEventStreams
// event streams at once (Config.MaxEventStreams, its default if 0),
// before anything is started.
func CheckServe(c ServeConfig, maxEventStreams int) error {
	c = c.withDefaults()
	if maxEventStreams <= 0 {
		maxEventStreams = DefaultMaxEventStreams
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("--web.max-connections %d: want a positive number", c.MaxConnections)
	}
	if maxEventStreams >= c.MaxConnections {
		return fmt.Errorf("--web.max-event-streams (%d) must be below --web.max-connections (%d): streams hold their connections, and would leave none for /healthz and /metrics",
			maxEventStreams, c.MaxConnections)
	}
	if _, err := allowedHosts(c.AllowedHosts); err != nil {
		return err
	}
	if c.WebConfigFile != "" {
		if err := web.Validate(c.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s: %w (the format: https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)", c.WebConfigFile, err)
		}
	}
	return nil
}

// Listen listens on address: host:port for TCP, or unix:///path for a
// unix socket, made 0600 (the agent's user alone can connect). A stale
// socket at the path (its agent gone) is removed first; anything else
// there is left alone, and an error says so. The socket is removed when
// the listener is closed. Call it at start-up, before anything else makes
// files: it sets the process's umask for the instant of bind(2).
func Listen(address string) (net.Listener, error) {
	if err := CheckAddress(address); err != nil {
		return nil, err
	}
	path, ok := strings.CutPrefix(address, unixScheme)
	if !ok {
		return net.Listen("tcp", address)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	// bind(2) makes the socket with the mode the umask leaves: set it
	// before, so that no one can connect between bind and a chmod (as
	// Docker does for its socket). The umask is the process's: a file
	// made meanwhile elsewhere would come out stricter, never looser.
	old := syscall.Umask(0o777 &^ socketMode)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, socketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("make %s %#o: %w", path, socketMode, err)
	}
	return l, nil
}

// CheckAddress says what is wrong with a listen address, without binding
// it: host:port, or unix:// and an absolute path.
func CheckAddress(address string) error {
	path, ok := strings.CutPrefix(address, unixScheme)
	if ok {
		if !filepath.IsAbs(path) {
			return fmt.Errorf("%q: want unix:// and an absolute path, as unix:///run/cri-prober/api.sock", address)
		}
		return nil
	}
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%q: want host:port (an IPv6 address in brackets, [::1]:9440) or unix:///path: %w", address, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: port %q: %w", address, port, err)
	}
	return nil
}

// removeStaleSocket removes the socket at path if no one listens on it. It
// never removes anything but a socket (nor follows a link).
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (%s): remove it, or choose another path for --listen", path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s: another process listens on it (another cri-prober?): stop it, or choose another path for --listen", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the stale socket %s: %w", path, err)
	}
	return nil
}

// Serve serves the API on l until ctx ends, then lets requests finish
// for a few seconds (event streams end at once) and closes l.
//
// It applies c: the timeouts, the connection cap, the Host check (not on
// a unix socket, which no browser reaches), and the web configuration file
// through prometheus/exporter-toolkit (TLS, basic auth), as every
// Prometheus exporter does.
func (s *Server) Serve(ctx context.Context, l net.Listener, c ServeConfig) error {
	logger := klog.FromContext(ctx).WithName("api")
	if err := s.Check(c); err != nil {
		l.Close()
		return err
	}
	c = c.withDefaults()
	allowed := c.AllowedHosts
	if host, _, err := net.SplitHostPort(c.Address); err == nil {
		if _, ok := canonicalHost(host); ok {
			allowed = append(slices.Clip(allowed), host)
		}
	}
	hosts, err := newHostPolicy(l.Addr(), allowed)
	if err != nil {
		l.Close()
		return err
	}
	limited := newConnLimiter(l, c.MaxConnections, s.m)
	server := &http.Server{
		Handler:           s.servingHandler(hosts, logger, c.WebConfigFile),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ConnState:         limited.connState,
		ConnContext:       connContext,
		ErrorLog:          log.New(errorLog{logger}, "", 0),
		// Requests end with the agent: an event stream would otherwise
		// hold the shutdown until its grace runs out.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	configFile := c.WebConfigFile
	noSystemd := false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: &noSystemd, WebConfigFile: &configFile}
	served := make(chan error, 1)
	go func() { served <- web.Serve(limited, server, flags, slog.New(logr.ToSlogHandler(logger))) }()
	select {
	case err := <-served: // it could not start (a bad web configuration)
		limited.Close()
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil {
		server.Close() //nolint:errcheck // the grace is over: cut what remains
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// errorLog takes net/http's own messages to klog. A failed TLS handshake
// is the client's problem, and logged by default it would let anyone fill
// the log: it is logged at -v=2.
type errorLog struct{ logger klog.Logger }

func (e errorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		e.logger.V(2).Info(msg)
	} else {
		e.logger.Info(msg)
	}
	return len(p), nil
}

// hostRefused is the body of a request refused for its Host header. It
// does not repeat the header: nothing a client sent is echoed.
const hostRefused = "cri-prober: this request's Host header names none of this agent's addresses, so it is refused " +
	"(a web page could otherwise read the API through DNS rebinding). To reach the agent by that name, " +
	"add it to the agent's --web.allowed-hosts.\n"

// servingHandler is the API as served: the routes behind the Host check;
// webConfigFile is the web configuration ("": none).
func (s *Server) servingHandler(hosts hostPolicy, logger klog.Logger, webConfigFile string) http.Handler {
	routes := s.routes(webConfigFile)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reach(r)
		if hosts.any || hosts.allows(r.Host) {
			routes.ServeHTTP(w, r)
			return
		}
		s.m.rejected.WithLabelValues(rejectedHost).Inc()
		logger.V(2).Info("Refused a request for another host; allow the name with --web.allowed-hosts if it is this agent's", "host", r.Host, "remote", r.RemoteAddr)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusMisdirectedRequest)
		io.WriteString(w, hostRefused) //nolint:errcheck // the client went away
	})
}

// hostPolicy says which Host headers name this agent. DNS rebinding makes
// a browser send a request to the agent with the attacker's name in Host;
// an IP address in Host cannot be the attacker's, nor can localhost.
type hostPolicy struct {
	any   bool            // "*", or a unix socket
	anyIP bool            // listening on every address: any of them
	names map[string]bool // canonical (canonicalHost)
}

// newHostPolicy allows the listen address (with localhost and both
// loopback addresses when it is a loopback one) and the allowed names.
func newHostPolicy(addr net.Addr, allowed []string) (hostPolicy, error) {
	names, err := allowedHosts(allowed)
	if err != nil {
		return hostPolicy{}, err
	}
	p := hostPolicy{names: names}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || names["*"] { // a unix socket: no browser gets there
		p.any = true
		return p, nil
	}
	ip, _ := netip.AddrFromSlice(tcp.IP)
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified():
		p.anyIP = true
		p.names["localhost"] = true
	case ip.IsLoopback():
		for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
			p.names[n] = true
		}
	}
	p.names[ip.WithZone("").String()] = true
	return p, nil
}

// allowedHosts parses --web.allowed-hosts.
func allowedHosts(list []string) (map[string]bool, error) {
	names := map[string]bool{}
	for _, h := range list {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if h == "*" {
			names["*"] = true
			continue
		}
		name, ok := canonicalHost(h)
		if !ok {
			return nil, fmt.Errorf("--web.allowed-hosts: %q is not a host name or address (want a comma-separated list such as node1,cri-prober.kube-system.svc, or *)", h)
		}
		names[name] = true
	}
	return names, nil
}

// allows says whether a request's Host header names this agent. A request
// without one (HTTP/1.0) is allowed: browsers always send it.
func (p hostPolicy) allows(host string) bool {
	if p.any || host == "" {
		return true
	}
	name, ok := canonicalHost(host)
	if !ok {
		return false
	}
	if p.names[name] {
		return true
	}
	if p.anyIP {
		_, err := netip.ParseAddr(name)
		return err == nil
	}
	return false
}

// canonicalHost is a Host header's name, without the port, brackets,
// letter case and the root's trailing dot; an address in its shortest form
// (::ffff:127.0.0.1 is 127.0.0.1). ok is false for what is not a name.
func canonicalHost(host string) (name string, ok bool) {
	name = host
	if h, port, err := net.SplitHostPort(host); err == nil {
		if strings.Trim(port, "0123456789") != "" {
			return "", false
		}
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if ip, err := netip.ParseAddr(name); err == nil {
		return ip.Unmap().WithZone("").String(), true
	}
	if name == "" || strings.ContainsAny(name, "/@[]:%\\ ") {
		return "", false
	}
	return name, true
}

// connLimiter caps the connections l hands out. At the cap a new
// connection takes the slot of the oldest idle one; with none idle it is
// closed at once (accept never waits).
//
// It also keeps one client from taking what the others need (security
// review, finding 4): a source address holds at most maxPerSource
// connections (the same rule among its own: its oldest idle one makes
// room), and a source whose requests keep failing before they reach the
// API (basic auth refused by the web configuration: each costs a bcrypt,
// which exporter-toolkit runs one at a time) is refused at accept for a
// while, before it costs another.
type connLimiter struct {
	net.Listener
	max, maxPerSource int
	m                 *metrics
	now               func() time.Time

	mu      sync.Mutex
	open    map[*limitedConn]struct{}
	sources map[string]*source
	seq     uint64 // orders idle connections, oldest first
}

// source is what the limiter keeps of one remote address.
type source struct {
	open         int
	failures     []time.Time // requests that did not reach the API, within failureWindow
	blockedUntil time.Time
}

// A source whose maxFailures requests in failureWindow did not reach the
// API is refused for blockFor.
const (
	maxFailures   = 10
	failureWindow = 10 * time.Second
	blockFor      = 30 * time.Second
)

// perSource is the connections one source may hold: an eighth of the
// cap, at least 4.
func perSource(limit int) int { return max(4, limit/8) }

func newConnLimiter(l net.Listener, max int, m *metrics) *connLimiter {
	return &connLimiter{Listener: l, max: max, maxPerSource: perSource(max), m: m, now: time.Now,
		open: map[*limitedConn]struct{}{}, sources: map[string]*source{}}
}

// limitedConn is a connection holding a slot until it is closed.
type limitedConn struct {
	net.Conn
	l       *connLimiter
	source  string // its remote address; "" on a unix socket (the agent's user)
	release sync.Once
	// reached: its request in progress reached the API (reach); answered:
	// something was written back for it (an answer, if it did not reach
	// the API: the web configuration's 401).
	reached, answered atomic.Bool
	// Guarded by l.mu.
	idle      bool
	idleSince uint64
	active    bool
}

// Write counts a request answered without reaching the API (the web
// configuration's 401) against its source before the answer leaves, so
// that the source's next connection already meets the count.
func (c *limitedConn) Write(b []byte) (int, error) {
	if !c.answered.Swap(true) && !c.reached.Load() {
		c.l.mu.Lock()
		if c.active {
			c.l.failedLocked(c.source)
		}
		c.l.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release.Do(func() {
		c.l.mu.Lock()
		c.l.forgetLocked(c)
		c.l.m.connections.Set(float64(len(c.l.open)))
		c.l.mu.Unlock()
	})
	return err
}

// sourceOf is a connection's remote address without its port, or "" for
// one that is not limited as a source: a unix socket (the agent's user
// alone), and loopback, where every local client (Prometheus, a load
// balancer's check, the CLI, any user) is the same address: limiting or
// blocking it would let one local user shut the others out.
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		return a.IP.String()
	}
	return ""
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &limitedConn{Conn: conn, l: l, source: sourceOf(conn)}
		l.mu.Lock()
		now := l.now()
		src := l.sourceLocked(c.source)
		var evict *limitedConn
		var refused string
		switch {
		case src != nil && now.Before(src.blockedUntil):
			refused = rejectedAuthFailures
		case src != nil && src.open >= l.maxPerSource:
			if evict = l.oldestIdleLocked(c.source); evict == nil {
				refused = rejectedSourceLimit
			}
		case len(l.open) >= l.max:
			if evict = l.oldestIdleLocked(""); evict == nil {
				refused = rejectedConnectionLimit
			}
		}
		if refused != "" {
			l.mu.Unlock()
			// Counted before the close: whoever sees it closed sees it counted.
			l.m.rejected.WithLabelValues(refused).Inc()
			conn.Close()
			continue
		}
		if evict != nil {
			l.forgetLocked(evict) // its slot is c's from now
		}
		l.seq++
		c.idle, c.idleSince = true, l.seq // http.Server's StateNew
		l.open[c] = struct{}{}
		if src != nil {
			src.open++
		}
		l.m.connections.Set(float64(len(l.open)))
		l.mu.Unlock()
		if evict != nil {
			l.m.dropped.WithLabelValues(droppedIdleAtLimit).Inc()
			evict.Close()
		}
		return c, nil
	}
}

// sourceLocked is the record of the source at addr (nil on a unix
// socket), made when missing; the records of sources with nothing left
// to remember are dropped now and then.
func (l *connLimiter) sourceLocked(addr string) *source {
	if addr == "" {
		return nil
	}
	if s, ok := l.sources[addr]; ok {
		return s
	}
	if len(l.sources) > 4*l.max {
		now := l.now()
		for a, s := range l.sources {
			if s.open == 0 && now.After(s.blockedUntil) && (len(s.failures) == 0 || now.Sub(s.failures[len(s.failures)-1]) > failureWindow) {
				delete(l.sources, a)
			}
		}
	}
	s := &source{}
	l.sources[addr] = s
	return s
}

// forgetLocked drops c from the open connections (it is closed, or
// being closed): once, whoever comes first.
func (l *connLimiter) forgetLocked(c *limitedConn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if s := l.sources[c.source]; s != nil {
		s.open--
	}
}

// oldestIdleLocked is the oldest idle connection (of the source at addr,
// if not "").
func (l *connLimiter) oldestIdleLocked(addr string) *limitedConn {
	var oldest *limitedConn
	for c := range l.open {
		if c.idle && (addr == "" || c.source == addr) && (oldest == nil || c.idleSince < oldest.idleSince) {
			oldest = c
		}
	}
	return oldest
}

// failedLocked counts a request of the source at addr that did not reach
// the API, and blocks the source at maxFailures within failureWindow.
func (l *connLimiter) failedLocked(addr string) {
	s := l.sources[addr]
	if s == nil || addr == "" {
		return
	}
	now := l.now()
	kept := s.failures[:0]
	for _, t := range s.failures {
		if now.Sub(t) <= failureWindow {
			kept = append(kept, t)
		}
	}
	s.failures = append(kept, now)
	if len(s.failures) >= maxFailures {
		s.blockedUntil, s.failures = now.Add(blockFor), nil
	}
}

// reach marks the connection of r's request as having reached the API:
// whatever stands before it (the web configuration's authentication)
// let it through.
func reach(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		c.reached.Store(true)
	}
}

// connKey is the context key of a request's limitedConn (ConnContext).
type connKey struct{}

// connContext is http.Server's ConnContext: it gives each request its
// connection, for reach.
func connContext(ctx context.Context, conn net.Conn) context.Context {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = tc.NetConn()
	}
	if c, ok := conn.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// connState is http.Server's ConnState: it marks connections idle (new, or
// between requests) or busy, and counts a request that ended without
// reaching the API against its source.
func (l *connLimiter) connState(conn net.Conn, state http.ConnState) {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = tc.NetConn()
	}
	c, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle, http.StateClosed:
		// A request answered without reaching the API was refused before
		// it (authentication) and counted as its answer left (Write); one
		// cut short (the client gone, a timeout, room made for another) is
		// no failure of the source's.
		c.active = false
		if state != http.StateClosed {
			l.seq++
			c.idle, c.idleSince = true, l.seq
		}
	case http.StateActive:
		c.idle, c.active = false, true
		c.reached.Store(false)
		c.answered.Store(false)
	case http.StateHijacked:
		c.idle, c.active = false, false
	}
}
