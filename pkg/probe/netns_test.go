package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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
// its path and a function that runs fn on a thread inside it (so that the
// sockets fn makes are the namespace's); everything ends with the test.
func privateNetNS(t *testing.T) (path string, inside func(fn func())) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	calls := make(chan func())
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
			case fn := <-calls:
				fn()
			case <-stop:
				return
			}
		}
	}()
	require.NoError(t, <-ready)
	t.Cleanup(func() { close(stop) })
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), tid), func(fn func()) {
		done := make(chan struct{})
		calls <- func() { defer close(done); fn() }
		<-done
	}
}

// listenIn listens on address inside the namespace until the test ends.
func listenIn(t *testing.T, inside func(func()), network, address string) net.Listener {
	t.Helper()
	var l net.Listener
	var err error
	inside(func() { l, err = net.Listen(network, address) })
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// homeNetNS is the process's network namespace, read before a test made
// another (and, on the thread that made it, /proc/self might show that).
var homeNetNS, _ = os.Readlink("/proc/thread-self/ns/net")

// threadsAtHome checks that the threads Go hands out are in the process's
// network namespace: those used for a pod's went back.
func threadsAtHome(t *testing.T) {
	t.Helper()
	require.NotEmpty(t, homeNetNS)
	for range 20 {
		runtime.LockOSThread()
		now, err := os.Readlink("/proc/thread-self/ns/net")
		runtime.UnlockOSThread()
		require.NoError(t, err)
		assert.Equal(t, homeNetNS, now)
		runtime.Gosched()
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
	path, inNS := privateNetNS(t)
	listen := func() net.Listener { return listenIn(t, inNS, "tcp", "127.0.0.1:0") }
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
		return split(NewHTTPGet(NewDialer()).Probe(ctx, req, time.Second, nil))
	}
	r, out, err := httpProbe(inside)
	require.NoError(t, err)
	assert.Equal(t, Success, r, out)
	r, _, _ = split(TCP(inside, NewDialer(), plain.Addr().String(), time.Second, nil))
	assert.Equal(t, Success, r)
	r, out, _ = split(GRPCHealth(inside, NewDialer(), rpc.Addr().String(), "", testUA, time.Second, nil))
	assert.Equal(t, Success, r, out)

	// The node's 127.0.0.1 at the same port: nothing there.
	r, out, _ = split(TCP(context.Background(), NewDialer(), plain.Addr().String(), time.Second, nil))
	assert.Equal(t, Failure, r)
	assert.Contains(t, out, "connection refused")

	threadsAtHome(t)

	// A namespace that cannot be entered: the probe did not run (an error,
	// thrown away), whatever the kind.
	gone := WithNetNS(context.Background(), "/nonexistent/ns")
	_, _, err = httpProbe(gone)
	assert.ErrorIs(t, err, ErrNetNS)
	_, _, err = split(TCP(gone, NewDialer(), plain.Addr().String(), time.Second, nil))
	assert.ErrorIs(t, err, ErrNetNS)
	_, _, err = split(GRPCHealth(gone, NewDialer(), rpc.Addr().String(), "", testUA, time.Second, nil))
	assert.ErrorIs(t, err, ErrNetNS)
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// podOrNode is one kind of probe with a server for it that says whether it
// is the pod's or the node's.
type podOrNode struct {
	name  string
	serve func(t *testing.T, l net.Listener, pod bool)
	probe func(ctx context.Context, host string, port int) (Verdict, error)
	want  string // the pod's output
}

var podOrNodeKinds = []podOrNode{
	{
		name: "HTTP",
		serve: func(_ *testing.T, l net.Listener, pod bool) {
			answer := map[bool]string{true: "pod", false: "node"}[pod]
			go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(answer)) }))
		},
		probe: func(ctx context.Context, host string, port int) (Verdict, error) {
			req, err := NewRequest("http", host, port, "/", nil, testUA)
			if err != nil {
				return Verdict{}, err
			}
			return NewHTTPGet(NewDialer()).Probe(ctx, req, 5*time.Second, nil)
		},
		want: "pod",
	},
	{
		name: "TCP",
		serve: func(_ *testing.T, l net.Listener, _ bool) {
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		},
		probe: func(ctx context.Context, host string, port int) (Verdict, error) {
			return TCP(ctx, NewDialer(), net.JoinHostPort(host, strconv.Itoa(port)), 5*time.Second, nil)
		},
	},
	{
		name: "gRPC",
		serve: func(t *testing.T, l net.Listener, pod bool) {
			hs := health.NewServer()
			if !pod {
				hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
			}
			srv := grpc.NewServer()
			healthpb.RegisterHealthServer(srv, hs)
			go srv.Serve(l)
			t.Cleanup(srv.Stop)
		},
		probe: func(ctx context.Context, host string, port int) (Verdict, error) {
			return GRPCHealth(ctx, NewDialer(), net.JoinHostPort(host, strconv.Itoa(port)), "", testUA, 5*time.Second, nil)
		},
		want: "service healthy",
	},
}

