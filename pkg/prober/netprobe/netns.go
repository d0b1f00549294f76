package netprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNetNS marks a probe that could not enter the pod's network namespace:
// the probe did not run, so it is an error (thrown away), not the target's
// failure.
var ErrNetNS = errors.New("cannot probe from the pod's network namespace")

type netNSKey struct{}

// WithNetNS makes the probes run with ctx dial from inside the network
// namespace at path (a pod's, e.g. /var/run/netns/cni-…), so that they
// reach what the pod's own loopback serves. It needs CAP_SYS_ADMIN.
func WithNetNS(ctx context.Context, path string) context.Context {
	return context.WithValue(ctx, netNSKey{}, path)
}

func netNSFrom(ctx context.Context) string {
	path, _ := ctx.Value(netNSKey{}).(string)
	return path
}

// dial connects with kubelet's socket options, from the network namespace
// that ctx names, if any.
func dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if path := netNSFrom(ctx); path != "" {
		return dialInNetNS(ctx, d, path, network, addr)
	}
	return d.DialContext(ctx, network, addr)
}

// dialInNetNS dials on an OS thread switched into the namespace at path. A
// socket belongs to the namespace it was created in, whichever thread uses
// it later, so only the dial runs there; the thread is switched back and
// released, or, if switching back fails, left locked so that Go retires it
// with its goroutine instead of reusing a thread in the wrong namespace.
func dialInNetNS(ctx context.Context, d *net.Dialer, path, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := dialFromThread(ctx, d, path, network, addr)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// dialFromThread must run on a locked OS thread.
func dialFromThread(ctx context.Context, d *net.Dialer, path, network, addr string) (conn net.Conn, restored bool, err error) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("%w: %w", ErrNetNS, err)
	}
	defer home.Close()
	target, err := os.Open(path)
	if err != nil {
		return nil, true, fmt.Errorf("%w: open it: %w", ErrNetNS, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("%w: enter %s: %w (needs CAP_SYS_ADMIN)", ErrNetNS, path, err)
	}
	conn, err = d.DialContext(ctx, network, addr)
	return conn, unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil, err
}
