package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

// MaxAnswer bounds what the client reads of one answer (the pod list of
// thousands of pods is a few tens of MiB).
const MaxAnswer = 256 << 20

// callTimeout bounds a call and the reading of its answer (not a stream).
const callTimeout = 10 * time.Second

// Client asks a running agent over its state API, as the commands do:
// one typed method per route (routes.go), as client-go sits beside the
// API's types. Its errors say what to check, in words for the user.
type Client struct {
	server string // as a URL (serverURL)
	base   string // what paths are appended to
	http   *http.Client
}

// NewClient returns a client of the agent at server, its --listen
// address as a URL: http://host:port, https://… (a user:password in it is
// sent as basic auth, as curl does; the CA comes from the system or
// SSL_CERT_FILE), or unix:///path for a unix socket; or as --listen takes
// it: host:port, :port (this host). check, when not nil, vets each
// connection before anything is sent on it (the CLI's: is it the agent?).
func NewClient(server string, check func(net.Conn) error) *Client {
	c := &Client{server: serverURL(server)}
	c.base = strings.TrimSuffix(c.server, "/")
	var d net.Dialer
	dial := d.DialContext
	if socket, ok := strings.CutPrefix(c.server, "unix://"); ok {
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", socket) }
		c.base = "http://localhost"
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil || check == nil {
			return conn, err
		}
		if err := check(conn); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
	c.http = &http.Client{Transport: transport}
	return c
}

// Pods is GET /api/v1/pods.
func (c *Client) Pods(ctx context.Context) (PodList, error) {
	var list PodList
	return list, c.call(ctx, http.MethodGet, PathPods, nil, &list)
}

// Pod is GET /api/v1/pods/{namespace}/{name}; a pod the agent does not
// know is a StatusError of 404.
func (c *Client) Pod(ctx context.Context, namespace, name string) (Pod, error) {
	var p Pod
	return p, c.call(ctx, http.MethodGet, PodPath(namespace, name, ""), nil, &p)
}

// History is GET /api/v1/pods/{namespace}/{name}/history.
func (c *Client) History(ctx context.Context, namespace, name string) (History, error) {
	var h History
	return h, c.call(ctx, http.MethodGet, PodPath(namespace, name, podHistory), nil, &h)
}

// Restarts is GET /api/v1/pods/{namespace}/{name}/restarts.
func (c *Client) Restarts(ctx context.Context, namespace, name string) (Restarts, error) {
	var r Restarts
	return r, c.call(ctx, http.MethodGet, PodPath(namespace, name, podRestarts), nil, &r)
}

// Gates is GET /api/v1/gates.
func (c *Client) Gates(ctx context.Context) (GateList, error) {
	var list GateList
	return list, c.call(ctx, http.MethodGet, PathGates, nil, &list)
}

// SetGate is PUT /api/v1/pods/{namespace}/{name}/gates/{condition}.
func (c *Client) SetGate(ctx context.Context, namespace, name, condition string, req GateRequest) (GateAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return GateAnswer{}, err
	}
	var a GateAnswer
	return a, c.call(ctx, http.MethodPut, GatePath(namespace, name, condition), body, &a)
}

// UnsetGate is DELETE /api/v1/pods/{namespace}/{name}/gates/{condition}.
func (c *Client) UnsetGate(ctx context.Context, namespace, name, condition string) (GateAnswer, error) {
	var a GateAnswer
	return a, c.call(ctx, http.MethodDelete, GatePath(namespace, name, condition), nil, &a)
}

// Kills is GET /api/v1/kills.
func (c *Client) Kills(ctx context.Context) (killbudget.Status, error) {
	var st killbudget.Status
	return st, c.call(ctx, http.MethodGet, PathKills, nil, &st)
}

// PauseKills is POST /api/v1/kills/pause.
func (c *Client) PauseKills(ctx context.Context, req PauseRequest) (killbudget.Status, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return killbudget.Status{}, err
	}
	var st killbudget.Status
	return st, c.call(ctx, http.MethodPost, PathKillsPause, body, &st)
}

