package probe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// maxOutput is the most any output but a body may take: bounded.Message
// and the marker that says how much was cut.
const maxOutput = bounded.Message + 64

// rawHTTP serves every connection with response, written as it is after
// the request has been read, and returns its address.
func rawHTTP(t *testing.T, response string) (host string, port int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				c.Write([]byte(response))
				// Closing with the probe's bytes unread would reset the
				// connection under the response: wait for the probe to go.
				c.Read(make([]byte, 1))
			}()
		}
	}()
	return "127.0.0.1", l.Addr().(*net.TCPAddr).Port
}

// A response's status line and headers are held up to MaxResponseHeader,
// not Go's 1 MiB: beyond, the probe fails; and what Go quotes of a
// malformed response reaches the output cut.
func TestHTTPResponseHeadersBounded(t *testing.T) {
	tests := []struct {
		name       string
		response   string
		wantOutput string
	}{
		{
			name:       "100 KiB of headers",
			response:   "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("h", 100<<10) + "\r\nContent-Length: 2\r\n\r\nok",
			wantOutput: "server response headers exceeded 65536 bytes",
		},
		{
			name:       "5 MiB status line",
			response:   "HTTP/1.1 200 " + strings.Repeat("s", 5<<20) + "\r\n\r\n",
			wantOutput: "server response headers exceeded 65536 bytes",
		},
		{
			name:       "60 KiB malformed status line, quoted by Go",
			response:   "HTTP/1.1 " + strings.Repeat("x", 60<<10) + "\r\n\r\n",
			wantOutput: `malformed HTTP status code "xxx`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, port := rawHTTP(t, tt.response)
			req, err := NewRequest("http", host, port, "/", nil, testUA)
			require.NoError(t, err)
			v, err := NewHTTPGet(NewDialer()).Probe(context.Background(), req, 5*time.Second, nil)
			require.NoError(t, err)
			assert.Equal(t, Failure, v.Result)
			assert.Equal(t, CauseNetwork, v.Cause)
			assert.Contains(t, v.Output, tt.wantOutput)
			assert.LessOrEqual(t, len(v.Output), maxOutput)
		})
	}
}

// bigAnswer answers SERVING with a megabyte the health message does not
// define (a field a client skips).
type bigAnswer struct {
	healthpb.UnimplementedHealthServer
}

func (bigAnswer) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	extra := protowire.AppendTag(nil, 99, protowire.BytesType)
	resp.ProtoReflect().SetUnknown(protowire.AppendBytes(extra, make([]byte, 1<<20)))
	return resp, nil
}

// chatty answers with a status whose message is as long as it is told.
type chatty struct {
	healthpb.UnimplementedHealthServer
	code    codes.Code
	message string
}

func (c chatty) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(c.code, c.message)
}

// A gRPC server's headers and answer are bounded (GRPCMaxHeaderList,
// GRPCMaxMessage, not gRPC's 16 MiB and 4 MiB), and its status message
// reaches the output cut.
func TestGRPCBounds(t *testing.T) {
	serve := func(h healthpb.HealthServer) string {
		return startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, h) })
	}
	tests := []struct {
		name       string
		addr       string
		wantPrefix string
		wantCause  Cause
	}{
		{"8 KiB status message", serve(chatty{code: codes.NotFound, message: strings.Repeat("m", 8<<10)}),
			"error: health rpc probe failed: rpc error: code = NotFound desc = mmm", CauseNetwork},
		{"8 KiB message of a server without health", serve(chatty{code: codes.Unimplemented, message: strings.Repeat("u", 8<<10)}),
			"error: this server does not implement the grpc health protocol (grpc.health.v1.Health): uuu", CauseNotServing},
		{"100 KiB status message: over the header bound", serve(chatty{code: codes.NotFound, message: strings.Repeat("m", 100<<10)}),
			"error: health rpc probe failed: rpc error: code = ", CauseNetwork},
		{"a 1 MiB answer: over the message bound", serve(bigAnswer{}),
			"error: health rpc probe failed: rpc error: code = ResourceExhausted desc = grpc: received message larger than max (", CauseNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := GRPCHealth(context.Background(), NewDialer(), tt.addr, "", testUA, 5*time.Second, nil)
			require.NoError(t, err)
			assert.Equal(t, Failure, v.Result, v.Output)
			assert.Equal(t, tt.wantCause, v.Cause, v.Output)
			assert.True(t, strings.HasPrefix(v.Output, tt.wantPrefix), "output %.300q", v.Output)
			assert.LessOrEqual(t, len(v.Output), maxOutput)
		})
	}
}

// A body regexp that would take minutes over a 10 KiB body (RE2 is linear,
// but in the body times the compiled regexp, which repetition counts
// multiply: 991 bytes here) ends with the probe's timeout, as a timeout;
// the probe does not run on, nor leave the match running.
func TestHTTPBodyRegexpEndsWithTheTimeout(t *testing.T) {
	body := strings.Repeat("a", MaxBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
	defer srv.Close()
	host, port := target(t, srv.URL)
	slow := regexp.MustCompile(strings.Repeat(`\pL{1,1000}`, 90) + "x")
	req, err := NewRequest("http", host, port, "/", nil, testUA)
	require.NoError(t, err)
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	type result struct {
		v   Verdict
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := NewHTTPGet(NewDialer()).ProbeChecked(context.Background(), req, time.Second, HTTPCheck{BodyMustMatch: slow}, nil)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		v := r.v
		require.NoError(t, r.err)
		assert.Equal(t, Failure, v.Result)
		assert.Equal(t, CauseTimeout, v.Cause)
		assert.Equal(t, "HTTP probe failed: matching the body did not finish within 1s", v.Output)
	case <-time.After(30 * time.Second):
		t.Fatal("the probe ran on long after its 1s timeout: the match was not stopped")
	}
	settled(t, goroutines, fds)

	// A regexp that matches in time still decides.
	v, err := NewHTTPGet(NewDialer()).ProbeChecked(context.Background(), req, time.Second, HTTPCheck{BodyMustMatch: regexp.MustCompile(`a{100}$`)}, nil)
	require.NoError(t, err)
	assert.Equal(t, Success, v.Result, v.Output)
}

// An error a probe returns (it could not run) has a bounded text, and the
// caller still tells what it is.
func TestReturnedErrorsBounded(t *testing.T) {
	long := &url.Error{Op: "Get", URL: "http://10.0.0.1/" + strings.Repeat("r", 60<<10), Err: agentError(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)})}
	err := couldNotProbe(long)
	assert.LessOrEqual(t, len(err.Error()), maxOutput)
	assert.ErrorIs(t, err, ErrAgentResource)
	assert.Equal(t, "EMFILE", ResourceCause(err))
	assert.NotErrorIs(t, err, ErrNetNS)
	var cut *cutError
	require.True(t, errors.As(err, &cut))
	assert.Nil(t, errors.Unwrap(err), "the long error is not kept")

	short := agentError(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.ENFILE)})
	assert.Same(t, short, couldNotProbe(short))
}
