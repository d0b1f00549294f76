package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// runProbeAt runs network probe p once against address, with no runtime
// and no container, through the same handlers as the agent's workers
// (prober.RunOnce); tr, when not nil, records the run. address is
//
//   - HOST:PORT (or [IPv6]:PORT), which replaces the probe's host and
//     port; a HOST alone keeps the probe's port, which must then be a
//     number (there is no container to name ports);
//   - a URL (http or https), which makes an httpGet probe: its scheme,
//     host, port (80 or 443 by default), path and query replace the
//     probe's, whose headers and timeout stay. p may then be nil (or have
//     no handler): a plain httpGet probe with kubelet's defaults;
//   - a gRPC URL, grpc://HOST:PORT[/SERVICE], which makes a grpc probe
//     (gRPC's health checking protocol, as kubelet's) of that service (none:
//     the server's overall health), or aims p's grpc handler there.
//
// Exec probes run in containers, and cannot be aimed at an address. The
// probe may reach the refused destinations in allowed, as RunOnce's. The
// error says that p cannot be aimed at address (nothing was sent); a probe
// that could not run is the Outcome's Err.
func runProbeAt(ctx context.Context, p *corev1.Probe, address string, tr *probe.Transcript, allowed []netip.Prefix) (prober.Outcome, error) {
	q, t, err := atAddress(p, address)
	if err != nil {
		return prober.Outcome{}, err
	}
	return prober.RunOnce(ctx, nil, q, t, allowed, tr), nil
}

// atAddress aims p at address (runProbeAt) and returns a copy of it with
// the API server's defaults, and the Target to run it with. The copy is
// not validated again (the caller validated p).
func atAddress(p *corev1.Probe, address string) (*corev1.Probe, prober.Target, error) {
	var q *corev1.Probe
	if p != nil {
		q = p.DeepCopy()
	}
	u, isURL, err := addressURL(address)
	if err == nil && isURL && strings.EqualFold(u.Scheme, "grpc") {
		return atGRPCAddress(q, u)
	}
	switch {
	case err != nil:
		return nil, prober.Target{}, err
	case isURL && q == nil:
		q = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{}}}
	case q == nil:
		return nil, prober.Target{}, errors.New("no probe to aim at " + strconv.Quote(address))
	case q.Exec != nil:
		return nil, prober.Target{}, errors.New("an exec probe runs in a container: it cannot be aimed at an address")
	case q.HTTPGet == nil && q.TCPSocket == nil && q.GRPC == nil:
		if !isURL {
			return nil, prober.Target{}, errors.New("the probe has no httpGet, tcpSocket or grpc handler")
		}
		q.HTTPGet = &corev1.HTTPGetAction{}
	case isURL && q.HTTPGet == nil:
		return nil, prober.Target{}, fmt.Errorf("address %q is a URL, for an httpGet probe; give HOST:PORT", address)
	}

	var host string
	var port int
	if isURL {
		host, port, err = urlAddress(u, q.HTTPGet)
	} else {
		host, port, err = hostPort(address, q)
	}
	if err != nil {
		return nil, prober.Target{}, err
	}
	switch {
	case q.HTTPGet != nil:
		q.HTTPGet.Host, q.HTTPGet.Port = "", intstr.FromInt(port)
	case q.TCPSocket != nil:
		q.TCPSocket.Host, q.TCPSocket.Port = "", intstr.FromInt(port)
	default:
		q.GRPC.Port = int32(port)
	}
	spec.DefaultProbe(q)
	return q, prober.Target{Host: host}, nil
}

