package cri

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrCommandTimedOut is returned by ExecSync when the command did not finish
// within its timeout. Probe code maps it to a failure, never to an error that
// would be retried and discarded (kubelet's ExecProbeTimeout semantics).
var ErrCommandTimedOut = errors.New("command timed out")

// ErrExecReplyTooLarge is returned by ExecSync when the command printed more
// than the client accepts: the probe could not be judged (its exit code came
// in the refused reply), an error rather than a failure.
var ErrExecReplyTooLarge = errors.New("the runtime's exec reply is larger than the limit")

// IsNotFound reports whether err says the runtime does not know the object:
// a container or sandbox removed between two calls. status.Code looks through
// wrapped errors.
func IsNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// IsUnavailable reports whether err says the runtime could not be reached.
func IsUnavailable(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// Cause returns the runtime's own error inside err, without the context
// this client adds to it ("pull image busybox:latest: …"): the error as
// kubelet's CRI client returns it, whose text kubelet puts in its events
// and waiting messages (a gRPC status error's "rpc error: code = … desc =
// …", or for a pull the runtime's message alone). An error this client
// did not wrap is returned as it is.
func Cause(err error) error {
	for err != nil {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
	return nil
}
