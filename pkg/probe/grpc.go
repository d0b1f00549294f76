package probe

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// GRPCMaxHeaderList bounds the headers and trailers (the status message
// among them) a gRPC server may send; gRPC's default is 16 MiB.
const GRPCMaxHeaderList = 16 * 1024

// GRPCMaxMessage bounds a health answer, a few bytes; gRPC's default is
// 4 MiB.
const GRPCMaxMessage = 64 * 1024

// GRPCHealth calls grpc.health.v1.Health/Check on addr for service ("" is
// the server as a whole) over plaintext, connecting through d, as kubelet
// does: one deadline of timeout covers connecting and the call, and
// connecting waits for the connection (so a closed port fails only when the
// timeout is up). Every problem is a Failure with kubelet's wording; the
// only errors are those of a probe that could not run (ErrNetNS,
// ErrAgentResource, ErrDestinationRefused). Headers and the answer are
// bounded (GRPCMaxHeaderList, GRPCMaxMessage), and so is the server's
// status message in the output. With a transcript (nil: none), it records
// the connection and the call there.
func GRPCHealth(ctx context.Context, d *Dialer, addr, service, userAgent string, timeout time.Duration, tr *Transcript) (Verdict, error) {
	rec := tr.begin("grpc", addr, timeout)
	rec.grpcCall(service, userAgent)
	v, err := doGRPC(ctx, d, addr, service, userAgent, timeout, rec)
	rec.end(v, err)
	return v, err
}

func doGRPC(ctx context.Context, d *Dialer, addr, service, userAgent string, timeout time.Duration, rec *recording) (Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	netNS := netNSFrom(ctx) // gRPC's dial context does not carry ours
	// gRPC keeps only the text of a dial error, and retries: the last one
	// says whether the probe could not run at all.
	var lastDialErr atomic.Pointer[error]
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithUserAgent(userAgent),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithMaxHeaderListSize(GRPCMaxHeaderList),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(GRPCMaxMessage)),
		grpc.WithContextDialer(func(dialCtx context.Context, addr string) (net.Conn, error) {
			if netNS != "" {
				dialCtx = WithNetNS(dialCtx, netNS)
			}
			conn, err := dial(rec.netTrace(dialCtx), d.netDialer(), "tcp", addr)
			lastDialErr.Store(&err)
			if cannotProbe(err) {
				// Final, as for HTTP and TCP (the dispatcher retries a
				// probe that could not run): no waiting out the timeout
				// for gRPC's own retries.
				cancel()
			}
			rec.connected(conn)
			return conn, err
		}),
	)
	if err != nil {
		return failure(CauseNetwork, bounded.String(fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), bounded.Message)), nil
	}
	defer conn.Close()
	if err := waitReady(ctx, conn); err != nil {
		if e := lastDialErr.Load(); e != nil && cannotProbe(*e) {
			return failure(CauseNetwork, ""), couldNotProbe(*e)
		}
		return failure(CauseTimeout, bounded.String(fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), bounded.Message)), nil
	}

	rec.grpcSent()
	resp, err := healthpb.NewHealthClient(conn).Check(metadata.NewOutgoingContext(ctx, metadata.MD{}), &healthpb.HealthCheckRequest{Service: service})
	rec.grpcAnswer(resp, err)
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unimplemented:
				return failure(CauseNotServing, bounded.String(fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), bounded.Message)), nil
			case codes.DeadlineExceeded:
				return failure(CauseTimeout, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)), nil
			}
		}
		return failure(CauseNetwork, bounded.String(fmt.Sprintf("error: health rpc probe failed: %+v", err), bounded.Message)), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return failure(CauseNotServing, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())), nil
	}
	return success("service healthy"), nil
}

// waitReady connects and waits until the connection is ready or ctx ends,
// retrying refused connections meanwhile: the blocking dial kubelet uses.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}
