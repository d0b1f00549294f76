package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// rawServer answers every connection with response, as bytes, after
// reading the request's head; heads receives each head as it came.
func rawServer(t *testing.T, response []byte) (addr string, heads <-chan []byte) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ch := make(chan []byte, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var head []byte
				r := bufio.NewReader(c)
				for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
					line, err := r.ReadBytes('\n')
					head = append(head, line...)
					if err != nil {
						return
					}
				}
				select {
				case ch <- head:
				default:
				}
				c.Write(response)
			})
		}
	})
	return l.Addr().String(), ch
}

// probeWith runs probe with a transcript, finished as prober.RunOnce finishes it.
func probeWith(probe func(*Transcript) (Verdict, error)) (Verdict, error, *Transcript) {
	tr := &Transcript{}
	v, err := probe(tr)
	result := v.Result.String()
	if err != nil {
		result = "unknown"
	}
	tr.Finish(result, v.Output, err)
	return v, err, tr
}

func httpProbe(scheme, host string, port int, path string, timeout time.Duration) func(*Transcript) (Verdict, error) {
	return func(tr *Transcript) (Verdict, error) {
		req, err := NewRequest(scheme, host, port, path, nil, testUA)
		if err != nil {
			return Verdict{}, err
		}
		return NewHTTPGet(NewDialer()).Probe(context.Background(), req, timeout, tr)
	}
}

func exchanges(t *testing.T, rec Record) []*Exchange {
	t.Helper()
	require.Len(t, rec.Attempts, 1)
	return rec.Attempts[0].HTTP
}

