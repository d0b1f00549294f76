package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// UserAgent is what HTTP and gRPC probes send, kubelet's own: applications
// that recognise kubelet's probes recognise ours.
const UserAgent = "kube-probe/" + spec.KubeletMinorVersion

// maxProbeRetries is how often a probe that could not run is retried at
// once before its result is thrown away (kubelet's maxProbeRetries).
const maxProbeRetries = 3

// ExecRunner runs probe commands in the containers of a pod
// (pkg/exec.Runner).
type ExecRunner interface {
	Run(ctx context.Context, pod, containerID string, cmd []string, timeout time.Duration) (exec.Result, error)
}

var _ ExecRunner = (*exec.Runner)(nil)

// Target is where one probe goes: a worker's container instance
// (TargetFor), or a one-off probe's (RunOnce).
type Target struct {
	// Pod is the pod's key (exec probes are limited per pod).
	Pod string
	// Host is where network probes go when the probe names no host: the
	// pod IP (pods.Pod.ProbeHost); 127.0.0.1 with InPodNetwork.
	Host        string
	ContainerID string
	// Container gives named ports and env for $(VAR); RunOnce takes nil
	// as a container without either.
	Container *spec.Container
	// InPodNetwork: HTTP, TCP and gRPC probes are dialled from inside
	// NetNS, the pod's network namespace (Host is then 127.0.0.1).
	InPodNetwork bool
	NetNS        string
	// Extensions are the probe's additions beyond core/v1 (nil: none).
	Extensions *spec.Extensions
}

// TargetFor is where probes of container c, instance containerID, of pod
// p go: the pod's probe address as the view resolves it (pods.Pod's
// ProbeHost and InPodNetwork), or, with network (spec.ProbeNetworkPod or
// spec.ProbeNetworkNode: cri-prober probe --probe-network), that
// network's as this node reaches it. Its Extensions are the caller's to
// set (they are the probe type's).
func TargetFor(p *pods.Pod, containerID string, c *spec.Container, network string) Target {
	t := Target{Pod: p.Key, Host: p.ProbeHost, ContainerID: containerID, Container: c, InPodNetwork: p.InPodNetwork, NetNS: p.Sandbox.NetNS}
	if network != "" {
		t.Host, t.InPodNetwork = pods.ProbeAddress(p.Sandbox, network, "127.0.0.1")
	}
	return t
}

// outcome is one probe run after retries.
type outcome struct {
	result results.Result // Success or Failure; meaningless when err is set
	raw    results.Outcome
	output string
	// reason says why it failed or could not run (a Reason… constant); ""
	// for a success.
	reason string
	err    error // could not probe: the result is to be thrown away
	// queued is how long an exec probe waited for a slot of its pod.
	queued time.Duration
	// resourceCause names the agent's own shortage that kept the probe
	// from running (probe.ResourceCause), if that is why.
	resourceCause string
}

// dispatcher runs probes of every kind. It is the one place where a spec
// becomes a probe kind and a kind's verdict becomes kubelet's result.
type dispatcher struct {
	exec   ExecRunner
	dialer *probe.Dialer
	http   *probe.HTTPGet
	// keepSuccessOutput keeps what passing probes print; kubelet keeps
	// none (--keep-success-output).
	keepSuccessOutput bool
	// stalls says when the agent itself ran late (nil: never judged).
	stalls *stallMonitor
}

// newDispatcher returns a dispatcher that runs exec probes with
// execRunner and connects network probes through dialer.
func newDispatcher(execRunner ExecRunner, dialer *probe.Dialer, keepSuccessOutput bool) *dispatcher {
	return &dispatcher{exec: execRunner, dialer: dialer, http: probe.NewHTTPGet(dialer), keepSuccessOutput: keepSuccessOutput}
}

// probe runs p against t, retrying at once while it cannot run at all, and
// maps the verdict as kubelet does: success and warning are Success;
// failure, and unknown without an error, are Failure.
//
// Every text that leaves here came from the workload or quotes it, and is
// bounded here, once, before results, history, events, the ledger and
// logs see it: output to kubelet's 10 KiB, an error to 1 KiB. A success's
// output is dropped here too unless kept: kubelet discards it, and
// whatever a probe fetched (from wherever its spec's author aimed it)
// must not be served to every reader of the API.
func (d *dispatcher) probe(ctx context.Context, p *corev1.Probe, t Target) outcome {
	return d.probeRecorded(ctx, p, t, nil)
}

