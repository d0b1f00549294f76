package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
	"github.com/cri-prober/cri-prober/pkg/prober/spec"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// UserAgent is what HTTP and gRPC probes send, kubelet's own: applications
// that recognise kubelet's probes recognise ours.
const UserAgent = "kube-probe/1.34"

// maxProbeRetries is how often a probe that could not run is retried at
// once before its result is thrown away (kubelet's maxProbeRetries).
const maxProbeRetries = 3

// execRunner runs commands in containers.
type execRunner interface {
	Run(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (exec.Result, error)
}

var _ execRunner = (*exec.Runner)(nil)

// target is where one probe goes.
type target struct {
	podIP       string
	containerID string
	container   *spec.Container
	// inPodNetwork: HTTP, TCP and gRPC probes are dialled from inside
	// netns, the pod's network namespace, to 127.0.0.1 by default.
	inPodNetwork bool
	netns        string
}

// outcome is one probe run after retries.
type outcome struct {
	result results.Result // Success or Failure; meaningless when err is set
	raw    results.Outcome
	output string
	err    error // could not probe: the result is to be thrown away
}

// dispatcher runs probes of every kind. It is the one place where a spec
// becomes a probe kind and a kind's verdict becomes kubelet's result.
type dispatcher struct {
	exec execRunner
	http *netprobe.HTTPGet
}

// probe runs p against t, retrying at once while it cannot run at all, and
// maps the verdict as kubelet does: success and warning are Success;
// failure, and unknown without an error, are Failure.
func (d *dispatcher) probe(ctx context.Context, p *corev1.Probe, t target) outcome {
	var raw results.Outcome
	var output string
	var err error
	for range maxProbeRetries {
		raw, output, err = d.runOnce(ctx, p, t)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return outcome{result: results.Failure, raw: results.OutcomeUnknown, err: err}
	}
	o := outcome{result: results.Failure, raw: raw, output: output}
	if raw == results.OutcomeSuccess || raw == results.OutcomeWarning {
		o.result = results.Success
	}
	return o
}

func (d *dispatcher) runOnce(ctx context.Context, p *corev1.Probe, t target) (results.Outcome, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if p.Exec == nil && t.inPodNetwork {
		if t.netns == "" {
			return results.OutcomeUnknown, "", errNoNetNS
		}
		ctx = netprobe.WithNetNS(ctx, t.netns)
		t.podIP = "127.0.0.1" // the pod's own loopback, inside its namespace
	}
	switch {
	case p.Exec != nil:
		r, err := d.exec.Run(ctx, t.containerID, expandCommand(p.Exec.Command, t.container.Env), timeout)
		switch {
		case err != nil:
			return results.OutcomeUnknown, "", err
		case r.TimedOut, r.ExitCode != 0:
			return results.OutcomeFailure, r.Output, nil
		default:
			return results.OutcomeSuccess, r.Output, nil
		}
	case p.HTTPGet != nil:
		h := p.HTTPGet
		host, port, err := address(h.Host, h.Port.String(), t, func() (int, bool) { return spec.ResolvePort(h.Port, t.container.Ports) })
		if err != nil {
			return results.OutcomeUnknown, "", err
		}
		req, err := netprobe.NewRequest(strings.ToLower(string(h.Scheme)), host, port, h.Path, httpHeaders(h.HTTPHeaders), UserAgent)
		if err != nil {
			return results.OutcomeUnknown, "", fmt.Errorf("build HTTP request: %w", err)
		}
		outcome, output, err := fromNet(d.http.Probe(ctx, req, timeout))
		return outcome, redactSecrets(output, h.HTTPHeaders), err
	case p.TCPSocket != nil:
		s := p.TCPSocket
		host, port, err := address(s.Host, s.Port.String(), t, func() (int, bool) { return spec.ResolvePort(s.Port, t.container.Ports) })
		if err != nil {
			return results.OutcomeUnknown, "", err
		}
		return fromNet(netprobe.TCP(ctx, net.JoinHostPort(host, strconv.Itoa(port)), timeout))
	case p.GRPC != nil:
		if t.podIP == "" {
			return results.OutcomeUnknown, "", errNoPodIP
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		addr := net.JoinHostPort(t.podIP, strconv.Itoa(int(p.GRPC.Port)))
		return fromNet(netprobe.GRPCHealth(ctx, addr, service, UserAgent, timeout))
	default:
		return results.OutcomeUnknown, "", errors.New("missing probe handler")
	}
}

var (
	errNoPodIP = errors.New("the pod has no IP address yet")
	errNoNetNS = errors.New("the runtime does not report the pod's network namespace, needed by " +
		spec.ProbeNetworkAnnotation + ": " + spec.ProbeNetworkPod + " (containerd reports it)")
)

// address resolves a probe's host (default: the pod IP) and port (a number
// or a named port of the container).
func address(host, portName string, t target, resolve func() (int, bool)) (string, int, error) {
	if host == "" {
		host = t.podIP
	}
	if host == "" {
		return "", 0, errNoPodIP
	}
	port, ok := resolve()
	if !ok {
		return "", 0, fmt.Errorf("port %q not found", portName)
	}
	return host, port, nil
}

// secretHeaderWords mark a header whose value is a credential: standard
// ones and the usual custom names (X-Api-Key, X-Auth-Token, …).
var secretHeaderWords = []string{"authorization", "cookie", "auth", "token", "key", "secret", "password", "session", "credential"}

// redactSecrets removes the values of credential headers from a probe's
// output (a response body shown in a redirect warning can echo them), so
// they reach neither events nor logs nor the API. Other output is kept as
// kubelet reports it.
func redactSecrets(output string, headers []corev1.HTTPHeader) string {
	for _, hdr := range headers {
		name := strings.ToLower(hdr.Name)
		if !slices.ContainsFunc(secretHeaderWords, func(w string) bool { return strings.Contains(name, w) }) {
			continue
		}
		// The whole value, then its parts ("Bearer <token>": the token).
		for _, v := range append([]string{hdr.Value}, strings.Fields(hdr.Value)...) {
			if len(v) >= 4 {
				output = strings.ReplaceAll(output, v, "[redacted]")
			}
		}
	}
	return output
}

func httpHeaders(list []corev1.HTTPHeader) http.Header {
	h := make(http.Header, len(list))
	for _, hdr := range list {
		h.Add(hdr.Name, hdr.Value)
	}
	return h
}

func fromNet(r netprobe.Result, output string, err error) (results.Outcome, string, error) {
	if err != nil {
		return results.OutcomeUnknown, output, err
	}
	switch r {
	case netprobe.Success:
		return results.OutcomeSuccess, output, nil
	case netprobe.Warning:
		return results.OutcomeWarning, output, nil
	default:
		return results.OutcomeFailure, output, nil
	}
}
