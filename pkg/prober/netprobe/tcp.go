package netprobe

import (
	"context"
	"errors"
	"time"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// TCP connects to addr and closes at once: Success if the connection is
// accepted, else Failure with the dial error; an error if the probe could
// not run (ErrNetNS, ErrAgentResource). Nothing is sent or read, so a
// listening socket whose application is broken still passes, as in kubelet.
// With a transcript in ctx (WithTranscript), it records the connection
// there.
func TCP(ctx context.Context, addr string, timeout time.Duration) (Verdict, error) {
	rec := transcriptFrom(ctx).begin("tcpSocket", addr, timeout)
	v, err := doTCP(rec.netTrace(ctx), addr, timeout, rec)
	rec.end(v, err)
	return v, err
}

func doTCP(ctx context.Context, addr string, timeout time.Duration, rec *recording) (Verdict, error) {
	d := dialer()
	d.Timeout = timeout
	conn, err := dial(ctx, d, "tcp", addr)
	switch {
	case errors.Is(err, ErrNetNS), errors.Is(err, ErrAgentResource):
		return failure(CauseNetwork, ""), couldNotProbe(err)
	case err != nil:
		return failure(transportCause(err), bounded.String(err.Error(), bounded.Message)), nil
	}
	rec.connected(conn)
	conn.Close()
	return success(""), nil
}