// probeRecorded is probe, recorded into tr when it is not nil: what the
// network kinds sent and received (probe --debug).
func (d *dispatcher) probeRecorded(ctx context.Context, p *corev1.Probe, t Target, tr *probe.Transcript) outcome {
	var o outcome
	for range maxProbeRetries {
		start := time.Now()
		o = d.runOnce(ctx, p, t, tr)
		if p.Exec == nil && o.err == nil && o.reason == ReasonTimeout {
			// A network probe's timeout is measured by the agent's own
			// goroutines: starved, they time out a target that answered.
			timeout := time.Duration(p.TimeoutSeconds) * time.Second
			if worst, starved := d.stalls.starved(start, time.Now(), timeout); starved {
				o = outcome{err: overloadError(worst)}
				break // no retry: it would starve the agent further
			}
		}
		if o.err == nil || ctx.Err() != nil {
			break
		}
	}
	if o.err != nil {
		return outcome{result: results.Failure, raw: results.OutcomeUnknown, reason: errorReason(o.err),
			resourceCause: resourceCause(o.err), err: bounded.Error(o.err, bounded.Message), queued: o.queued}
	}
	o.output = bounded.String(o.output, bounded.Output)
	if o.raw == results.OutcomeSuccess && !d.keepSuccessOutput {
		o.output = ""
	}
	o.result = results.Failure
	if o.raw == results.OutcomeSuccess || o.raw == results.OutcomeWarning {
		o.result, o.reason = results.Success, ""
	}
	return o
}

func (d *dispatcher) runOnce(ctx context.Context, p *corev1.Probe, t Target, tr *probe.Transcript) outcome {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if p.Exec == nil && t.InPodNetwork {
		if t.NetNS == "" {
			return outcome{err: errNoNetNS}
		}
		ctx = probe.WithNetNS(ctx, t.NetNS)
	}
	switch {
	case p.Exec != nil:
		r, err := d.exec.Run(ctx, t.Pod, t.ContainerID, spec.ExpandCommand(p.Exec.Command, t.Container.Env), timeout)
		switch {
		case err != nil:
			return outcome{err: err, queued: r.Queued}
		case r.TimedOut:
			return outcome{raw: results.OutcomeFailure, output: r.Output, reason: ReasonTimeout, queued: r.Queued}
		case r.ExitCode != 0:
			return outcome{raw: results.OutcomeFailure, output: r.Output, reason: ReasonExecExitCode, queued: r.Queued}
		default:
			return outcome{raw: results.OutcomeSuccess, output: r.Output, queued: r.Queued}
		}
	case p.HTTPGet != nil:
		h := p.HTTPGet
		host, port, err := address(h.Host, h.Port, t)
		if err != nil {
			return outcome{err: err}
		}
		req, err := probe.NewRequest(strings.ToLower(string(h.Scheme)), host, port, h.Path, httpHeaders(h.HTTPHeaders), UserAgent)
		if err != nil {
			return outcome{err: fmt.Errorf("build HTTP request: %w", err)}
		}
		var check probe.HTTPCheck
		if ext := t.Extensions; ext != nil && ext.HTTPGet != nil {
			if ext.HTTPGet.Method != "" {
				req.Method = ext.HTTPGet.Method
			}
			check = probe.HTTPCheck{ValidStatusCodes: ext.HTTPGet.ValidStatusCodes, BodyMustMatch: ext.HTTPGet.BodyRegexp()}
		}
		return fromNet(d.http.ProbeChecked(ctx, req, timeout, check, tr)) // credentials redacted by the kind
	case p.TCPSocket != nil:
		s := p.TCPSocket
		host, port, err := address(s.Host, s.Port, t)
		if err != nil {
			return outcome{err: err}
		}
		return fromNet(probe.TCP(ctx, d.dialer, net.JoinHostPort(host, strconv.Itoa(port)), timeout, tr))
	case p.GRPC != nil:
		if t.Host == "" {
			return outcome{err: errNoPodIP}
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		addr := net.JoinHostPort(t.Host, strconv.Itoa(int(p.GRPC.Port)))
		return fromNet(probe.GRPCHealth(ctx, d.dialer, addr, service, UserAgent, timeout, tr))
	default:
		return outcome{err: errors.New("missing probe handler")}
	}
}

// errorReason says why a probe could not run; the error's text is cut
// afterwards, so classification comes first.
func errorReason(err error) string {
	switch {
	case errors.Is(err, probe.ErrNetNS), errors.Is(err, errNoNetNS):
		return ReasonNetNS
	case errors.Is(err, probe.ErrAgentResource):
		return ReasonAgentResources
	case errors.Is(err, ErrAgentOverload):
		return ReasonAgentOverload
	case errors.Is(err, probe.ErrDestinationRefused):
		return ReasonDestinationRefused
	case errors.Is(err, cri.ErrExecReplyTooLarge):
		return ReasonExecReplyTooLarge
	default:
		return ReasonRuntimeError
	}
}

var (
	errNoPodIP = errors.New("the pod has no IP address yet")
	errNoNetNS = errors.New("the runtime does not report the pod's network namespace, needed by " +
		spec.ProbeNetworkAnnotation + ": " + spec.ProbeNetworkPod + " (containerd reports it)")
)

// address resolves a probe's port (a number or a named port of the
// container, kubelet's way: a name the container does not declare is an
// error at every run, kubelet's text) and host (default: the pod IP).
func address(host string, p intstr.IntOrString, t Target) (string, int, error) {
	port, err := spec.ResolvePort(p, t.Container.Ports)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		host = t.Host
	}
	if host == "" {
		return "", 0, errNoPodIP
	}
	return host, port, nil
}