// With the pod's network, a probe of localhost (127.0.0.1 and ::1 in the
// hosts file, as on most nodes) reaches only what the pod serves, whichever
// of the two it listens on: each address is tried inside the pod's
// namespace, where Go's dialer would race them from goroutines of its own,
// on threads in the node's. A name resolved by DNS is asked for from inside
// the namespace too. The node serves the same ports and answers otherwise.
// The hosts file and resolv.conf are this test's, bind-mounted in a process
// of its own.
func TestPodNetworkProbesOfLocalhost(t *testing.T) {
	if !inChild(t) {
		if os.Geteuid() != 0 {
			t.Skip("a mount and a network namespace need root")
		}
		dir := t.TempDir()
		hosts, resolv := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
		require.NoError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n::1 localhost\n"), 0o644))
		require.NoError(t, os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644))
		runChild(t, []string{"NETPROBE_TEST_HOSTS=" + hosts, "NETPROBE_TEST_RESOLV=" + resolv},
			&syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}) // Go makes the new mounts private
		return
	}
	require.NoError(t, unix.Mount(os.Getenv("NETPROBE_TEST_HOSTS"), "/etc/hosts", "", unix.MS_BIND, ""))
	require.NoError(t, unix.Mount(os.Getenv("NETPROBE_TEST_RESOLV"), "/etc/resolv.conf", "", unix.MS_BIND, ""))
	path, inNS := privateNetNS(t)
	podNet := WithNetNS(context.Background(), path)

	// serveBoth serves kind on the node at a port on both loopbacks, and in
	// the pod at the same port on podAddrs.
	serveBoth := func(t *testing.T, kind podOrNode, podAddrs ...string) (port int, pod, node []*countingListener) {
		l4, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port = l4.Addr().(*net.TCPAddr).Port
		node = append(node, &countingListener{Listener: l4})
		if l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
			node = append(node, &countingListener{Listener: l6})
		} else {
			t.Logf("the node's [::1]:%d is not served: %v", port, err)
		}
		for _, a := range podAddrs {
			pod = append(pod, &countingListener{Listener: listenIn(t, inNS, "tcp", net.JoinHostPort(a, strconv.Itoa(port)))})
		}
		for _, l := range node {
			t.Cleanup(func() { l.Close() })
			kind.serve(t, l, false)
		}
		for _, l := range pod {
			kind.serve(t, l, true)
		}
		return port, pod, node
	}
	accepted := func(ls []*countingListener) (n int32) {
		for _, l := range ls {
			n += l.accepted.Load()
		}
		return n
	}
	reachedThePod := func(t *testing.T, kind podOrNode, v Verdict, err error, pod, node []*countingListener) {
		require.NoError(t, err)
		assert.Equal(t, Success, v.Result, v.Output)
		assert.Equal(t, kind.want, v.Output)
		require.Eventually(t, func() bool { return accepted(pod) > 0 }, 10*time.Second, 5*time.Millisecond, "the pod's server was not reached")
		assert.Zero(t, accepted(node), "the node's server was reached")
	}

	for _, layout := range []struct {
		name  string
		addrs []string
	}{
		{"pod on 127.0.0.1", []string{"127.0.0.1"}},
		// The first address, 127.0.0.1, is refused: ::1 must be tried in
		// the pod's namespace as well.
		{"pod on ::1 only", []string{"::1"}},
		{"pod on both", []string{"127.0.0.1", "::1"}},
	} {
		for _, kind := range podOrNodeKinds {
			t.Run(layout.name+"/"+kind.name, func(t *testing.T) {
				port, pod, node := serveBoth(t, kind, layout.addrs...)
				goroutines, fds := runtime.NumGoroutine(), openFDs(t)
				v, err := kind.probe(podNet, "localhost", port)
				reachedThePod(t, kind, v, err, pod, node)
				settled(t, goroutines, fds)
				threadsAtHome(t)
			})
		}
	}

	// ::1 in a pod without IPv6 is EADDRNOTAVAIL, an error that can also
	// mean the agent is out of ports; the refusal at 127.0.0.1 is the
	// target's answer, and decides: a failure, not "could not probe".
	t.Run("pod without IPv6, serving nothing", func(t *testing.T) {
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			t.Skip("needs nsenter(1) and ip(8) to remove ::1 from the pod's loopback")
		}
		noV6, _ := privateNetNS(t)
		// nsenter fails rather than run ip in the node's namespace.
		out, err := exec.Command(nsenter, "--net="+noV6, "ip", "-6", "addr", "del", "::1/128", "dev", "lo").CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, kind := range podOrNodeKinds[:2] { // gRPC retries until its timeout, then says so
			port, _, node := serveBoth(t, kind)
			v, err := kind.probe(WithNetNS(context.Background(), noV6), "localhost", port)
			require.NoError(t, err, kind.name)
			assert.Equal(t, Failure, v.Result, "%s: %s", kind.name, v.Output)
			assert.Equal(t, CauseRefused, v.Cause, "%s: %s", kind.name, v.Output)
			assert.Contains(t, v.Output, "dial tcp 127.0.0.1:"+strconv.Itoa(port)+": connect: connection refused", kind.name)
			assert.Zero(t, accepted(node), "the node's server was reached")
		}
	})

	t.Run("a name resolved by DNS", func(t *testing.T) {
		// resolv.conf names 127.0.0.1: the pod's, where this server
		// listens; nothing does on the node's.
		var dns net.PacketConn
		var err error
		inNS(func() { dns, err = net.ListenPacket("udp", "127.0.0.1:53") })
		require.NoError(t, err)
		defer dns.Close()
		var queries atomic.Int32
		go serveDNS(dns, "pod.test.", [4]byte{127, 0, 0, 1}, &queries)
		for _, kind := range podOrNodeKinds {
			t.Run(kind.name, func(t *testing.T) {
				port, pod, node := serveBoth(t, kind, "127.0.0.1")
				v, err := kind.probe(podNet, "pod.test", port)
				reachedThePod(t, kind, v, err, pod, node)
			})
		}
		assert.Positive(t, queries.Load())
	})
}

