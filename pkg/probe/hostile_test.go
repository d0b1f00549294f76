package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// settled waits until goroutines and fds are back to (about) a baseline:
// the probes' connections and goroutines are gone, not parked somewhere.
func settled(t *testing.T, goroutines, fds int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return runtime.NumGoroutine() <= goroutines+2 && openFDs(t) <= fds+2
	}, 10*time.Second, 10*time.Millisecond, "leak: %d goroutines (was %d), %d fds (was %d)", runtime.NumGoroutine(), goroutines, openFDs(t), fds)
}

// Hostile targets end as a failure (or a success, for an endless body: its
// first 10 KiB are read) within the probe's timeout, and cost nothing once
// the probes are over.
func TestHostileTargets(t *testing.T) {
	// Long enough that 20 probes at once under -race on two loaded cores get
	// their headers from a healthy-but-endless server; the hanging cases take
	// exactly this long.
	const timeout = time.Second
	const probes = 20
	stop := make(chan struct{})
	var servers sync.WaitGroup
	defer servers.Wait()
	defer close(stop)

	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hang.Close()
	drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer drip.Close()
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 4096))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	defer loop.Close()
	// 192.0.2.1 is TEST-NET-1: never dialled, since other hosts are not followed.
	elsewhere := httptest.NewServer(http.RedirectHandler("http://192.0.2.1/", http.StatusFound))
	defer elsewhere.Close()
	silentTCP, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silentTCP.Close()
	var heldMu sync.Mutex
	var held []net.Conn // accepted, never read
	released := false
	release := func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
		held, released = nil, true
	}
	defer release()
	servers.Go(func() {
		for {
			c, err := silentTCP.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			if released {
				// A probe's connection can still wait in the backlog
				// when its probe (connect and close) is over.
				c.Close()
			} else {
				held = append(held, c)
			}
			heldMu.Unlock()
		}
	})
	hangingGRPC := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hangingHealth{}) })

	httpProbe := func(url string) func() (Result, string, error) {
		return func() (Result, string, error) {
			host, port := target(t, url)
			req, err := NewRequest("http", host, port, "/", nil, testUA)
			require.NoError(t, err)
			return split(NewHTTPGet(NewDialer()).Probe(context.Background(), req, timeout, nil))
		}
	}
	tests := []struct {
		name    string
		run     func() (Result, string, error)
		want    Result
		wantErr bool
		after   func() // releases what the test server holds
	}{
		{name: "HTTP server that never answers", run: httpProbe(hang.URL), want: Failure},
		// The headers came, the body timed out: as in kubelet, an error
		// (the worker throws such a result away).
		{name: "HTTP body a byte at a time", run: httpProbe(drip.URL), want: Failure, wantErr: true},
		{name: "HTTP body without end", run: httpProbe(endless.URL), want: Success},
		// kubelet's redirect rules: the same host 10 times at most (then a
		// failure), another host never (a warning).
		{name: "HTTP redirect loop", run: httpProbe(loop.URL), want: Failure},
		{name: "HTTP redirect to another host", run: httpProbe(elsewhere.URL), want: Warning},
		{name: "TCP that accepts and never reads", run: func() (Result, string, error) {
			return split(TCP(context.Background(), NewDialer(), silentTCP.Addr().String(), timeout, nil))
		}, want: Success, after: release},
		{name: "gRPC that never answers", run: func() (Result, string, error) {
			return split(GRPCHealth(context.Background(), NewDialer(), hangingGRPC, "", testUA, timeout, nil))
		}, want: Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			goroutines, fds := runtime.NumGoroutine(), openFDs(t)
			var wg sync.WaitGroup
			for range probes {
				wg.Go(func() {
					start := time.Now()
					r, out, err := tt.run()
					assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
					assert.Equal(t, tt.want, r, out)
					assert.Less(t, time.Since(start), timeout+time.Second, "ended within its timeout")
					if tt.want == Success {
						assert.LessOrEqual(t, len(out), MaxBody)
					}
				})
			}
			wg.Wait()
			if tt.after != nil {
				tt.after()
			}
			settled(t, goroutines, fds)
		})
	}
}