func httpHeaders(list []corev1.HTTPHeader) http.Header {
	h := make(http.Header, len(list))
	for _, hdr := range list {
		h.Add(hdr.Name, hdr.Value)
	}
	return h
}

func fromNet(v probe.Verdict, err error) outcome {
	switch {
	case err != nil:
		return outcome{output: v.Output, err: err}
	case v.Result == probe.Success:
		return outcome{raw: results.OutcomeSuccess, output: v.Output}
	case v.Result == probe.Warning:
		return outcome{raw: results.OutcomeWarning, output: v.Output}
	default:
		return outcome{raw: results.OutcomeFailure, output: v.Output, reason: failureReason[v.Cause]}
	}
}

// Outcome is a one-off probe's result, as a worker would see it.
type Outcome struct {
	Result results.Result  // Success or Failure (meaningless when Err is set)
	Raw    results.Outcome // success, warning, failure or unknown
	Output string
	Err    error // could not probe (after kubelet's three tries)
}

// RunOnce runs p once against t through the same handlers, retries and
// result mapping as the agent's workers (cri-prober probe). execRunner may
// be nil for a network probe. A success's output is kept: it is shown to
// the caller once, not kept or served. tr, when not nil, records what a
// network probe sent and received, then the outcome as kubelet reports it
// (all an exec probe records), with the values of credential headers
// redacted as in the output (RunOnce sets its Redact). allowed are the
// link-local and cloud metadata addresses the probe may reach, as the
// agent's --allow-probe-destination.
func RunOnce(ctx context.Context, execRunner ExecRunner, p *corev1.Probe, t Target, allowed []netip.Prefix, tr *probe.Transcript) Outcome {
	if t.Container == nil {
		t.Container = &spec.Container{}
	}
	if tr != nil {
		if h := p.HTTPGet; h != nil {
			header := httpHeaders(h.HTTPHeaders)
			tr.Redact = func(s string) string { return probe.RedactCredentials(s, header) }
		}
	}
	d := newDispatcher(execRunner, probe.NewDialer(allowed...), true)
	o := d.probeRecorded(ctx, p, t, tr)
	if tr != nil {
		tr.Finish(string(o.raw), o.output, o.err)
	}
	return Outcome{Result: o.result, Raw: o.raw, Output: o.output, Err: o.err}
}
