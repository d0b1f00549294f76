package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNetNS marks a probe that could not enter the pod's network namespace:
// the probe did not run, so it is an error (thrown away), not the target's
// failure.
var ErrNetNS = errors.New("cannot probe from the pod's network namespace")

type netNSKey struct{}

// WithNetNS makes the probes run with ctx dial from inside the network
// namespace at path (a pod's, e.g. /var/run/netns/cni-…), so that they
// reach what the pod's own loopback serves: every connection, to each
// address of the host and to the DNS server that resolves it, is made
// there. It needs CAP_SYS_ADMIN.
func WithNetNS(ctx context.Context, path string) context.Context {
	return context.WithValue(ctx, netNSKey{}, path)
}

func netNSFrom(ctx context.Context) string {
	path, _ := ctx.Value(netNSKey{}).(string)
	return path
}

// dial connects with kubelet's socket options, from the network namespace
// that ctx names, if any. An error that is the agent's own shortage (out of
// file descriptors, ports, memory) comes back as ErrAgentResource.
func dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if path := netNSFrom(ctx); path != "" {
		conn, err = dialInNetNS(ctx, d, path, network, addr)
	} else {
		conn, err = d.DialContext(ctx, network, addr)
	}
	if rerr := agentError(err); rerr != nil {
		return nil, rerr
	}
	return conn, err
}

// dialInNetNS connects from the namespace at path. Go's DialContext cannot
// do that for a host name: its resolver and its Happy Eyeballs racers run
// on goroutines of their own, so on other threads, in the node's
// namespace. Here the name is resolved by a resolver whose every DNS
// connection is made in the namespace (hosts and resolv.conf are still the
// node's files, as for kubelet, which resolves on the node), and the
// addresses are then dialled one at a time on one thread in the namespace,
// in the order kubelet's dialer starts them: the first address's family,
// then the other.
func dialInNetNS(ctx context.Context, d *net.Dialer, path, network, addr string) (net.Conn, error) {
	nd := *d
	nd.FallbackDelay = -1 // no racers: only IP literals are dialled, one at a time
	// The dialer's own timeout covers the whole dial, not each address.
	nd.Timeout, nd.Deadline = 0, time.Time{}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}

	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return inNetNS(path, func() (net.Conn, error) { return nd.DialContext(ctx, network, addr) })
	}
	resolver, dialErr := nsResolver(path)
	ips, err := resolver.LookupIPAddr(ctx, host)
	if err != nil {
		if err := dialErr(); err != nil {
			return nil, err // the resolver keeps only the text of why it could not ask
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: err} // Go's wording: "dial tcp: lookup …"
	}
	addrs := kubeletOrder(ips, network)
	if len(addrs) == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no suitable address found", Addr: host}}
	}
	return inNetNS(path, func() (net.Conn, error) {
		// The first address's error, as Go reports; but the first answer of
		// the target's over an error of the agent's own (::1 in a pod without
		// IPv6 says EADDRNOTAVAIL, which must not hide 127.0.0.1's refusal).
		var firstErr, firstAnswer error
		for i, ip := range addrs {
			attemptCtx, cancel := partialDeadline(ctx, len(addrs)-i)
			conn, err := nd.DialContext(attemptCtx, network, net.JoinHostPort(ip.String(), port))
			cancel()
			if err == nil {
				return conn, nil
			}
			if firstErr == nil {
				firstErr = err
			}
			if firstAnswer == nil && agentError(err) == nil {
				firstAnswer = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		if firstAnswer != nil {
			return nil, firstAnswer
		}
		return nil, firstErr
	})
}

// kubeletOrder keeps the addresses network allows and puts them in the
// order kubelet's dual-stack dialer tries them: those of the first
// address's family (its primaries), then the others (its fallbacks).
func kubeletOrder(ips []net.IPAddr, network string) []net.IPAddr {
	var primaries, fallbacks []net.IPAddr
	for _, ip := range ips {
		v4 := ip.IP.To4() != nil
		switch {
		case network == "tcp4" && !v4, network == "tcp6" && v4:
		case len(primaries) == 0 || (primaries[0].IP.To4() != nil) == v4:
			primaries = append(primaries, ip)
		default:
			fallbacks = append(fallbacks, ip)
		}
	}
	return append(primaries, fallbacks...)
}

// partialDeadline gives one of remaining addresses its share of ctx's time,
// as Go's serial dial does: an equal share, but at least 2 s while there is
// that much left.
func partialDeadline(ctx context.Context, remaining int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	left := time.Until(deadline)
	share := left / time.Duration(remaining)
	const saneMinimum = 2 * time.Second
	if share < saneMinimum {
		share = min(left, saneMinimum)
	}
	if share >= left {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, share)
}

// nsResolver resolves with Go's own resolver (never the C library's, whose
// queries this process cannot steer), making each connection to a DNS
// server in the namespace at path, whatever goroutine the resolver asks
// from. A resolver per dial: a shared one would merge lookups of the same
// name from different namespaces. dialErr says whether a DNS connection
// failed because the namespace or the agent's resources did.
func nsResolver(path string) (r *net.Resolver, dialErr func() error) {
	var failed atomic.Pointer[error] // the resolver asks for A and AAAA at once
	r = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, server string) (net.Conn, error) {
			d := net.Dialer{FallbackDelay: -1}
			conn, err := inNetNS(path, func() (net.Conn, error) { return d.DialContext(ctx, network, server) }) // server is an IP literal
			if errors.Is(err, ErrNetNS) || agentError(err) != nil {
				failed.Store(&err)
			}
			return conn, err
		},
	}
	return r, func() error {
		if err := failed.Load(); err != nil {
			return *err
		}
		return nil
	}
}

// inNetNS runs dial on an OS thread switched into the namespace at path;
// dial must create its sockets on the calling goroutine. A socket belongs
// to the namespace it was created in, whichever thread uses it later, so
// only the dial runs there; the thread is switched back and released, or,
// if switching back fails, left locked so that Go retires it with its
// goroutine instead of reusing a thread in the wrong namespace.
func inNetNS(path string, dial func() (net.Conn, error)) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := dialFromThread(path, dial)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// dialFromThread must run on a locked OS thread.
func dialFromThread(path string, dial func() (net.Conn, error)) (conn net.Conn, restored bool, err error) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, nsOpenError(err)
	}
	defer home.Close()
	target, err := os.Open(path)
	if err != nil {
		return nil, true, nsOpenError(fmt.Errorf("open it: %w", err))
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("%w: enter %s: %w (needs CAP_SYS_ADMIN)", ErrNetNS, path, err)
	}
	conn, err = dial()
	return conn, unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil, err
}

// nsOpenError is ErrNetNS, unless the agent is out of file descriptors:
// then the namespace is fine and the agent is not.
func nsOpenError(err error) error {
	if rerr := agentError(err); rerr != nil {
		return rerr
	}
	return fmt.Errorf("%w: %w", ErrNetNS, err)
}
