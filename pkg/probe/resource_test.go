package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The agent's own shortages, however deeply wrapped, get a bounded label;
// the target's refusals and timeouts get none.
func TestResourceCause(t *testing.T) {
	dialErr := func(op string, errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: "http://10.0.0.1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError(op, errno)}}
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{dialErr("socket", syscall.EMFILE), "EMFILE"},
		{dialErr("socket", syscall.ENFILE), "ENFILE"},
		{dialErr("connect", syscall.EADDRNOTAVAIL), "EADDRNOTAVAIL"},
		{dialErr("socket", syscall.ENOBUFS), "ENOBUFS"},
		{dialErr("socket", syscall.ENOMEM), "ENOMEM"},
		{dialErr("connect", syscall.ECONNREFUSED), ""},
		{dialErr("connect", syscall.ETIMEDOUT), ""},
		{context.DeadlineExceeded, ""},
		{nil, ""},
	} {
		assert.Equal(t, tt.want, ResourceCause(tt.err), "%v", tt.err)
		wrapped := agentError(tt.err)
		assert.Equal(t, tt.want != "", errors.Is(wrapped, ErrAgentResource), "%v", tt.err)
		if tt.want != "" {
			assert.Equal(t, tt.want, ResourceCause(wrapped))
			assert.Contains(t, wrapped.Error(), "("+tt.want+"): ")
			assert.Same(t, wrapped, agentError(wrapped), "wrapped once")
		}
	}
	assert.Equal(t, "cannot probe: agent out of file descriptors (EMFILE): dial tcp: socket: too many open files",
		agentError(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}).Error())
}

// An agent out of file descriptors cannot probe: each kind of network
// probe returns ErrAgentResource (thrown away, never a failure counted
// towards a restart) instead of blaming the target, and probes again once
// it has descriptors. The limit is the whole process's, so this runs in a
// process of its own.
func TestAgentOutOfFileDescriptors(t *testing.T) {
	if !inChild(t) {
		runChild(t, nil, nil)
		return
	}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer web.Close()
	rpc := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	host, port := target(t, web.URL)
	// The successes around the EMFILE part get a long timeout, so as not to
	// time out on a loaded machine; the EMFILE part a short one (were an
	// error not final, gRPC would retry its dial until the deadline).
	probes := map[string]func(timeout time.Duration) (Verdict, error){
		"http": func(timeout time.Duration) (Verdict, error) {
			req, err := NewRequest("http", host, port, "/", nil, testUA)
			require.NoError(t, err)
			return NewHTTPGet(NewDialer()).Probe(context.Background(), req, timeout, nil)
		},
		"tcp": func(timeout time.Duration) (Verdict, error) {
			return TCP(context.Background(), NewDialer(), web.Listener.Addr().String(), timeout, nil)
		},
		"grpc": func(timeout time.Duration) (Verdict, error) {
			return GRPCHealth(context.Background(), NewDialer(), rpc, "", testUA, timeout, nil)
		},
	}
	for kind, probe := range probes {
		v, err := probe(10 * time.Second)
		require.NoError(t, err, kind)
		require.Equal(t, Success, v.Result, "%s: %s", kind, v.Output)
	}

	var limit syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit))
	lowered := limit
	lowered.Cur = uint64(openFDs(t) + 64)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered))
	var filler []*os.File
	release := func() {
		for _, f := range filler {
			f.Close()
		}
		filler = nil
	}
	defer release()
	// Exhausted again before each probe: a socket an earlier probe closed
	// late (its blocking close) would otherwise let the next one dial.
	exhaust := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				require.ErrorIs(t, err, syscall.EMFILE)
				return
			}
			filler = append(filler, f)
			require.Less(t, len(filler), 1000, "the lowered limit does not hold")
		}
	}

	for kind, probe := range probes {
		exhaust()
		// Time for the first dial to meet EMFILE on a loaded machine (a
		// gRPC dial runs on the client's own goroutines): it answers at
		// once when it does.
		v, err := probe(5 * time.Second)
		require.ErrorIs(t, err, ErrAgentResource, "%s: %v %q", kind, v.Result, v.Output)
		assert.Equal(t, "EMFILE", ResourceCause(err), kind)
		assert.Contains(t, err.Error(), "agent out of file descriptors (EMFILE)", kind)
		t.Logf("%s: %v", kind, err)
	}

	release()
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit))
	for kind, probe := range probes {
		v, err := probe(10 * time.Second)
		require.NoError(t, err, kind)
		assert.Equal(t, Success, v.Result, "%s: %s", kind, v.Output)
	}
}
