package netprobe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// privateNetNS makes a network namespace with its loopback up and returns
// its path and a function that listens on 127.0.0.1 inside it; everything
// ends with the test.
func privateNetNS(t *testing.T) (path string, listen func() net.Listener) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	type req struct{ reply chan net.Listener }
	reqs := make(chan req)
	ready := make(chan error, 1)
	stop := make(chan struct{})
	var tid int
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		tid = unix.Gettid()
		ready <- bringLoopbackUp()
		for {
			select {
			case r := <-reqs:
				l, err := net.Listen("tcp", "127.0.0.1:0") // created on this thread: in the namespace
				if err != nil {
					l = nil
				}
				r.reply <- l
			case <-stop:
				return
			}
		}
	}()
	require.NoError(t, <-ready)
	t.Cleanup(func() { close(stop) })
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), tid), func() net.Listener {
		r := req{reply: make(chan net.Listener)}
		reqs <- r
		l := <-r.reply
		require.NotNil(t, l)
		t.Cleanup(func() { l.Close() })
		return l
	}
}

func bringLoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Probes given a pod's network namespace reach what only its loopback
// serves; without it, the same address is the node's, where nothing
// listens. The threads that entered the namespace are back in the node's.
func TestProbesFromAPodsNetworkNamespace(t *testing.T) {
	path, listen := privateNetNS(t)
	web := listen()
	go http.Serve(web, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("inside")) }))
	rpc := listen()
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(rpc)
	t.Cleanup(srv.Stop)
	plain := listen()

	inside := WithNetNS(context.Background(), path)
	httpProbe := func(ctx context.Context) (Result, string, error) {
		req, err := NewRequest("http", "127.0.0.1", web.Addr().(*net.TCPAddr).Port, "/", nil, testUA)
		require.NoError(t, err)
		return split(NewHTTPGet().Probe(ctx, req, time.Second))
	}
	r, out, err := httpProbe(inside)
	require.NoError(t, err)
	assert.Equal(t, Success, r, out)
	r, _, _ = split(TCP(inside, plain.Addr().String(), time.Second))
	assert.Equal(t, Success, r)
	r, out, _ = split(GRPCHealth(inside, rpc.Addr().String(), "", testUA, time.Second))
	assert.Equal(t, Success, r, out)

	// The node's 127.0.0.1 at the same port: nothing there.
	r, out, _ = split(TCP(context.Background(), plain.Addr().String(), time.Second))
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "connection refused")

	home, err := os.Readlink("/proc/thread-self/ns/net")
	require.NoError(t, err)
	for range 20 { // the threads used for the namespace went back home
		runtime.LockOSThread()
		now, err := os.Readlink("/proc/thread-self/ns/net")
		runtime.UnlockOSThread()
		require.NoError(t, err)
		assert.Equal(t, home, now)
		runtime.Gosched()
	}

	// A namespace that cannot be entered: the probe did not run (an error,
	// thrown away), whatever the kind.
	gone := WithNetNS(context.Background(), "/nonexistent/ns")
	_, _, err = httpProbe(gone)
	assert.ErrorIs(t, err, ErrNetNS)
	_, _, err = split(TCP(gone, plain.Addr().String(), time.Second))
	assert.ErrorIs(t, err, ErrNetNS)
	_, _, err = split(GRPCHealth(gone, rpc.Addr().String(), "", testUA, time.Second))
	assert.ErrorIs(t, err, ErrNetNS)
}
