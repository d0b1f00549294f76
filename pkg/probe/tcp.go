package probe

import (
	"context"
	"time"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// TCP connects to addr through d and closes at once: Success if the
// connection is accepted, else Failure with the dial error; an error if the
// probe could not run (ErrNetNS, ErrAgentResource, ErrDestinationRefused).
// Nothing is sent or read, so a listening socket whose application is
// broken still passes, as in kubelet. With a transcript (nil: none), it
// records the connection there.
func TCP(ctx context.Context, d *Dialer, addr string, timeout time.Duration, tr *Transcript) (Verdict, error) {
	rec := tr.begin("tcpSocket", addr, timeout)
	v, err := doTCP(rec.netTrace(ctx), d, addr, timeout, rec)
	rec.end(v, err)
	return v, err
}

func doTCP(ctx context.Context, d *Dialer, addr string, timeout time.Duration, rec *recording) (Verdict, error) {
	nd := d.netDialer()
	nd.Timeout = timeout
	conn, err := dial(ctx, nd, "tcp", addr)
	switch {
	case cannotProbe(err):
		return failure(CauseNetwork, ""), couldNotProbe(err)
	case err != nil:
		return failure(transportCause(err), bounded.String(err.Error(), bounded.Message)), nil
	}
	rec.connected(conn)
	conn.Close()
	return success(""), nil
}
