package api

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// deadlineRecorder is a ResponseRecorder that takes the deadlines an event
// stream sets (as the server's own ResponseWriter does).
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error  { return nil }
func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }

// FuzzAPIPaths sends any request target with any Host header through the
// API as served on 127.0.0.1:9440 (routes behind the Host check). Nothing
// panics; every answer is one of the API's; a Host that is not this
// agent's is refused; and nothing a client sent comes back unescaped:
// not-found answers are fixed texts, no body carries raw markup but the
// status page's own (whose every value is escaped), and a redirect stays on
// this host.
func FuzzAPIPaths(f *testing.F) {
	for _, seed := range [][2]string{
		{"/api/v1/pods/shop/web/restarts", "127.0.0.1:9440"},
		{"/api/v1/pods/shop/web/history", "localhost:9440"},
		{"/api/v1/pods/shop/web/ready", "[::1]:9440"},
		{"/api/v1/pods/shop/web", "127.0.0.1"},
		{"/api/v1/pods", "LOCALHOST."},
		{"/healthz", "evil.example:9440"},
		{"/ready", "127.0.0.1:9440"},
		{"/api/v1/events?since=2026-11-21T09:00:00Z", "127.0.0.1:9440"},
		{"/api/v1/events?watch=1", "127.0.0.1:9440"},
		{"/api/v1/events?since=%3Cscript%3E", "127.0.0.1:9440"},
		{"/api/v1/pods/shop%2Fweb/x/restarts", "127.0.0.1:9440"},
		{"/api/v1/pods/shop/web%2F..%2F..%2Fready", "127.0.0.1:9440"},
		{"/api/v1/pods/../../etc/passwd", "127.0.0.1:9440"},
		{"/api/v1/pods/shop/%2e%2e/ready", "127.0.0.1:9440"},
		{"//evil.example/api/v1/pods", "127.0.0.1:9440"},
		{"/api/v1/pods/<script>alert(1)</script>/web/restarts", "127.0.0.1:9440"},
		{"/api/v1/pods/%3Cb%3E/%22x%22/restarts", "127.0.0.1:9440"},
		{"/api/v1/pods/%00/%ff/ready", "127.0.0.1:9440"},
		{"/nope/<img src=x>", "127.0.0.1:9440"},
		{"/api/v1/pods/a/b/c/d", "127.0.0.1:9440"},
		{"/%zz", "127.0.0.1:9440"},
		{"*", "127.0.0.1:9440"},
		{"http://evil.example/healthz", "127.0.0.1:9440"},
		{"/healthz", "127.0.0.1.nip.io:9440"},
		{"/healthz", "[::ffff:127.0.0.1]:9440"},
		{"/healthz", "localhost:9440@evil.example"},
		{"/healthz", ""},
		{"/", "127.0.0.1:9440"},
		{"/?namespace=%3Cscript%3Ealert(1)%3C/script%3E&page=2", "127.0.0.1:9440"},
		{"/?namespace=%22%3E%3Cimg%20src=x%3E&page=-1", "localhost:9440"},
		{"/ui/status.js", "127.0.0.1:9440"},
		{"/ui/../api/v1/pods", "127.0.0.1:9440"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, _ := newServer(healthy)
	hosts, err := newHostPolicy(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9440}, nil)
	if err != nil {
		f.Fatal(err)
	}
	h := s.servingHandler(hosts, logr.Discard(), "")
	ended, cancel := context.WithCancel(context.Background())
	cancel() // an event stream sends what it has, then ends

	f.Fuzz(func(t *testing.T, target, host string) {
		raw := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http answers 400 before the API sees it
		}
		rec := deadlineRecorder{httptest.NewRecorder()}
		h.ServeHTTP(rec, req.WithContext(ended))
		code, body := rec.Code, rec.Body.String()

		switch code {
		case http.StatusOK, http.StatusBadRequest, http.StatusServiceUnavailable, http.StatusMethodNotAllowed:
		case http.StatusNotFound:
			if body != "404 page not found\n" && body != "{\n  \"error\": \"pod not found\"\n}\n" {
				t.Errorf("%q: not found, with a body of its own: %q", target, body)
			}
		case http.StatusMisdirectedRequest:
			if body != hostRefused {
				t.Errorf("%q: refused with %q", req.Host, body)
			}
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			loc := rec.Header().Get("Location")
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
				t.Errorf("%q: redirected off this host, to %q", target, loc)
			}
			href, _ := strings.CutPrefix(body, `<a href="`)
			href, _, _ = strings.Cut(href, `">`)
			if strings.ContainsAny(href, `<>"`) {
				t.Errorf("%q: redirect body with raw markup: %q", target, body)
			}
			body = ""
		default:
			t.Errorf("%q (Host %q): unexpected status %d: %q", target, req.Host, code, body)
		}
		switch ct := rec.Header().Get("Content-Type"); {
		case code == http.StatusOK && ct == "text/html; charset=utf-8":
			checkStatusPage(t, req, rec.Result().Header, body)
		case code == http.StatusOK && static[path.Base(req.URL.Path)].contentType == ct:
			if body != string(static[path.Base(req.URL.Path)].body) {
				t.Errorf("%q: %s is not the file's own", target, ct)
			}
		case strings.ContainsAny(body, "<>"):
			t.Errorf("%q: %d with raw markup in its body: %q", target, code, body)
		}

		// Only this agent's names get past the Host check.
		if code != http.StatusMisdirectedRequest && req.Host != "" {
			name := hostName(req.Host)
			ip, err := netip.ParseAddr(name)
			if name != "localhost" && (err != nil || !ip.Unmap().IsLoopback()) {
				t.Errorf("Host %q (%q) was let through: %d", req.Host, name, code)
			}
		}
		if code == http.StatusMisdirectedRequest && (req.Host == "localhost:9440" || req.Host == "127.0.0.1:9440") {
			t.Errorf("Host %q refused", req.Host)
		}
	})
}

// checkStatusPage checks a status page served to req: under its CSP, and
// with no markup but the template's own (checkMarkup).
func checkStatusPage(t *testing.T, req *http.Request, h http.Header, body string) {
	t.Helper()
	if h.Get("Content-Security-Policy") != pageCSP || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%q: the page without its security headers: %v", req.RequestURI, h)
	}
	checkMarkup(t, body)
}

// hostName is the name in a Host header, found another way than
// canonicalHost's, for FuzzAPIPaths to check it against.
func hostName(host string) string {
	host = strings.ToLower(host)
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	digits := func(s string) bool { return strings.Trim(s, "0123456789") == "" }
	if rest, ok := strings.CutPrefix(host, "["); ok {
		name, port, ok := strings.Cut(rest, "]")
		if !ok || (port != "" && (port[0] != ':' || !digits(port[1:]))) {
			return host
		}
		return name
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && digits(host[i+1:]) {
		host = host[:i]
	}
	return strings.TrimSuffix(host, ".")
}
