package probe

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// Transcript records what the probes given it sent and received, for a
// person debugging a probe (blackbox_exporter's debug output): the address
// dialled and each connection attempt, the TLS handshake, the request line
// and header fields as written, the status line and headers of each
// response (redirects included), an excerpt of the body, the timings of
// each phase and, once Finish is called, the result as kubelet reports it. Write renders it as text; it marshals to JSON.
//
// Every text recorded from the request and the response passes Redact,
// then is bounded and escaped as it is recorded: a header line and an
// error to bounded.Message bytes, at most TranscriptHeaderLines lines a
// block, a body excerpt to bounded.Message, and every byte that is not
// printable (control characters, ANSI escapes, invalid UTF-8) written as
// \xNN or \uNNNN, a line break as \n but in a body excerpt. The outputs,
// already bounded, pass Redact only (Write escapes the result's). A
// transcript costs nothing to probes given none (nil).
//
// The zero value is ready for one run (one probe, with kubelet's retries).
// The probe's goroutines record into it while it runs; read its Record
// after Finish.
type Transcript struct {
	// Redact, when set before the run, rewrites each text before it is
	// bounded (so a credential longer than a line kept is still found): the
	// caller's way to keep credentials it sent out of a transcript that may
	// be shared.
	Redact func(string) string

	mu sync.Mutex
	r  Record // r.Result is set by Finish: later events (a dial that outlived its probe) are dropped
}

// TranscriptHeaderLines is how many header lines a transcript keeps of one
// request or response; it counts the ones it leaves out.
const TranscriptHeaderLines = 64

// transcriptDials bounds the connection attempts (gRPC redials a refused
// port until its timeout) and the resolved addresses kept of one
// connection.
const transcriptDials = 16

// Record is what a Transcript holds, in the shape it is exported as JSON.
// Times are milliseconds since Started.
type Record struct {
	Started time.Time `json:"started"`
	// Attempts are the probe's runs: one, unless it could not run at all
	// and was tried again (kubelet's three tries).
	Attempts []*Attempt `json:"attempts"`
	// Result is the outcome as kubelet reports it (after Finish).
	Result *Final `json:"result,omitempty"`
}

// Attempt is one run of a probe kind.
type Attempt struct {
	Probe     string  `json:"probe"`  // httpGet, tcpSocket or grpc
	Target    string  `json:"target"` // the URL, or host:port
	TimeoutMs float64 `json:"timeoutMs"`
	StartMs   float64 `json:"startMs"`
	// Conn is the connection of a TCP or gRPC probe.
	Conn *Conn `json:"conn,omitempty"`
	// HTTP are an HTTP probe's round trips: the request and each redirect
	// followed.
	HTTP []*Exchange `json:"http,omitempty"`
	GRPC *GRPCCall   `json:"grpc,omitempty"`
	// Verdict is success, warning or failure, or error when the probe
	// could not run (Error says why).
	Verdict string  `json:"verdict"`
	Output  string  `json:"output,omitempty"`
	Cause   string  `json:"cause,omitempty"`
	Error   string  `json:"error,omitempty"`
	DoneMs  float64 `json:"doneMs"`
}

// Conn is how a connection was made.
type Conn struct {
	DNS   *DNS   `json:"dns,omitempty"`
	Dials []Dial `json:"dials,omitempty"`
	// DialsLeftOut counts the attempts past the ones kept.
	DialsLeftOut int  `json:"dialsLeftOut,omitempty"`
	TLS          *TLS `json:"tls,omitempty"`
	// Remote and Local are the connection's addresses, once connected.
	Remote      string  `json:"remote,omitempty"`
	Local       string  `json:"local,omitempty"`
	ConnectedMs float64 `json:"connectedMs,omitempty"`
}

