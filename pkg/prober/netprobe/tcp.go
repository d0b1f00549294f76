package netprobe

import (
	"context"
	"errors"
	"time"
)

// TCP connects to addr and closes at once: Success if the connection is
// accepted, else Failure with the dial error. Nothing is sent or read, so a
// listening socket whose application is broken still passes, as in kubelet.
func TCP(ctx context.Context, addr string, timeout time.Duration) (Verdict, error) {
	d := dialer()
	d.Timeout = timeout
	conn, err := dial(ctx, d, "tcp", addr)
	switch {
	case errors.Is(err, ErrNetNS):
		return failure(CauseNetwork, ""), err
	case err != nil:
		return failure(transportCause(err), err.Error()), nil
	}
	conn.Close()
	return success(""), nil
}
