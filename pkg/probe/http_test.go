package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testUA = "kube-probe/1.36"

// target splits a test server's URL into what NewRequest takes.
func target(t *testing.T, serverURL string) (host string, port int) {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	port, err = strconv.Atoi(u.Port())
	require.NoError(t, err)
	return u.Hostname(), port
}

func probeHTTP(t *testing.T, scheme, serverURL, path string, headers http.Header, timeout time.Duration) (Result, string, error) {
	t.Helper()
	host, port := target(t, serverURL)
	req, err := NewRequest(scheme, host, port, path, headers, testUA)
	require.NoError(t, err)
	return split(NewHTTPGet(NewDialer()).Probe(context.Background(), req, timeout, nil))
}

// recorder is a handler that remembers the last request it saw.
type recorder struct {
	mu     sync.Mutex
	header http.Header
	host   string
	uri    string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.header, rec.host, rec.uri = r.Header.Clone(), r.Host, r.RequestURI
	rec.mu.Unlock()
	w.Write([]byte("ok"))
}

func TestHTTPRequestHeaders(t *testing.T) {
	tests := []struct {
		name       string
		headers    http.Header
		wantHeader http.Header
		wantHost   string // "" means the dialled address
	}{
		{
			name:       "defaults: exactly Accept, Connection and kubelet's User-Agent",
			wantHeader: http.Header{"Accept": {"*/*"}, "Connection": {"close"}, "User-Agent": {testUA}},
		},
		{
			name:       "custom User-Agent and Accept",
			headers:    http.Header{"User-Agent": {"my-agent"}, "Accept": {"text/html"}},
			wantHeader: http.Header{"Accept": {"text/html"}, "Connection": {"close"}, "User-Agent": {"my-agent"}},
		},
		{
			name:       "empty User-Agent and Accept are not sent",
			headers:    http.Header{"User-Agent": {""}, "Accept": {""}},
			wantHeader: http.Header{"Connection": {"close"}},
		},
		{
			name:       "Accept-Encoding passes through",
			headers:    http.Header{"Accept-Encoding": {"gzip"}},
			wantHeader: http.Header{"Accept": {"*/*"}, "Accept-Encoding": {"gzip"}, "Connection": {"close"}, "User-Agent": {testUA}},
		},
		{
			name:       "repeated header values",
			headers:    http.Header{"X-Muffins": {"chocolate", "blueberry"}},
			wantHeader: http.Header{"Accept": {"*/*"}, "Connection": {"close"}, "User-Agent": {testUA}, "X-Muffins": {"chocolate", "blueberry"}},
		},
		{
			name:       "Host header sets the virtual host",
			headers:    http.Header{"Host": {"example.com"}},
			wantHeader: http.Header{"Accept": {"*/*"}, "Connection": {"close"}, "User-Agent": {testUA}},
			wantHost:   "example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			result, out, err := probeHTTP(t, "http", srv.URL, "/", tt.headers, time.Second)
			require.NoError(t, err)
			assert.Equal(t, Success, result)
			assert.Equal(t, "ok", out)
			assert.Equal(t, tt.wantHeader, rec.header)
			if tt.wantHost != "" {
				assert.Equal(t, tt.wantHost, rec.host)
			} else {
				assert.Equal(t, strings.TrimPrefix(srv.URL, "http://"), rec.host)
			}
		})
	}
}

func TestHTTPPathAndQuery(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	_, _, err := probeHTTP(t, "http", srv.URL, "/healthz?verbose=1&x=%2F", nil, time.Second)
	require.NoError(t, err)
	assert.Equal(t, "/healthz?verbose=1&x=%2F", rec.uri)
}