// ResumeKills is POST /api/v1/kills/resume.
func (c *Client) ResumeKills(ctx context.Context) (killbudget.Status, error) {
	var st killbudget.Status
	return st, c.call(ctx, http.MethodPost, PathKillsResume, []byte("{}"), &st)
}

// Node is GET /api/v1/node; an agent that keeps nothing on the node (no
// pod sync) answers a StatusError of 404.
func (c *Client) Node(ctx context.Context) (NodeReport, error) {
	var r NodeReport
	return r, c.call(ctx, http.MethodGet, PathNode, nil, &r)
}

// Events is GET /api/v1/events: those since since (zero: all kept).
func (c *Client) Events(ctx context.Context, since time.Time) (EventList, error) {
	var list EventList
	return list, c.call(ctx, http.MethodGet, PathEvents+"?"+eventsQuery(since).Encode(), nil, &list)
}

// WatchEvents calls handle with each event of the agent's event stream
// (GET /api/v1/events?watch=1): those since since (zero: only new ones),
// then each new one, until ctx is done (nil) or the stream ends (an
// error), or handle returns an error (that one).
func (c *Client) WatchEvents(ctx context.Context, since time.Time, handle func(events.Event) error) error {
	query := eventsQuery(since)
	query.Set("watch", "1")
	resp, err := c.do(ctx, http.MethodGet, PathEvents+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			continue
		}
		if err := handle(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream from %s: %w", redactURL(c.server), err)
	}
	return errors.New("the agent closed the event stream (did it stop?)")
}

func eventsQuery(since time.Time) url.Values {
	query := url.Values{}
	if !since.IsZero() {
		query.Set("since", since.UTC().Format(time.RFC3339))
	}
	return query
}

// call sends a request of method to path (do), within callTimeout, and
// decodes the agent's JSON answer into v.
func (c *Client) call(ctx context.Context, method, path string, body []byte, v any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read the agent's answer: %w", err)
	}
	return nil
}

// do sends a request of method to path (a JSON body, if body is not nil)
// and returns the response of a 200, its body bounded by MaxAnswer;
// anything else is an error that says what to check.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var reqBody io.Reader
	if body != nil {
		reqBody = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reqBody)
	if err != nil {
		return nil, fmt.Errorf("--server %s: %w", redactURL(c.server), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // its URL may carry a password
		}
		return nil, fmt.Errorf("cannot reach the agent at %s: %w (is `cri-prober run` running? set --server to its --listen address)", redactURL(c.server), err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		text := strings.TrimSpace(string(b))
		var answer struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &answer) == nil && answer.Error != "" {
			text = answer.Error // the API's errors: {"error":"…"}
		}
		// What a server sent is shown, never obeyed: one line, escape
		// sequences escaped.
		return nil, &StatusError{Code: resp.StatusCode, err: fmt.Errorf("agent at %s answered %s: %s", redactURL(c.server), Printable(resp.Status), Printable(text))}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{&limitedBody{r: resp.Body, left: MaxAnswer}, resp.Body}
	return resp, nil
}

// StatusError is an agent's answer other than 200.
type StatusError struct {
	Code int
	err  error
}

func (e *StatusError) Error() string { return e.err.Error() }

// serverURL takes an address as the agent's --listen may be written: a
// URL, or host:port (http), or :port (this host).
func serverURL(server string) string {
	if strings.Contains(server, "://") || server == "" {
		return server
	}
	if strings.HasPrefix(server, ":") {
		server = "127.0.0.1" + server
	}
	return "http://" + server
}

// redactURL is server without the password it may carry.
func redactURL(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.User == nil {
		return server
	}
	return u.Redacted()
}

// limitedBody bounds what is read of an answer and says when the bound
// cut it, rather than ending it quietly.
type limitedBody struct {
	r    io.Reader
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, fmt.Errorf("the agent's answer is over %d MiB: not read further", MaxAnswer>>20)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
