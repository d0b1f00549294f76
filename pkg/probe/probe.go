// Package probe holds the network probe kinds (kubelet's
// pkg/probe/{http,tcp,grpc}): HTTP GET, TCP connect and gRPC health
// checks. Each probe is a leaf that knows nothing of pods or containers:
// it gets an address and a timeout and says Success, Warning or Failure
// with kubelet's output text, or returns an error when it could not probe
// at all.
//
// Everything a target sends is bounded where it enters: HTTP response
// headers at MaxResponseHeader bytes and a body at MaxBody (kubelet's
// 10 KiB); gRPC headers at GRPCMaxHeaderList and a message at
// GRPCMaxMessage. What is kept of it is bounded too: a Verdict's Output is
// either a body of at most MaxBody bytes (after kubelet's 43-byte prefix
// for a redirect not followed) or any other text cut by bounded.String to
// bounded.Message bytes and a marker (Go's and gRPC's errors quote what
// the target sent: a malformed status line, a status message); so is the
// text of an error a probe returns.
//
// No probe connects to a link-local or cloud metadata address unless its
// Dialer allows it: that probe could not run (ErrDestinationRefused).
//
// Each kind takes a Transcript as its last argument, as blackbox_exporter's
// probers take their debug logger: given one, it records there what it
// sent and received, and when (probe --debug); given nil, it records
// nothing and costs nothing. The transcript is its own file group
// (transcript.go records, transcript_text.go renders).
package probe

import (
	"context"
	"errors"
	"net"
	"slices"
	"syscall"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// Result is a probe's verdict, kubelet's probe.Result without "unknown"
// (which these probes express as an error).
type Result int

const (
	Success Result = iota
	// Warning is a success worth telling about (an HTTP redirect to another
	// host that was not followed).
	Warning
	Failure
)

// Cause says why a probe failed, where the failure happens: a bounded set,
// for metrics, never parsed back out of the output.
type Cause int

const (
	CauseNone Cause = iota
	// CauseRefused: the connection was refused.
	CauseRefused
	// CauseTimeout: the probe ran out of time (connecting or waiting for
	// the answer).
	CauseTimeout
	// CauseNetwork: another transport problem (reset, unreachable, TLS,
	// too many redirects, a malformed response).
	CauseNetwork
	// CauseStatus: an HTTP status outside the accepted ones.
	CauseStatus
	// CauseBody: the HTTP body did not match the required regexp.
	CauseBody
	// CauseNotServing: a gRPC server answered NOT_SERVING (or does not
	// implement the health protocol).
	CauseNotServing
)

// Verdict is one probe's outcome: the result, kubelet's output text and,
// for a failure, its cause.
type Verdict struct {
	Result Result
	Output string
	Cause  Cause
}

func success(output string) Verdict { return Verdict{Result: Success, Output: output} }

func failure(cause Cause, output string) Verdict {
	return Verdict{Result: Failure, Output: output, Cause: cause}
}

// cannotProbeClasses are the errors that say a probe could not run at
// all, for a reason on the agent's side: its namespace, its resources,
// its refusal of the destination. No answer of the target's is in them.
var cannotProbeClasses = []error{ErrNetNS, ErrAgentResource, ErrDestinationRefused}

// cannotProbe reports whether err says the probe could not run at all.
func cannotProbe(err error) bool {
	return slices.ContainsFunc(cannotProbeClasses, func(class error) bool { return errors.Is(err, class) })
}

// couldNotProbe readies err, which says a probe could not run, to be
// returned: its text is cut to bounded.Message (a URL in it can come from a
// redirect) without keeping the whole of it, and it still answers
// errors.Is for what the caller classifies by (cannotProbeClasses, the
// shortage ResourceCause names).
func couldNotProbe(err error) error {
	text := err.Error()
	if len(text) <= bounded.Message {
		return err
	}
	cut := &cutError{text: bounded.String(text, bounded.Message)}
	for _, class := range slices.Concat(cannotProbeClasses, agentErrnos()) {
		if errors.Is(err, class) {
			cut.is = append(cut.is, class)
		}
	}
	return cut
}

// cutError is an error whose text was cut; it is still what it was for
// errors.Is.
type cutError struct {
	text string
	is   []error
}

func (e *cutError) Error() string        { return e.text }
func (e *cutError) Is(target error) bool { return slices.Contains(e.is, target) }

// ErrAgentResource marks a probe that could not run because the agent (or
// its node) is out of a resource it needs for a connection: that is no
// answer from the target, so it is an error (kubelet's "could not probe":
// retried, never a failure counted towards a restart), not a Failure.
var ErrAgentResource = errors.New("cannot probe: the agent is out of a resource")

// agentResources are the errors of the agent's own shortages, with the
// label ResourceCause gives them and what they mean.
var agentResources = []struct {
	errno syscall.Errno
	label string
	what  string
}{
	{syscall.EMFILE, "EMFILE", "agent out of file descriptors"},
	{syscall.ENFILE, "ENFILE", "node out of file descriptors"},
	// connect(2) says so when no ephemeral port is left.
	{syscall.EADDRNOTAVAIL, "EADDRNOTAVAIL", "node out of local ports"},
	{syscall.ENOBUFS, "ENOBUFS", "node out of socket buffers"},
	{syscall.ENOMEM, "ENOMEM", "node out of memory for a socket"},
}

func agentErrnos() []error {
	errnos := make([]error, len(agentResources))
	for i, r := range agentResources {
		errnos[i] = r.errno
	}
	return errnos
}

// ResourceCauses lists every label ResourceCause gives, for metrics.
func ResourceCauses() []string {
	labels := make([]string, len(agentResources))
	for i, r := range agentResources {
		labels[i] = r.label
	}
	return labels
}

// ResourceCause names the shortage behind err ("EMFILE", "ENFILE",
// "EADDRNOTAVAIL", "ENOBUFS", "ENOMEM") or says "" if it is none of them:
// a bounded label, for metrics.
func ResourceCause(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range agentResources {
		if errors.Is(err, r.errno) {
			return r.label
		}
	}
	return ""
}

// resourceError is ErrAgentResource for one shortage.
type resourceError struct {
	what, label string
	err         error
}

func (e *resourceError) Error() string {
	return "cannot probe: " + e.what + " (" + e.label + "): " + e.err.Error()
}
func (e *resourceError) Is(target error) bool { return target == ErrAgentResource }
func (e *resourceError) Unwrap() error        { return e.err }

// agentError is err as ErrAgentResource if the agent's own shortage caused
// it, else nil.
func agentError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrAgentResource) {
		return err
	}
	for _, r := range agentResources {
		if errors.Is(err, r.errno) {
			return &resourceError{what: r.what, label: r.label, err: err}
		}
	}
	return nil
}

// transportCause classifies a dial or transport error by its type.
func transportCause(err error) Cause {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return CauseTimeout
	default:
		return CauseNetwork
	}
}

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	default:
		return "failure"
	}
}

// Procs is the GOMAXPROCS for a process that runs many network probes, given
// the runtime's default (the usable CPUs). With SO_LINGER, a probe's close()
// blocks in the kernel until the peer acknowledges the FIN, and the Go
// runtime keeps that thread's processor until its monitor takes it back; on
// two cores, 1,000 probes a second then leave other probes waiting for tens
// of milliseconds (make bench: p99 lateness 28 ms at the default, 2 ms at
// four). The blocked threads use no CPU, so extra processors cost little.
func Procs(defaultProcs int) int {
	return max(4, 2*defaultProcs)
}