// Each kind of probe records what it did; the transcript never changes the
// verdict, and what it shows is bounded and escaped.
func TestTranscript(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok"))
		case "/start":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, "http://192.0.2.1/", http.StatusFound) // TEST-NET-1: never dialled
		case "/slow":
			<-r.Context().Done()
		default:
			http.Error(w, "broken", http.StatusInternalServerError)
		}
	}))
	defer ok.Close()
	host, port := target(t, ok.URL)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secure")) }))
	defer tlsSrv.Close()
	_, tlsPort := target(t, tlsSrv.URL)
	h2Srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Proto)) }))
	h2Srv.EnableHTTP2 = true
	h2Srv.StartTLS()
	defer h2Srv.Close()
	_, h2Port := target(t, h2Srv.URL)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	// A hostile target: a status line and headers with terminal escapes,
	// a header as large as MaxResponseHeader allows, more header lines
	// than a transcript keeps, and a binary body longer than MaxBody.
	var hostile bytes.Buffer
	hostile.WriteString("HTTP/1.1 200 \x1b[2Jcleared\r\n")
	hostile.WriteString("X-Big: " + strings.Repeat("B", MaxResponseHeader/2) + "\r\n")
	// Go refuses control characters in a header but not bytes past ASCII:
	// C1 controls (CSI), bidi overrides, invalid UTF-8.
	hostile.WriteString("X-Evil: \xc2\x9b31m \u202e \xff\xfe\r\n")
	for i := range 2 * TranscriptHeaderLines {
		fmt.Fprintf(&hostile, "X-Many-%03d: v\r\n", i)
	}
	body := bytes.Repeat([]byte("\x00\x01\xff\xfe\x1b[31mred\r\n\u202egnp.exe "), MaxBody)
	fmt.Fprintf(&hostile, "Content-Length: %d\r\n\r\n", len(body))
	hostile.Write(body)
	hostileAddr, _ := rawServer(t, hostile.Bytes())
	_, hostilePort := target(t, "http://"+hostileAddr)
	malformedAddr, _ := rawServer(t, []byte("HTTP/1.1 200 OK\r\nX-Ansi: \x1b]0;owned\x07 title\r\n\r\n"))
	_, malformedPort := target(t, "http://"+malformedAddr)

	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
	grpcAddr := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	noHealth := startGRPC(t, func(*grpc.Server) {})
	grpcProbe := func(addr, service string) func(*Transcript) (Verdict, error) {
		return func(tr *Transcript) (Verdict, error) {
			return GRPCHealth(context.Background(), NewDialer(), addr, service, testUA, time.Second, tr)
		}
	}
	tcpProbe := func(addr string) func(*Transcript) (Verdict, error) {
		return func(tr *Transcript) (Verdict, error) {
			return TCP(context.Background(), NewDialer(), addr, time.Second, tr)
		}
	}

	tests := []struct {
		name     string
		probe    func(*Transcript) (Verdict, error)
		check    func(t *testing.T, rec Record)
		wantText []string
	}{
		{
			name:  "HTTP 200",
			probe: httpProbe("http", host, port, "/healthz", time.Second),
			check: func(t *testing.T, rec Record) {
				xs := exchanges(t, rec)
				require.Len(t, xs, 1)
				x := xs[0]
				assert.Equal(t, "GET /healthz HTTP/1.1", x.RequestLine)
				assert.Equal(t, []string{"Host: " + net.JoinHostPort(host, strconv.Itoa(port)), "User-Agent: " + testUA, "Accept: */*", "Connection: close"}, x.RequestHeaders)
				assert.Equal(t, "HTTP/1.1 200 OK", x.StatusLine)
				assert.Contains(t, x.ResponseHeaders, "Content-Length: 2")
				assert.Equal(t, 2, x.BodyBytes)
				assert.Equal(t, "ok", x.BodyExcerpt)
				require.Len(t, x.Conn.Dials, 1)
				assert.Equal(t, net.JoinHostPort(host, strconv.Itoa(port)), x.Conn.Dials[0].Address)
				assert.Equal(t, x.Conn.Dials[0].Address, x.Conn.Remote)
				assert.Nil(t, x.Conn.TLS)
				// The phases in the order they happen.
				assert.True(t, x.StartMs <= x.Conn.Dials[0].StartMs && x.Conn.Dials[0].StartMs <= x.Conn.Dials[0].DoneMs &&
					x.Conn.Dials[0].DoneMs <= x.WrittenMs && x.WrittenMs <= x.FirstByteMs && x.FirstByteMs <= x.ResponseMs &&
					x.ResponseMs <= x.DoneMs && x.DoneMs <= rec.Attempts[0].DoneMs, "%+v", x)
				assert.Equal(t, "success", rec.Attempts[0].Verdict)
			},
			wantText: []string{"Beginning probe  probe=httpGet target=http://" + host, "timeout=1s", "Connecting  address=" + host,
				"> GET /healthz HTTP/1.1", "> Connection: close", "Received HTTP response", "< HTTP/1.1 200 OK",
				"Read response body  bytes=2", "| ok", "Response timings for roundtrip  roundtrip=0 resolve=- connect=", "Probe succeeded",
				"Result as kubelet reports it:\n  result:   success\n  output:   ok\n"},
		},
		{
			name:  "HTTP 500",
			probe: httpProbe("http", host, port, "/broken", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				assert.Equal(t, "HTTP/1.1 500 Internal Server Error", x.StatusLine)
				assert.Equal(t, "broken\n", x.BodyExcerpt, "the body kubelet leaves out of the output is in the transcript")
				assert.Equal(t, "status", rec.Attempts[0].Cause)
			},
			wantText: []string{"< HTTP/1.1 500 Internal Server Error", "| broken", "Probe failed  cause=status",
				"output:   HTTP probe failed with statuscode: 500"},
		},
		{
			name:  "HTTP redirect followed",
			probe: httpProbe("http", host, port, "/start", time.Second),
			check: func(t *testing.T, rec Record) {
				xs := exchanges(t, rec)
				require.Len(t, xs, 2)
				assert.Equal(t, "HTTP/1.1 302 Found", xs[0].StatusLine)
				assert.Contains(t, xs[0].ResponseHeaders, "Location: /healthz")
				assert.Equal(t, "followed to "+ok.URL+"/healthz", xs[0].Redirect)
				assert.Equal(t, "GET /healthz HTTP/1.1", xs[1].RequestLine)
				assert.Contains(t, xs[1].RequestHeaders, "Referer: "+ok.URL+"/start")
				assert.Equal(t, "ok", xs[1].BodyExcerpt)
			},
			wantText: []string{"Making HTTP request  roundtrip=0", "Redirect followed to " + ok.URL + "/healthz", "Making HTTP request  roundtrip=1"},
		},
		{
			name:  "HTTP redirect to another host, not followed",
			probe: httpProbe("http", host, port, "/elsewhere", time.Second),
			check: func(t *testing.T, rec Record) {
				xs := exchanges(t, rec)
				require.Len(t, xs, 1)
				assert.Equal(t, "not followed: http://192.0.2.1/ is on another host", xs[0].Redirect)
				assert.Equal(t, "warning", rec.Attempts[0].Verdict)
			},
			wantText: []string{"Redirect not followed: http://192.0.2.1/ is on another host", "Probe succeeded with a warning",
				"result:   warning (counts as a success"},
		},
		{
			name:  "HTTP connection refused",
			probe: httpProbe("http", "127.0.0.1", closedPort, "/", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				require.Len(t, x.Conn.Dials, 1)
				assert.Contains(t, x.Conn.Dials[0].Error, "connection refused")
				assert.Empty(t, x.StatusLine)
				assert.Empty(t, x.RequestHeaders, "nothing was sent")
				assert.Equal(t, "refused", rec.Attempts[0].Cause)
			},
			wantText: []string{"Connection failed  address=" + closedAddr + ` err="dial tcp ` + closedAddr + `: connect: connection refused"`,
				"Error for HTTP request", "Probe failed  cause=refused"},
		},
		{
			name:  "HTTP timeout",
			probe: httpProbe("http", host, port, "/slow", 100*time.Millisecond),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				assert.Equal(t, "GET /slow HTTP/1.1", x.RequestLine, "the request went out")
				assert.Empty(t, x.StatusLine)
				assert.Contains(t, x.Error, "Client.Timeout exceeded while awaiting headers")
				assert.Equal(t, "timeout", rec.Attempts[0].Cause)
				assert.Equal(t, 100.0, rec.Attempts[0].TimeoutMs)
			},
			wantText: []string{"timeout=100ms", "> GET /slow HTTP/1.1", "Error for HTTP request", "Probe failed  cause=timeout"},
		},
		{
			name:  "HTTPS, not verified (as kubelet)",
			probe: httpProbe("https", "localhost", tlsPort, "/", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				require.NotNil(t, x.Conn.DNS, "localhost is resolved")
				assert.Equal(t, "localhost", x.Conn.DNS.Host)
				require.NotNil(t, x.Conn.TLS)
				assert.Empty(t, x.Conn.TLS.Error)
				assert.Equal(t, "TLS 1.3", x.Conn.TLS.Version)
				assert.Equal(t, "localhost", x.Conn.TLS.ServerName)
				assert.NotEmpty(t, x.Conn.TLS.Certificates)
				assert.Equal(t, "secure", x.BodyExcerpt)
			},
			wantText: []string{"Resolving target address  host=localhost", "Resolved target address", "TLS handshake done  version=\"TLS 1.3\"",
				`verified="false (as kubelet)"`, "certificate: O=Acme Co", "tls="},
		},
		{
			name:  "HTTPS with HTTP/2: the pseudo-header fields are the request line",
			probe: httpProbe("https", "127.0.0.1", h2Port, "/h2?x=1", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				assert.Equal(t, "h2", x.Conn.TLS.ALPN)
				assert.Empty(t, x.RequestLine)
				require.NotEmpty(t, x.RequestHeaders)
				assert.Contains(t, x.RequestHeaders, ":method: GET")
				assert.Contains(t, x.RequestHeaders, ":path: /h2?x=1")
				assert.Equal(t, "HTTP/2.0 200 OK", x.StatusLine)
			},
			wantText: []string{"alpn=h2", "> :path: /h2?x=1", "< HTTP/2.0 200 OK"},
		},
		{
			name:  "hostile response: bounded and escaped",
			probe: httpProbe("http", "127.0.0.1", hostilePort, "/", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				assert.Equal(t, `HTTP/1.1 200 \x1b[2Jcleared`, x.StatusLine)
				assert.Len(t, x.ResponseHeaders, TranscriptHeaderLines)
				assert.Equal(t, 2*TranscriptHeaderLines+3-TranscriptHeaderLines, x.ResponseHeadersLeftOut)
				for _, h := range x.ResponseHeaders {
					assert.Less(t, len(h), 2*bounded.Message, "a header line is cut")
				}
				assert.Equal(t, MaxBody, x.BodyBytes)
				assert.Less(t, len(x.BodyExcerpt), 5*bounded.Message)
				assert.True(t, strings.HasPrefix(x.BodyExcerpt, `\x00\x01\xff\xfe\x1b[31mred\x0d`+"\n"+`\u202egnp.exe`), x.BodyExcerpt[:min(64, len(x.BodyExcerpt))])
			},
			wantText: []string{"< … 67 more header lines", `< X-Evil: \u009b31m \u202e \xff\xfe`, "limit=\"reached", "more bytes cut"},
		},
		{
			name:  "malformed response header: a failure quoting it, escaped",
			probe: httpProbe("http", "127.0.0.1", malformedPort, "/", time.Second),
			check: func(t *testing.T, rec Record) {
				x := exchanges(t, rec)[0]
				assert.Empty(t, x.StatusLine)
				assert.Contains(t, x.Error, "malformed MIME header line")
				assert.Equal(t, "network", rec.Attempts[0].Cause)
			},
			wantText: []string{"Error for HTTP request", `owned\a title`, "Probe failed  cause=network"},
		},
		{
			name:  "TCP connected",
			probe: tcpProbe(net.JoinHostPort(host, strconv.Itoa(port))),
			check: func(t *testing.T, rec Record) {
				c := rec.Attempts[0].Conn
				require.NotNil(t, c)
				require.Len(t, c.Dials, 1)
				assert.Empty(t, c.Dials[0].Error)
				assert.Equal(t, net.JoinHostPort(host, strconv.Itoa(port)), c.Remote)
				assert.NotEmpty(t, c.Local)
				assert.Equal(t, "success", rec.Attempts[0].Verdict)
			},
			wantText: []string{"probe=tcpSocket", "Connected  address=" + net.JoinHostPort(host, strconv.Itoa(port)) + " local=127.0.0.1:", "Probe succeeded",
				"output:   \n"},
		},
		{
			name:  "TCP refused",
			probe: tcpProbe(closedAddr),
			check: func(t *testing.T, rec Record) {
				c := rec.Attempts[0].Conn
				require.Len(t, c.Dials, 1)
				assert.Contains(t, c.Dials[0].Error, "connection refused")
				assert.Empty(t, c.Remote)
			},
			wantText: []string{"Connection failed  address=" + closedAddr, "Probe failed  cause=refused",
				"output:   dial tcp " + closedAddr + ": connect: connection refused"},
		},
		{
			name:  "gRPC serving",
			probe: grpcProbe(grpcAddr, ""),
			check: func(t *testing.T, rec Record) {
				g := rec.Attempts[0].GRPC
				require.NotNil(t, g)
				assert.Equal(t, "SERVING", g.Status)
				assert.Equal(t, "/grpc.health.v1.Health/Check", g.Method)
				assert.True(t, strings.HasPrefix(g.UserAgent, testUA+" grpc-go/"), g.UserAgent)
				assert.True(t, g.ReadyMs > 0 && g.ReadyMs <= g.SentMs && g.SentMs <= g.DoneMs, "%+v", g)
				assert.Equal(t, grpcAddr, rec.Attempts[0].Conn.Remote)
			},
			wantText: []string{"probe=grpc target=" + grpcAddr, "Connected  address=" + grpcAddr, "Health check sent  method=/grpc.health.v1.Health/Check service=\"\"",
				"Health check answered  status=SERVING", "output:   service healthy"},
		},
		{
			name:  "gRPC not serving",
			probe: grpcProbe(grpcAddr, "sick"),
			check: func(t *testing.T, rec Record) {
				assert.Equal(t, "NOT_SERVING", rec.Attempts[0].GRPC.Status)
				assert.Equal(t, "notServing", rec.Attempts[0].Cause)
			},
			wantText: []string{"service=sick", "status=NOT_SERVING", `output:   service unhealthy (responded with "NOT_SERVING")`},
		},
		{
			name: "gRPC closed port: the dials refused until the timeout",
			probe: func(tr *Transcript) (Verdict, error) {
				return GRPCHealth(context.Background(), NewDialer(), closedAddr, "", testUA, 200*time.Millisecond, tr)
			},
			check: func(t *testing.T, rec Record) {
				c := rec.Attempts[0].Conn
				require.NotEmpty(t, c.Dials)
				assert.Contains(t, c.Dials[0].Error, "connection refused")
				assert.Zero(t, rec.Attempts[0].GRPC.SentMs, "no call without a connection")
				assert.Equal(t, "timeout", rec.Attempts[0].Cause)
			},
			wantText: []string{"Connection failed  address=" + closedAddr, "Probe failed  cause=timeout"},
		},
		{
			name:  "gRPC without the health service",
			probe: grpcProbe(noHealth, ""),
			check: func(t *testing.T, rec Record) {
				g := rec.Attempts[0].GRPC
				assert.Equal(t, "Unimplemented", g.Code)
				assert.Equal(t, "unknown service grpc.health.v1.Health", g.Message)
			},
			wantText: []string{`Health check failed  code=Unimplemented message="unknown service grpc.health.v1.Health"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			without, errWithout := tt.probe(nil)
			with, errWith, tr := probeWith(tt.probe)
			assert.Equal(t, without, with, "a transcript does not change the verdict")
			assert.Equal(t, fmt.Sprint(errWithout), fmt.Sprint(errWith))

			rec := tr.Record()
			require.Len(t, rec.Attempts, 1)
			assert.Equal(t, with.Output, rec.Attempts[0].Output)
			require.NotNil(t, rec.Result)
			assert.Equal(t, with.Output, rec.Result.Output)
			tt.check(t, rec)

			var text strings.Builder
			require.NoError(t, tr.Write(&text))
			for _, want := range tt.wantText {
				assert.Contains(t, text.String(), want)
			}
			assertTerminalSafe(t, text.String())
			assert.Less(t, text.Len(), 128<<10, "bounded")
			t.Log("\n" + text.String())

			j, err := json.Marshal(tr)
			require.NoError(t, err)
			var back Record
			require.NoError(t, json.Unmarshal(j, &back))
			assert.Equal(t, rec.Attempts[0].Verdict, back.Attempts[0].Verdict)
		})
	}
}

// assertTerminalSafe fails if s has a byte a terminal would act on.
func assertTerminalSafe(t *testing.T, s string) {
	t.Helper()
	assert.True(t, utf8.ValidString(s), "valid UTF-8")
	for i, r := range s {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			t.Errorf("unescaped %U at %d: %q", r, i, s[max(0, i-40):min(len(s), i+40)])
			return
		}
	}
}

// The request block is what went on the wire, byte for byte.
func TestTranscriptRequestAsWritten(t *testing.T) {
	addr, heads := rawServer(t, []byte("HTTP/1.1 204 No Content\r\n\r\n"))
	h, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	headers := http.Header{"X-Muffins": {"chocolate", "blueberry"}, "Host": {"vhost.example"}, "Accept": {""}}
	tr := &Transcript{}
	req, err := NewRequest("http", h, port, "/ready?full=1&x=%2F", headers, testUA)
	require.NoError(t, err)
	v, err := NewHTTPGet(NewDialer()).Probe(context.Background(), req, time.Second, tr)
	require.NoError(t, err)
	assert.Equal(t, Success, v.Result)
	tr.Finish(v.Result.String(), v.Output, err)
	x := tr.Record().Attempts[0].HTTP[0]
	wire := strings.Join(append([]string{x.RequestLine}, x.RequestHeaders...), "\r\n") + "\r\n\r\n"
	assert.Equal(t, string(<-heads), wire)
	assert.Contains(t, x.RequestHeaders, "Host: vhost.example")
}

// Redact reaches every text that came from the request and the response:
// the URL a redirect went to and the request line that asked for it too.
func TestTranscriptRedact(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/echo?token="+strings.Fields(r.Header.Get("Authorization"))[1], http.StatusFound)
			return
		}
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "bad "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	host, port := target(t, srv.URL)
	req, err := NewRequest("http", host, port, "/", http.Header{"Authorization": {"Bearer s3cr3t"}}, testUA)
	require.NoError(t, err)
	tr := &Transcript{Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "[redacted]") }}
	v, err := NewHTTPGet(NewDialer()).Probe(context.Background(), req, time.Second, tr)
	tr.Finish(v.Result.String(), v.Output, err)
	var text strings.Builder
	require.NoError(t, tr.Write(&text))
	j, err := json.Marshal(tr)
	require.NoError(t, err)
	for _, out := range []string{text.String(), string(j)} {
		assert.NotContains(t, out, "s3cr3t")
		assert.Contains(t, out, "Authorization: Bearer [redacted]")
		assert.Contains(t, out, "X-Echo: Bearer [redacted]")
	}
}

// Without a transcript, recording costs nothing: no allocation.
func TestNoTranscriptAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	var none *Transcript // what a probe given no transcript records into
	req, err := NewRequest("http", "127.0.0.1", 80, "/", nil, testUA)
	require.NoError(t, err)
	resp := &http.Response{}
	allocs := testing.AllocsPerRun(100, func() {
		rec := none.beginHTTP(req, time.Second)
		_, _ = rec.httpTrace(ctx, req, SameHostRedirects)
		rec.response(resp, nil)
		rec.body(nil, nil)
		rec.end(Verdict{}, nil)
		rec = none.begin("tcpSocket", "127.0.0.1:80", time.Second)
		_ = rec.netTrace(ctx)
		rec.connected(nil)
		rec.grpcCall("", testUA)
		rec.grpcSent()
		rec.grpcAnswer(nil, nil)
	})
	assert.Zero(t, allocs)
}

// Events after Finish (a dial that outlived its probe) are dropped.
func TestTranscriptFinishFreezes(t *testing.T) {
	tr := &Transcript{}
	rec := tr.begin("tcpSocket", "127.0.0.1:1", time.Second)
	tr.Finish("failure", "refused", nil)
	ctx := rec.netTrace(context.Background())
	var d net.Dialer
	if c, err := d.DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil {
		c.Close()
	}
	rec.end(Verdict{Result: Failure}, nil)
	r := tr.Record()
	assert.Empty(t, r.Attempts[0].Conn.Dials)
	assert.Zero(t, r.Attempts[0].DoneMs)
	assert.Equal(t, "refused", r.Result.Output)
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain text, ünïcode", "plain text, ünïcode"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"nul\x00 del\x7f cr\r", `nul\x00 del\x7f cr\x0d`},
		{"bad utf8 \xff\xfe", `bad utf8 \xff\xfe`},
		{"c1 \u0085 bidi \u202e", `c1 \u0085 bidi \u202e`},
		{"replacement \ufffd kept", "replacement \ufffd kept"},
	} {
		assert.Equal(t, tt.want, printable(tt.in), "%q", tt.in)
	}
}

// What a transcript records keeps to one line (but a body excerpt): a
// certificate's subject, which Go does not escape, cannot forge a line of
// the transcript.
func TestTranscriptTextIsOneLine(t *testing.T) {
	tr := &Transcript{}
	rec := tr.begin("httpGet", "https://127.0.0.1/", time.Second)
	forged := "evil\n     1.000ms  Probe succeeded"
	rec.do(func(now float64) {
		h := &TLS{StartMs: now}
		rec.a.HTTP = append(rec.a.HTTP, &Exchange{StartMs: now, Conn: Conn{TLS: h}})
		h.record(tr, tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: forged}}}}, nil, now+1)
	})
	tr.Finish("failure", "", nil)
	var text strings.Builder
	require.NoError(t, tr.Write(&text))
	assert.NotContains(t, text.String(), "\n     1.000ms  Probe succeeded")
	assert.Contains(t, text.String(), `certificate: CN=evil\n     1.000ms  Probe succeeded`)
}
