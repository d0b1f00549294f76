package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
)

// ErrDestinationRefused marks a probe the agent would not send: its
// address is link-local or a cloud's instance metadata service, which
// hand the node's credentials to whoever asks from it, and the Dialer
// does not allow it. Nothing was sent, so it is an error (could not
// probe), not the target's failure.
var ErrDestinationRefused = errors.New("probe destination refused")

// refusedDestinations are where no probe goes unless allowed. kubelet
// probes any address; here any spec's author (a crictl user's
// annotations) could otherwise read the node's cloud credentials through
// the agent.
var refusedDestinations = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud instance metadata: AWS, GCP, Azure, OpenStack…)"},
	{netip.MustParsePrefix("fe80::/10"), "an IPv6 link-local address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "AWS's IPv6 instance metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "Alibaba Cloud's instance metadata"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): an IPv4 address
// written in it reaches that IPv4 address through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Dialer connects probes: with kubelet's socket options, from the network
// namespace a context names (WithNetNS), and never to a refused
// destination it does not allow. The destination is checked on every
// connection attempt, so each address a name resolves to and each
// redirect's connection is checked too. One Dialer serves every probe.
type Dialer struct {
	allowed []netip.Prefix
	// refusal says what a refused address is ("": not refused):
	// refusedDestination, or a test's.
	refusal func(netip.Addr) string
}

// NewDialer returns a Dialer that also connects to the refused
// destinations in allowed (--allow-probe-destination).
func NewDialer(allowed ...netip.Prefix) *Dialer {
	return &Dialer{allowed: slices.Clone(allowed), refusal: refusedDestination}
}

// refusedDestination says what addr is if it is a refused destination,
// else "".
func refusedDestination(addr netip.Addr) string {
	for _, r := range refusedDestinations {
		if r.prefix.Contains(addr) {
			return r.what
		}
	}
	return ""
}

// netDialer is a dialer for one connection: the destination checked,
// then kubelet's socket options (Linger).
func (d *Dialer) netDialer() *net.Dialer {
	return &net.Dialer{
		Control: func(_, address string, c syscall.RawConn) error {
			if err := d.check(address); err != nil {
				return err
			}
			return Linger(c)
		},
	}
}

// Linger sets kubelet's probe socket option on a socket being dialled
// (from a net.Dialer's Control): SO_LINGER of 1 s, so that thousands of
// probes do not leave thousands of sockets in TIME_WAIT
// (kubernetes#89898). The load harness's plain-Go baseline sets it too.
func Linger(c syscall.RawConn) error {
	var sockErr error
	if err := c.Control(func(fd uintptr) {
		sockErr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	}); err != nil {
		return err
	}
	return sockErr
}

// check refuses address (IP:port, as the dialer is about to connect) if
// it is a refused destination the Dialer does not allow. An address it
// cannot read is refused: this is a guard.
func (d *Dialer) check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address %q to check it", ErrDestinationRefused, address)
	}
	addr := asReached(ap.Addr())
	what := d.refusal(addr)
	if what == "" || slices.ContainsFunc(d.allowed, func(p netip.Prefix) bool { return p.Contains(addr) }) {
		return nil
	}
	return &refusedError{addr: addr, what: what}
}

// asReached is the address a connection to a reaches: without its zone
// (a prefix never contains a zoned address), an IPv4-mapped or NAT64
// address as its IPv4 address.
func asReached(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// refusedError is ErrDestinationRefused for one address.
type refusedError struct {
	addr netip.Addr
	what string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("refused to probe %s (%s): probes are not sent to link-local or cloud metadata addresses, which hand out the node's credentials; if this probe is meant to go there, allow it with --allow-probe-destination %s",
		e.addr, e.what, netip.PrefixFrom(e.addr, e.addr.BitLen()))
}

func (e *refusedError) Is(target error) bool { return target == ErrDestinationRefused }