// atGRPCAddress aims q (nil: a new grpc probe) at a grpc:// URL, whose
// port is required (gRPC has no default port) and whose path, if any, is
// the service.
func atGRPCAddress(q *corev1.Probe, u *url.URL) (*corev1.Probe, prober.Target, error) {
	switch {
	case q != nil && q.Exec != nil:
		return nil, prober.Target{}, errors.New("an exec probe runs in a container: it cannot be aimed at an address")
	case q == nil || (q.HTTPGet == nil && q.TCPSocket == nil && q.GRPC == nil):
		if q == nil {
			q = &corev1.Probe{}
		}
		q.GRPC = &corev1.GRPCAction{}
	case q.GRPC == nil:
		return nil, prober.Target{}, fmt.Errorf("address %q is a gRPC URL, for a grpc probe; give HOST:PORT", u.Redacted())
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, prober.Target{}, fmt.Errorf("address %q: a gRPC URL is grpc://HOST:PORT[/SERVICE], with no credentials, query or fragment", u.Redacted())
	}
	if u.Port() == "" {
		return nil, prober.Target{}, fmt.Errorf("address %q names no port: give grpc://HOST:PORT[/SERVICE]", u.Redacted())
	}
	port, err := portNumber(u.Port())
	if err != nil {
		return nil, prober.Target{}, err
	}
	q.GRPC.Port = int32(port)
	if service := strings.TrimPrefix(u.Path, "/"); service != "" {
		q.GRPC.Service = &service
	}
	spec.DefaultProbe(q)
	return q, prober.Target{Host: u.Hostname()}, nil
}

// addressURL parses address as a URL if it is one (it has "://"): an http,
// https or grpc one, naming a host.
func addressURL(address string) (*url.URL, bool, error) {
	if !strings.Contains(address, "://") {
		return nil, false, nil
	}
	u, err := url.Parse(address)
	switch {
	case err != nil:
		return nil, true, err
	case !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") && !strings.EqualFold(u.Scheme, "grpc"):
		return nil, true, fmt.Errorf("address %q: a URL's scheme must be http or https (an httpGet probe) or grpc (grpc://HOST:PORT[/SERVICE]); or give HOST:PORT (a TCP connect)", u.Redacted())
	case u.Hostname() == "":
		return nil, true, fmt.Errorf("URL %q names no host", u.Redacted())
	}
	return u, true, nil
}

// urlAddress takes the scheme, path and query of u into h, and returns its
// host and port.
func urlAddress(u *url.URL, h *corev1.HTTPGetAction) (string, int, error) {
	if u.User != nil {
		return "", 0, errors.New("a probe URL cannot carry credentials: send them in a header (Authorization)")
	}
	h.Scheme = corev1.URIScheme(strings.ToUpper(u.Scheme))
	h.Path = u.RequestURI()
	port := 80
	if h.Scheme == corev1.URISchemeHTTPS {
		port = 443
	}
	if u.Port() != "" {
		n, err := portNumber(u.Port())
		if err != nil {
			return "", 0, err
		}
		port = n
	}
	return u.Hostname(), port, nil
}

// hostPort splits HOST:PORT, or takes a HOST alone with the probe's port.
func hostPort(address string, p *corev1.Probe) (string, int, error) {
	if host, port, err := net.SplitHostPort(address); err == nil {
		if host == "" {
			return "", 0, fmt.Errorf("address %q names no host: give HOST:PORT", address)
		}
		n, err := portNumber(port)
		return host, n, err
	}
	host := strings.TrimSuffix(strings.TrimPrefix(address, "["), "]")
	if _, err := netip.ParseAddr(host); err != nil && (host == "" || strings.ContainsAny(host, ":/[] ")) {
		return "", 0, fmt.Errorf("address %q: want HOST:PORT or a URL", address)
	}
	var probePort intstr.IntOrString
	switch {
	case p.HTTPGet != nil:
		probePort = p.HTTPGet.Port
	case p.TCPSocket != nil:
		probePort = p.TCPSocket.Port
	default:
		probePort = intstr.FromInt32(p.GRPC.Port)
	}
	n, err := spec.ResolvePort(probePort, nil)
	if err != nil {
		return "", 0, fmt.Errorf("address %q has no port and the probe's port %q is not a number (no container to name it): give HOST:PORT", address, probePort.String())
	}
	return host, n, nil
}

func portNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q: want a number from 1 to 65535", s)
	}
	return n, nil
}