// serveDNS answers the A question for name with ip, and any other with no
// address, until conn is closed.
func serveDNS(conn net.PacketConn, name string, ip [4]byte, queries *atomic.Int32) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		// Header (12 bytes), then the question: labels, type, class.
		end := 12
		for end < n && q[end] != 0 {
			end += int(q[end]) + 1
		}
		end += 5
		if end > n {
			continue
		}
		queries.Add(1)
		qname, qtype := decodeName(q[12:end-4]), binary.BigEndian.Uint16(q[end-4:])
		resp := append([]byte{q[0], q[1], 0x85, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...) // response, authoritative, recursion
		if qname == name && qtype == 1 {
			resp[7] = 1 // one answer: the name (a pointer to the question's), A, IN, TTL 60, 4 bytes
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, ip[:]...)
		}
		conn.WriteTo(resp, from)
	}
}

func decodeName(b []byte) string {
	var name strings.Builder
	for len(b) > 0 && b[0] != 0 {
		name.Write(b[1 : 1+b[0]])
		name.WriteByte('.')
		b = b[1+b[0]:]
	}
	return strings.ToLower(name.String())
}

// A connection the agent cannot make on its side (here from a namespace
// that cannot be entered) ends a gRPC probe at once, as it ends an HTTP or
// TCP probe: gRPC does not retry it until the probe's timeout (the
// dispatcher retries a probe that could not run).
func TestGRPCCouldNotProbeEndsAtOnce(t *testing.T) {
	gone := WithNetNS(context.Background(), "/nonexistent/ns")
	// An hour's timeout: a probe that retried until it would not return
	// within the test's deadline, which is a deadline, not a timing.
	type answer struct {
		output string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := GRPCHealth(gone, NewDialer(), "127.0.0.1:1", "", testUA, time.Hour, nil)
		done <- answer{v.Output, err}
	}()
	var got answer
	require.Eventually(t, func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "the probe ended before its timeout")
	require.ErrorIs(t, got.err, ErrNetNS)
	assert.Empty(t, got.output)
}
