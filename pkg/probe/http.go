package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// MaxBody is how much of a response body is read: kubelet's
// maxRespBodyLength. A longer body is truncated, not an error.
const MaxBody = 10 * 1024

// MaxResponseHeader is the most a response's status line and headers may
// take; a longer one is a Failure. kubelet's transport leaves Go's 1 MiB,
// which lets each probed target make the agent hold a megabyte; a health
// endpoint's headers fit in far less.
const MaxResponseHeader = 64 * 1024

// HTTPGet performs kubelet's HTTP probes. One HTTPGet serves every probe:
// its transport never reuses connections, so sharing it costs nothing and
// saves building a transport per probe.
type HTTPGet struct {
	transport *http.Transport
}

// NewHTTPGet returns an HTTP prober configured as kubelet's: no proxy (the
// node's proxy variables are ignored), no keep-alive, no compression, TLS
// without verification, HTTP/2 when TLS negotiates it (kubelet's
// SetTransportDefaults configures HTTP/2); response headers are bounded by
// MaxResponseHeader. Every connection, redirects' included, is d's.
func NewHTTPGet(d *Dialer) *HTTPGet {
	nd := d.netDialer()
	return &HTTPGet{transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, nd, network, addr) // the request's context: WithNetNS
		},
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet does not verify probe targets.
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		// A custom DialContext turns Go's automatic HTTP/2 off.
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: MaxResponseHeader,
	}}
}

// NewRequest builds a probe request as kubelet's NewRequestForHTTPGetAction
// does: the path is parsed as a URL (so a query survives) or, if it does
// not parse, used as it is; User-Agent and Accept get kubelet's defaults
// unless the headers name them (an empty value removes the header); a Host
// header sets the virtual host without changing the address dialled.
func NewRequest(scheme, host string, port int, path string, headers http.Header, userAgent string) (*http.Request, error) {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if headers == nil {
		headers = http.Header{}
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", userAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// Probe sends req and judges the response: 2xx is Success with the body as
// output; 3xx (a redirect that was not followed) is Warning; anything else
// is Failure. Redirects to the same host name are followed, up to 10;
// redirects to another host are not. A transport error or timeout is a
// Failure whose output is the error; failing to read the body, or a
// connection the probe could not make on its side (cannotProbe), is an
// error. With a transcript (nil: none), it records the exchange there.
func (p *HTTPGet) Probe(ctx context.Context, req *http.Request, timeout time.Duration, tr *Transcript) (Verdict, error) {
	return p.ProbeChecked(ctx, req, timeout, HTTPCheck{}, tr)
}

// HTTPCheck replaces kubelet's verdict rules where set (blackbox_exporter's
// options); its zero value is kubelet's behaviour.
type HTTPCheck struct {
	// ValidStatusCodes, when set, are the codes that succeed: every other
	// fails, redirects not followed included.
	ValidStatusCodes []int
	// BodyMustMatch, when set, fails a response whose body (its first
	// MaxBody bytes) does not match.
	BodyMustMatch *regexp.Regexp
}

// BodyMismatch starts the output of a probe failed by HTTPCheck.BodyMustMatch.
const BodyMismatch = "HTTP probe failed: the body does not match "

// ProbeChecked is Probe with check's rules.
func (p *HTTPGet) ProbeChecked(ctx context.Context, req *http.Request, timeout time.Duration, check HTTPCheck, tr *Transcript) (Verdict, error) {
	client := &http.Client{Timeout: timeout, Transport: p.transport, CheckRedirect: SameHostRedirects}
	rec := tr.beginHTTP(req, timeout)
	ctx, client.CheckRedirect = rec.httpTrace(ctx, req, client.CheckRedirect)
	v, err := doHTTP(ctx, client, req, timeout, check, rec)
	rec.end(v, err)
	return v, err
}

// doHTTP is ProbeChecked's probe, recorded by rec unless it is nil.
func doHTTP(ctx context.Context, client *http.Client, req *http.Request, timeout time.Duration, check HTTPCheck, rec *recording) (Verdict, error) {
	deadline := time.Now().Add(timeout)
	resp, err := client.Do(req.WithContext(ctx))
	rec.response(resp, err)
	switch {
	case cannotProbe(err):
		return failure(CauseNetwork, ""), couldNotProbe(err)
	case err != nil:
		return failure(transportCause(err), bounded.String(RedactCredentials(err.Error(), req.Header), bounded.Message)), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	rec.body(b, err)
	if err != nil {
		return failure(CauseNetwork, ""), couldNotProbe(fmt.Errorf("read response body: %w", err))
	}
	body := RedactCredentials(string(b), req.Header)
	statusOK := resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest // kubelet's rule
	if len(check.ValidStatusCodes) > 0 {
		statusOK = slices.Contains(check.ValidStatusCodes, resp.StatusCode)
	}
	if !statusOK {
		// The body is left out on purpose (kubernetes#99425).
		return failure(CauseStatus, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)), nil
	}
	if re := check.BodyMustMatch; re != nil {
		switch matched, finished := matchBefore(ctx, deadline, re, body); {
		case !finished:
			return failure(CauseTimeout, fmt.Sprintf("HTTP probe failed: matching the body did not finish within %v", timeout)), nil
		case !matched:
			return failure(CauseBody, bounded.String(BodyMismatch+strconv.Quote(re.String()), bounded.Message)), nil
		}
	}
	if len(check.ValidStatusCodes) > 0 || resp.StatusCode < http.StatusMultipleChoices {
		return success(body), nil
	}
	// A redirect not followed.
	return Verdict{Result: Warning, Output: "Probe terminated redirects, Response body: " + body}, nil
}

// matchBefore matches body against re unless deadline comes (or ctx ends)
// first. The size of the regexp does not bound the work: RE2's matching is
// linear in the body times the compiled regexp, which repetition counts
// multiply, and 1 KiB of regexp can take minutes over a 10 KiB body. So
// the match reads the body through a reader that ends it at the deadline:
// the work stops with the probe (within one step, one rune of the body),
// on the probe's own goroutine.
func matchBefore(ctx context.Context, deadline time.Time, re *regexp.Regexp, body string) (matched, finished bool) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r := &stoppableReader{done: ctx.Done(), body: strings.NewReader(body)}
	matched = re.MatchReader(r)
	return matched, !r.stopped
}

// stoppableReader reads runes until done is closed, then says EOF.
type stoppableReader struct {
	done    <-chan struct{}
	body    *strings.Reader
	stopped bool
}

func (r *stoppableReader) ReadRune() (rune, int, error) {
	select {
	case <-r.done:
		r.stopped = true
		return 0, 0, io.EOF
	default:
		return r.body.ReadRune()
	}
}

// SameHostRedirects follows a redirect only if it stays on the original
// host name (any port or scheme), as kubelet does with
// followNonLocalRedirects off.
func SameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
