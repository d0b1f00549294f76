// Package netprobe probes an address over the network the way kubelet does:
// HTTP GET, TCP connect and gRPC health checks. Each probe is a leaf that
// knows nothing of pods or containers: it gets an address and a timeout and
// says Success, Warning or Failure with kubelet's output text, or returns an
// error when it could not probe at all.
package netprobe

import (
	"context"
	"errors"
	"net"
	"syscall"
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

// dialer sets SO_LINGER to 1 s on probe sockets so that thousands of probes
// do not leave thousands of sockets in TIME_WAIT (kubernetes#89898).
func dialer() *net.Dialer {
	return &net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			var sockErr error
			err := c.Control(func(fd uintptr) {
				sockErr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
			})
			if err != nil {
				return err
			}
			return sockErr
		},
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