func TestHTTPStatusCodes(t *testing.T) {
	tests := []struct {
		code       int
		wantResult Result
		wantOutput string
	}{
		{200, Success, "body"},
		{204, Success, "body"},
		{299, Success, "body"},
		{300, Warning, "Probe terminated redirects, Response body: body"},
		{399, Warning, "Probe terminated redirects, Response body: body"},
		{400, Failure, "HTTP probe failed with statuscode: 400"},
		{404, Failure, "HTTP probe failed with statuscode: 404"},
		{500, Failure, "HTTP probe failed with statuscode: 500"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.code)
				if tt.code != 204 {
					w.Write([]byte("body"))
				}
			}))
			defer srv.Close()
			result, out, err := probeHTTP(t, "http", srv.URL, "/", nil, time.Second)
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, result)
			if tt.code != 204 {
				assert.Equal(t, tt.wantOutput, out)
			}
		})
	}
}

func TestHTTPTimeoutIsAFailure(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	result, out, err := probeHTTP(t, "http", srv.URL, "/", nil, 100*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, Failure, result)
	assert.Contains(t, out, "Client.Timeout exceeded while awaiting headers")
}

func TestHTTPRefusedIsAFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	result, out, err := probeHTTP(t, "http", srv.URL, "/", nil, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Failure, result)
	assert.Contains(t, out, "connection refused")
}

func TestHTTPRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("other port"))
	}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, r.URL.Query().Get("loc"), code)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "fail", http.StatusInternalServerError) })
	mux.HandleFunc("/no-location", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPermanentRedirect)
		w.Write([]byte("moved"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, otherPort := target(t, other.URL)

	type row struct {
		name       string
		path       string
		wantResult Result
		wantOutput string
	}
	var tests []row
	for _, code := range []int{301, 302, 307, 308} {
		tests = append(tests,
			row{fmt.Sprintf("%d to local success", code), fmt.Sprintf("/redirect?code=%d&loc=%%2Fok", code), Success, "ok"},
			row{fmt.Sprintf("%d to local failure", code), fmt.Sprintf("/redirect?code=%d&loc=%%2Ffail", code), Failure, "HTTP probe failed with statuscode: 500"},
		)
	}
	tests = append(tests,
		row{"same host, other port: followed", "/redirect?code=302&loc=" + url.QueryEscape(fmt.Sprintf("http://127.0.0.1:%d/", otherPort)), Success, "other port"},
		row{"other host: not followed, warning", "/redirect?code=302&loc=" + url.QueryEscape("http://0.0.0.0/"), Warning, "Probe terminated redirects, Response body: <a href=\"http://0.0.0.0/\">Found</a>."},
		row{"final 308 without Location", "/no-location", Warning, "Probe terminated redirects, Response body: moved"},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			result, out, err := probeHTTP(t, "http", srv.URL, tt.path, nil, time.Second)
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, result)
			assert.True(t, strings.HasPrefix(out, tt.wantOutput), "output %q", out)
		})
	}

	t.Run("redirect loop", func(t *testing.T) {
		result, out, err := probeHTTP(t, "http", srv.URL, "/loop", nil, time.Second)
		require.NoError(t, err)
		assert.Equal(t, Failure, result)
		assert.Contains(t, out, "stopped after 10 redirects")
	})
}

func TestHTTPHostHeaderPreservedAfterRedirect(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/end", http.StatusFound)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	result, _, err := probeHTTP(t, "http", srv.URL, "/start", http.Header{"Host": {"vhost.example"}}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Success, result)
	assert.Equal(t, []string{"vhost.example", "vhost.example"}, hosts)
}

func TestHTTPBodyTruncated(t *testing.T) {
	for _, size := range []int{MaxBody - 1, MaxBody, MaxBody + 1, 10 * MaxBody} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := strings.Repeat("x", size)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
			defer srv.Close()
			result, out, err := probeHTTP(t, "http", srv.URL, "/", nil, time.Second)
			require.NoError(t, err)
			assert.Equal(t, Success, result)
			assert.Equal(t, body[:min(size, MaxBody)], out)
		})
	}
}

func TestHTTPIgnoresProxyEnvironment(t *testing.T) {
	proxied := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { proxied = true }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	result, _, err := probeHTTP(t, "http", srv.URL, "/", nil, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Success, result)
	assert.False(t, proxied)
}