// DNS is the resolution of a host name.
type DNS struct {
	Host    string   `json:"host"`
	StartMs float64  `json:"startMs"`
	DoneMs  float64  `json:"doneMs,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Dial is one connection attempt to a resolved address.
type Dial struct {
	Address string  `json:"address"` // IP:port
	StartMs float64 `json:"startMs"`
	DoneMs  float64 `json:"doneMs,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// TLS is a TLS handshake. The server's certificate is not verified, as
// kubelet does not verify probe targets.
type TLS struct {
	StartMs     float64 `json:"startMs"`
	DoneMs      float64 `json:"doneMs,omitempty"`
	Version     string  `json:"version,omitempty"`
	CipherSuite string  `json:"cipherSuite,omitempty"`
	ALPN        string  `json:"alpn,omitempty"`
	ServerName  string  `json:"serverName,omitempty"`
	// Certificates are the subjects of the certificates the server sent,
	// its own first.
	Certificates []string `json:"certificates,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// Exchange is one HTTP round trip.
type Exchange struct {
	Method  string  `json:"method"`
	URL     string  `json:"url"`
	StartMs float64 `json:"startMs"`
	Conn    Conn    `json:"conn"`
	// RequestLine is HTTP/1's ("GET /healthz HTTP/1.1"); HTTP/2 sends its
	// pseudo-header fields (":method: GET") among RequestHeaders instead.
	RequestLine    string   `json:"requestLine,omitempty"`
	RequestHeaders []string `json:"requestHeaders,omitempty"` // "Name: value", as written, in order
	// RequestHeadersLeftOut counts the lines past TranscriptHeaderLines.
	RequestHeadersLeftOut int     `json:"requestHeadersLeftOut,omitempty"`
	WrittenMs             float64 `json:"writtenMs,omitempty"`
	FirstByteMs           float64 `json:"firstByteMs,omitempty"`
	StatusLine            string  `json:"statusLine,omitempty"` // "HTTP/1.1 200 OK"
	// ResponseHeaders are "Name: value", by name (Go keeps no order).
	ResponseHeaders        []string `json:"responseHeaders,omitempty"`
	ResponseHeadersLeftOut int      `json:"responseHeadersLeftOut,omitempty"`
	ResponseMs             float64  `json:"responseMs,omitempty"`
	// Redirect says where a redirect went, or why it was not followed.
	Redirect string `json:"redirect,omitempty"`
	// BodyBytes is how much of the body the probe read (at most MaxBody);
	// BodyExcerpt is its start.
	BodyBytes   int     `json:"bodyBytes,omitempty"`
	BodyExcerpt string  `json:"bodyExcerpt,omitempty"`
	DoneMs      float64 `json:"doneMs,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// GRPCCall is a gRPC health check.
type GRPCCall struct {
	Method    string  `json:"method"` // /grpc.health.v1.Health/Check
	Service   string  `json:"service"`
	UserAgent string  `json:"userAgent"`         // as sent: gRPC adds its own
	ReadyMs   float64 `json:"readyMs,omitempty"` // the connection is ready
	SentMs    float64 `json:"sentMs,omitempty"`
	DoneMs    float64 `json:"doneMs,omitempty"`
	// Status is the serving status answered, or Code and Message the
	// call's error status.
	Status  string `json:"status,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Final is a probe's outcome as kubelet reports it.
type Final struct {
	Result string `json:"result"` // success, warning, failure, or unknown (could not probe)
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
	// DurationMs is the whole run, retries included.
	DurationMs float64 `json:"durationMs"`
}

// Finish records the outcome as kubelet reports it (result: success,
// warning, failure or unknown; output; err, when the probe could not run)
// and ends the recording.
func (t *Transcript) Finish(result, output string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := &Final{Result: result, Output: t.redact(output)}
	if err != nil {
		f.Error = t.text(err.Error())
	}
	if !t.r.Started.IsZero() {
		f.DurationMs = ms(time.Since(t.r.Started))
	}
	t.r.Result = f
}

// Record returns what t recorded; call it after Finish (the Record shares
// t's memory, which nothing changes then).
func (t *Transcript) Record() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.r
}

// MarshalJSON encodes t's Record.
func (t *Transcript) MarshalJSON() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return json.Marshal(&t.r)
}

// recording records one attempt. Its methods do nothing on a nil recording,
// which is what a probe without a transcript has.
type recording struct {
	t *Transcript
	a *Attempt
	// next is the request the next HTTP round trip sends (guarded by t.mu).
	next *http.Request
}

// begin starts recording an attempt of a probe of kind against target.
func (t *Transcript) begin(kind, target string, timeout time.Duration) *recording {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.r.Started.IsZero() {
		t.r.Started = time.Now()
	}
	a := &Attempt{Probe: kind, Target: t.text(target), TimeoutMs: ms(timeout), StartMs: ms(time.Since(t.r.Started))}
	if kind != "httpGet" {
		a.Conn = &Conn{} // an HTTP probe's are its round trips'
	}
	if t.r.Result == nil {
		t.r.Attempts = append(t.r.Attempts, a)
	}
	return &recording{t: t, a: a}
}

// beginHTTP starts recording an HTTP probe of req (nil without t).
func (t *Transcript) beginHTTP(req *http.Request, timeout time.Duration) *recording {
	if t == nil {
		return nil // before req.URL.String(), which allocates
	}
	return t.begin("httpGet", req.URL.String(), timeout)
}

// do runs f under the transcript's lock with the time now, unless the
// transcript is finished.
func (r *recording) do(f func(now float64)) {
	if r == nil {
		return
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.t.r.Result == nil {
		f(ms(time.Since(r.t.r.Started)))
	}
}

// end records the attempt's verdict.
func (r *recording) end(v Verdict, err error) {
	r.do(func(now float64) {
		a := r.a
		a.DoneMs = now
		if err != nil {
			a.Verdict, a.Error = "error", r.t.text(err.Error())
			return
		}
		a.Verdict, a.Output = v.Result.String(), r.t.redact(v.Output)
		if v.Result == Failure {
			a.Cause = v.Cause.String()
		}
	})
}

// conn is the connection being made: the current round trip's for HTTP.
// Called under the lock.
func (r *recording) conn() *Conn {
	if r.a.Conn != nil {
		return r.a.Conn
	}
	if n := len(r.a.HTTP); n > 0 {
		return &r.a.HTTP[n-1].Conn
	}
	return nil
}

// exchange is the current HTTP round trip, or nil. Called under the lock.
func (r *recording) exchange() *Exchange {
	if n := len(r.a.HTTP); n > 0 {
		return r.a.HTTP[n-1]
	}
	return nil
}

// netTrace returns ctx with hooks that record name resolution and
// connection attempts (Go's dialer calls them); ctx itself without r.
func (r *recording) netTrace(ctx context.Context) context.Context {
	if r == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, r.connTrace(&httptrace.ClientTrace{}))
}

// connTrace adds the hooks of netTrace to ct.
func (r *recording) connTrace(ct *httptrace.ClientTrace) *httptrace.ClientTrace {
	onConn := func(f func(c *Conn, now float64)) {
		r.do(func(now float64) {
			if c := r.conn(); c != nil {
				f(c, now)
			}
		})
	}
	ct.DNSStart = func(info httptrace.DNSStartInfo) {
		onConn(func(c *Conn, now float64) { c.DNS = &DNS{Host: r.t.text(info.Host), StartMs: now} })
	}
	ct.DNSDone = func(info httptrace.DNSDoneInfo) {
		onConn(func(c *Conn, now float64) {
			if c.DNS == nil {
				return
			}
			c.DNS.DoneMs = now
			for i, a := range info.Addrs {
				if i == transcriptDials { // as many as the dials kept
					c.DNS.Addrs = append(c.DNS.Addrs, fmt.Sprintf("… %d more", len(info.Addrs)-i))
					break
				}
				c.DNS.Addrs = append(c.DNS.Addrs, a.String())
			}
			if info.Err != nil {
				c.DNS.Error = r.t.text(info.Err.Error())
			}
		})
	}
	ct.ConnectStart = func(_, addr string) {
		onConn(func(c *Conn, now float64) {
			if len(c.Dials) == transcriptDials {
				c.DialsLeftOut++
				return
			}
			c.Dials = append(c.Dials, Dial{Address: addr, StartMs: now})
		})
	}
	ct.ConnectDone = func(_, addr string, err error) {
		onConn(func(c *Conn, now float64) {
			// The last attempt to addr (happy eyeballs dials two at once).
			for i := len(c.Dials) - 1; i >= 0; i-- {
				if d := &c.Dials[i]; d.Address == addr && d.DoneMs == 0 {
					d.DoneMs = now
					if err != nil {
						d.Error = r.t.text(err.Error())
					}
					return
				}
			}
		})
	}
	return ct
}

// connected records the connection made.
func (r *recording) connected(conn net.Conn) {
	r.do(func(now float64) {
		if c := r.conn(); c != nil && conn != nil {
			c.Remote, c.Local, c.ConnectedMs = conn.RemoteAddr().String(), conn.LocalAddr().String(), now
		}
	})
}

// httpTrace returns ctx with hooks that record each round trip of req,
// and a CheckRedirect that records the redirects check decides on; ctx
// and check themselves without r.
func (r *recording) httpTrace(ctx context.Context, req *http.Request, check func(*http.Request, []*http.Request) error) (context.Context, func(*http.Request, []*http.Request) error) {
	if r == nil {
		return ctx, check
	}
	r.do(func(float64) { r.next = req })
	ct := r.connTrace(&httptrace.ClientTrace{
		GetConn: func(string) {
			r.do(func(now float64) {
				x := &Exchange{Method: r.next.Method, URL: r.t.text(r.next.URL.String()), StartMs: now}
				r.a.HTTP = append(r.a.HTTP, x)
			})
		},
		TLSHandshakeStart: func() {
			r.do(func(now float64) {
				if c := r.conn(); c != nil {
					c.TLS = &TLS{StartMs: now}
				}
			})
		},
		TLSHandshakeDone: func(state tls.ConnectionState, err error) {
			r.do(func(now float64) {
				if c := r.conn(); c != nil && c.TLS != nil {
					c.TLS.record(r.t, state, err, now)
				}
			})
		},
		GotConn: func(info httptrace.GotConnInfo) { r.connected(info.Conn) },
		WroteHeaderField: func(key string, values []string) {
			r.do(func(float64) {
				if x := r.exchange(); x != nil {
					for _, v := range values {
						x.RequestHeaders, x.RequestHeadersLeftOut = r.t.addLine(x.RequestHeaders, x.RequestHeadersLeftOut, key, v)
					}
				}
			})
		},
		WroteHeaders: func() {
			r.do(func(float64) {
				x := r.exchange()
				if x == nil || (len(x.RequestHeaders) > 0 && strings.HasPrefix(x.RequestHeaders[0], ":")) {
					return // HTTP/2: the pseudo-header fields are the request line
				}
				x.RequestLine = r.t.text(r.next.Method + " " + r.next.URL.RequestURI() + " HTTP/1.1")
			})
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			r.do(func(now float64) {
				if x := r.exchange(); x != nil {
					x.WrittenMs = now
					if info.Err != nil {
						x.Error = r.t.text(info.Err.Error())
					}
				}
			})
		},
		GotFirstResponseByte: func() {
			r.do(func(now float64) {
				if x := r.exchange(); x != nil {
					x.FirstByteMs = now
				}
			})
		},
	})
	record := func(req *http.Request, via []*http.Request) error {
		err := check(req, via)
		r.do(func(now float64) {
			x := r.exchange()
			if x == nil {
				return
			}
			x.response(r.t, req.Response, now)
			switch {
			case err == nil:
				x.Redirect, x.DoneMs = "followed to "+r.t.text(req.URL.String()), now
				r.next = req
			case errors.Is(err, http.ErrUseLastResponse):
				x.Redirect = "not followed: " + r.t.text(req.URL.String()) + " is on another host"
			default:
				x.Redirect = "not followed: " + r.t.text(err.Error())
			}
		})
		return err
	}
	return httptrace.WithClientTrace(ctx, ct), record
}

// response records the answer to a round trip: resp, or err.
func (r *recording) response(resp *http.Response, err error) {
	r.do(func(now float64) {
		x := r.exchange()
		if x == nil {
			return
		}
		if err != nil {
			x.Error, x.DoneMs = r.t.text(err.Error()), now
			return
		}
		x.response(r.t, resp, now)
	})
}

// body records what the probe read of the response's body.
func (r *recording) body(b []byte, err error) {
	r.do(func(now float64) {
		x := r.exchange()
		if x == nil {
			return
		}
		x.BodyBytes, x.BodyExcerpt, x.DoneMs = len(b), r.t.excerpt(string(b)), now
		if err != nil {
			x.Error = r.t.text(err.Error())
		}
	})
}

func (x *Exchange) response(t *Transcript, resp *http.Response, now float64) {
	if resp == nil {
		return
	}
	x.StatusLine, x.ResponseMs = t.text(resp.Proto+" "+resp.Status), now
	x.ResponseHeaders, x.ResponseHeadersLeftOut = nil, 0
	for _, name := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[name] {
			x.ResponseHeaders, x.ResponseHeadersLeftOut = t.addLine(x.ResponseHeaders, x.ResponseHeadersLeftOut, name, v)
		}
	}
}

func (h *TLS) record(t *Transcript, state tls.ConnectionState, err error, now float64) {
	h.DoneMs = now
	if err != nil {
		h.Error = t.text(err.Error())
		return
	}
	h.Version, h.CipherSuite = tls.VersionName(state.Version), tls.CipherSuiteName(state.CipherSuite)
	h.ALPN, h.ServerName = t.text(state.NegotiatedProtocol), t.text(state.ServerName)
	for i, cert := range state.PeerCertificates {
		if i == 3 {
			h.Certificates = append(h.Certificates, fmt.Sprintf("… %d more", len(state.PeerCertificates)-i))
			break
		}
		h.Certificates = append(h.Certificates, t.text(cert.Subject.String()+" (issuer "+cert.Issuer.String()+", valid "+
			cert.NotBefore.UTC().Format(time.DateOnly)+" to "+cert.NotAfter.UTC().Format(time.DateOnly)+")"))
	}
}

// grpcCall starts recording a health check of service.
func (r *recording) grpcCall(service, userAgent string) {
	r.do(func(float64) {
		ua := "grpc-go/" + grpc.Version // gRPC appends its own
		if userAgent != "" {
			ua = userAgent + " " + ua
		}
		r.a.GRPC = &GRPCCall{Method: "/grpc.health.v1.Health/Check", Service: r.t.text(service), UserAgent: r.t.text(ua)}
	})
}

// grpcSent records that the connection is ready and the call sent.
func (r *recording) grpcSent() {
	r.do(func(now float64) { r.a.GRPC.ReadyMs, r.a.GRPC.SentMs = now, now })
}

// grpcAnswer records the serving status answered, or the call's error
// status (code and message).
func (r *recording) grpcAnswer(resp *healthpb.HealthCheckResponse, err error) {
	r.do(func(now float64) {
		g := r.a.GRPC
		g.DoneMs = now
		if err != nil {
			st := status.Convert(err)
			g.Code, g.Message = st.Code().String(), r.t.text(st.Message())
			return
		}
		g.Status = resp.GetStatus().String()
	})
}

// addLine appends "name: value" to lines as t keeps text, unless lines is
// full: then it counts it in leftOut.
func (t *Transcript) addLine(lines []string, leftOut int, name, value string) ([]string, int) {
	if len(lines) == TranscriptHeaderLines {
		return lines, leftOut + 1
	}
	return append(lines, t.text(name+": "+value)), leftOut
}

// text is s from the request or the target (or quoting them) as t keeps
// it: redacted, then at most bounded.Message bytes, escaped, on one line
// (a certificate's subject, say, could otherwise forge a line of Write's).
func (t *Transcript) text(s string) string {
	return strings.ReplaceAll(t.excerpt(s), "\n", `\n`)
}

// excerpt is text keeping its line breaks: a body excerpt.
func (t *Transcript) excerpt(s string) string {
	return printable(bounded.String(t.redact(s), bounded.Message))
}

func (t *Transcript) redact(s string) string {
	if t.Redact == nil {
		return s
	}
	return t.Redact(s)
}

// printable escapes what a terminal would act on or cannot show: control
// characters (ANSI escapes among them) and other non-printable runes, and
// bytes that are not UTF-8. Newlines and tabs are kept.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || !shown(r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shown(r):
			b.WriteString(s[i : i+size])
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// shown says if printable keeps r as it is.
func shown(r rune) bool { return unicode.IsPrint(r) || r == '\n' || r == '\t' }

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (c Cause) String() string {
	switch c {
	case CauseNone:
		return "none"
	case CauseRefused:
		return "refused"
	case CauseTimeout:
		return "timeout"
	case CauseNetwork:
		return "network"
	case CauseStatus:
		return "status"
	case CauseBody:
		return "body"
	case CauseNotServing:
		return "notServing"
	default:
		return fmt.Sprintf("Cause(%d)", int(c))
	}
}
