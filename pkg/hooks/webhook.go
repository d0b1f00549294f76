package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

const (
	webhookTimeout = 5 * time.Second // per try, the answer's body included
	webhookTries   = 3
	// maxAnswer is how much of an answer is read (and so drained for the
	// connection to be used again); maxAnswerShown how much a failure
	// quotes.
	maxAnswer      = 64 << 10
	maxAnswerShown = 512
)

// newWebhookClient returns a client that never follows a redirect and
// bounds every step of a try.
func newWebhookClient() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: webhookTimeout, KeepAlive: 30 * time.Second}).DialContext
	transport.TLSHandshakeTimeout = webhookTimeout
	transport.ResponseHeaderTimeout = webhookTimeout
	transport.MaxResponseHeaderBytes = maxAnswer
	transport.MaxIdleConnsPerHost = maxInFlight
	return &http.Client{
		Transport: transport,
		Timeout:   webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the 3xx is the answer
		},
	}
}

// post sends body, trying again after a network error or a 5xx.
func (h *Hooks) post(ctx context.Context, _ Transition, body []byte) ([]any, error) {
	kv := []any{"url", h.webhookShown}
	var err error
	for try := range webhookTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return kv, fmt.Errorf("--webhook %s: %w (after: %w)", h.webhookShown, context.Cause(ctx), err)
			case <-time.After(h.backoff << (try - 1)):
			}
		}
		var retry bool
		if retry, err = h.postOnce(ctx, body); !retry {
			break
		}
	}
	if err != nil {
		return kv, err
	}
	return nil, nil
}

func (h *Hooks) postOnce(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.webhook, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("--webhook %s: %w", h.webhookShown, redactError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("--webhook: %w", redactError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	switch {
	case resp.StatusCode >= 500:
		return true, fmt.Errorf("--webhook %s answered %s%s", h.webhookShown, resp.Status, quote(answer))
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		to := "nowhere"
		if loc := resp.Header.Get("Location"); loc != "" {
			to = RedactURL(loc)
		}
		return false, fmt.Errorf("--webhook %s answered %s, to %s: redirects are not followed", h.webhookShown, resp.Status, to)
	case resp.StatusCode >= 300 || resp.StatusCode < 200:
		return false, fmt.Errorf("--webhook %s answered %s%s", h.webhookShown, resp.Status, quote(answer))
	}
	return false, nil
}

// quote returns the start of an answer's body for an error, escaped.
func quote(answer []byte) string {
	answer = bytes.TrimSpace(answer)
	if len(answer) == 0 {
		return ""
	}
	return fmt.Sprintf(": %q", bounded.String(string(answer), maxAnswerShown))
}

// RedactURL returns raw as scheme://host/path: without its user, password,
// query and fragment, which may carry secrets. A raw that does not parse
// gives a placeholder, never raw.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return shown.String()
}

// redactError redacts the URL of every *url.Error in err's chain: net/http
// quotes the whole URL, user, password and query, in its errors. Call it
// before wrapping err: a wrapper made with fmt.Errorf keeps the text of
// then.
func redactError(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ue, ok := e.(*url.Error); ok {
			ue.URL = RedactURL(ue.URL)
		}
	}
	return err
}