func TestHTTPSWithoutVerification(t *testing.T) {
	srv := httptest.NewTLSServer(&recorder{})
	defer srv.Close()
	result, out, err := probeHTTP(t, "https", srv.URL, "/", nil, time.Second)
	require.NoError(t, err)
	assert.Equal(t, Success, result, out)
}

// HTTPS negotiates HTTP/2 when the server offers it, as kubelet's
// transport (SetTransportDefaults) does; plain HTTP stays HTTP/1.1. Either
// way the User-Agent is kubelet's, and nothing stays open.
func TestHTTPSNegotiatesHTTP2(t *testing.T) {
	type seen struct {
		proto     int
		userAgent string
	}
	saw := make(chan seen, 10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw <- seen{r.ProtoMajor, r.UserAgent()}
		w.Write([]byte("ok"))
	})
	tlsSrv := httptest.NewUnstartedServer(handler)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plainSrv := httptest.NewUnstartedServer(handler)
	plainSrv.EnableHTTP2 = true // offered, but plain HTTP does not negotiate it
	plainSrv.Start()
	defer plainSrv.Close()

	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	for _, tt := range []struct {
		scheme, url string
		wantProto   int
	}{{"https", tlsSrv.URL, 2}, {"http", plainSrv.URL, 1}} {
		for range 3 {
			result, out, err := probeHTTP(t, tt.scheme, tt.url, "/", nil, time.Second)
			require.NoError(t, err)
			assert.Equal(t, Success, result, out)
			assert.Equal(t, "ok", out)
			assert.Equal(t, seen{tt.wantProto, testUA}, <-saw, tt.scheme)
		}
	}
	settled(t, goroutines, fds)
}

func TestHTTPBadPathIsUsedVerbatim(t *testing.T) {
	req, err := NewRequest("http", "10.0.0.1", 8080, "/%zz", nil, testUA)
	require.NoError(t, err)
	assert.Equal(t, "/%zz", req.URL.Path)
	assert.Equal(t, "10.0.0.1:8080", req.URL.Host)

	req, err = NewRequest("http", "fd00::1", 80, "/", nil, testUA)
	require.NoError(t, err)
	assert.Equal(t, "[fd00::1]:80", req.URL.Host, "IPv6 hosts are bracketed")
}

func TestHTTPCancelledContextStopsTheProbe(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	host, port := target(t, srv.URL)
	req, err := NewRequest("http", host, port, "/", nil, testUA)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result)
	go func() {
		r, _, _ := split(NewHTTPGet(NewDialer()).Probe(ctx, req, time.Hour, nil))
		done <- r
	}()
	cancel()
	select {
	case r := <-done:
		assert.Equal(t, Failure, r)
	case <-time.After(10 * time.Second):
		t.Fatal("probe did not stop with its context")
	}
}

func TestTCP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	result, out, err := split(TCP(context.Background(), NewDialer(), lis.Addr().String(), time.Second, nil))
	require.NoError(t, err)
	assert.Equal(t, Success, result)
	assert.Empty(t, out)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := closed.Addr().String()
	closed.Close()
	result, out, err = split(TCP(context.Background(), NewDialer(), addr, time.Second, nil))
	require.NoError(t, err)
	assert.Equal(t, Failure, result)
	assert.Equal(t, "dial tcp "+addr+": connect: connection refused", out)
}

// blackbox_exporter's options, where set, replace kubelet's verdict rules.
func TestHTTPCheck(t *testing.T) {
	var lastMethod string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastMethod = r.Method
		switch r.URL.Path {
		case "/created":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte("status: ok"))
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/degraded":
			w.Write([]byte("status: degraded"))
		case "/moved":
			http.Redirect(w, r, "http://192.0.2.1/", http.StatusFound)
		}
	}))
	defer srv.Close()
	host, port := target(t, srv.URL)
	ok := regexp.MustCompile(`status: ok`)
	tests := []struct {
		path, method string
		check        HTTPCheck
		want         Result
		wantOutput   string
	}{
		{"/created", "", HTTPCheck{}, Success, "status: ok"},
		{"/created", "", HTTPCheck{ValidStatusCodes: []int{200}}, Failure, "HTTP probe failed with statuscode: 201"},
		{"/missing", "", HTTPCheck{ValidStatusCodes: []int{200, 404}}, Success, ""},
		{"/moved", "", HTTPCheck{ValidStatusCodes: []int{200}}, Failure, "HTTP probe failed with statuscode: 302"},
		{"/created", "", HTTPCheck{BodyMustMatch: ok}, Success, "status: ok"},
		{"/degraded", "", HTTPCheck{BodyMustMatch: ok}, Failure, `HTTP probe failed: the body does not match "status: ok"`},
		{"/missing", "", HTTPCheck{BodyMustMatch: ok}, Failure, "HTTP probe failed with statuscode: 404"},
		{"/created", http.MethodHead, HTTPCheck{}, Success, ""},
	}
	for _, tt := range tests {
		req, err := NewRequest("http", host, port, tt.path, nil, testUA)
		require.NoError(t, err)
		if tt.method != "" {
			req.Method = tt.method
		}
		r, out, err := split(NewHTTPGet(NewDialer()).ProbeChecked(context.Background(), req, time.Second, tt.check, nil))
		require.NoError(t, err)
		assert.Equal(t, tt.want, r, "%s %+v", tt.path, tt.check)
		assert.Equal(t, tt.wantOutput, out, "%s %+v", tt.path, tt.check)
		assert.Equal(t, req.Method, lastMethod)
	}
}

// split gives a verdict the (result, output, error) shape the tests check.
func split(v Verdict, err error) (Result, string, error) { return v.Result, v.Output, err }

// Each failure carries its cause, decided where the failure happens: by
// the error's type or the status, never by parsing the output.
func TestVerdictCauses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			fmt.Fprint(w, "hello")
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()
	req := func(path string) *http.Request {
		r, err := NewRequest("http", "127.0.0.1", port, path, nil, testUA)
		require.NoError(t, err)
		return r
	}
	tests := []struct {
		name string
		run  func() (Verdict, error)
		want Cause
	}{
		{"http status", func() (Verdict, error) {
			return NewHTTPGet(NewDialer()).Probe(context.Background(), req("/500"), time.Second, nil)
		}, CauseStatus},
		{"http body", func() (Verdict, error) {
			return NewHTTPGet(NewDialer()).ProbeChecked(context.Background(), req("/"), time.Second, HTTPCheck{BodyMustMatch: regexp.MustCompile("bye")}, nil)
		}, CauseBody},
		{"http redirect loop", func() (Verdict, error) {
			return NewHTTPGet(NewDialer()).Probe(context.Background(), req("/loop"), time.Second, nil)
		}, CauseNetwork},
		{"tcp refused", func() (Verdict, error) { return TCP(context.Background(), NewDialer(), closedAddr, time.Second, nil) }, CauseRefused},
		{"tcp timeout", func() (Verdict, error) {
			return TCP(context.Background(), NewDialer(), closedAddr, time.Nanosecond, nil)
		}, CauseTimeout},
		{"http refused", func() (Verdict, error) {
			r, _ := NewRequest("http", "127.0.0.1", closed.Addr().(*net.TCPAddr).Port, "/", nil, testUA)
			return NewHTTPGet(NewDialer()).Probe(context.Background(), r, time.Second, nil)
		}, CauseRefused},
		{"success", func() (Verdict, error) {
			return NewHTTPGet(NewDialer()).Probe(context.Background(), req("/"), time.Second, nil)
		}, CauseNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := tt.run()
			require.NoError(t, err)
			assert.Equal(t, tt.want, v.Cause, v.Output)
		})
	}
}
