package netprobe

import (
	"context"
	"errors"
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
)

// GRPCHealth calls grpc.health.v1.Health/Check on addr for service ("" is
// the server as a whole) over plaintext, as kubelet does: one deadline of
// timeout covers connecting and the call, and connecting waits for the
// connection (so a closed port fails only when the timeout is up). Every
// problem is a Failure with kubelet's wording; the only error is ErrNetNS
// (the probe could not run from the pod's network namespace).
func GRPCHealth(ctx context.Context, addr, service, userAgent string, timeout time.Duration) (Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	netNS := netNSFrom(ctx) // gRPC's dial context does not carry ours
	var nsErr atomic.Pointer[error]
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithUserAgent(userAgent),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(dialCtx context.Context, addr string) (net.Conn, error) {
			if netNS != "" {
				dialCtx = WithNetNS(dialCtx, netNS)
			}
			conn, err := dial(dialCtx, dialer(), "tcp", addr)
			if errors.Is(err, ErrNetNS) {
				nsErr.Store(&err)
			}
			return conn, err
		}),
	)
	if err != nil {
		return failure(CauseNetwork, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err)), nil
	}
	defer conn.Close()
	if err := waitReady(ctx, conn); err != nil {
		if e := nsErr.Load(); e != nil {
			return failure(CauseNetwork, ""), *e
		}
		return failure(CauseTimeout, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err)), nil
	}

	resp, err := healthpb.NewHealthClient(conn).Check(metadata.NewOutgoingContext(ctx, metadata.MD{}), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unimplemented:
				return failure(CauseNotServing, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())), nil
			case codes.DeadlineExceeded:
				return failure(CauseTimeout, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)), nil
			}
		}
		return failure(CauseNetwork, fmt.Sprintf("error: health rpc probe failed: %+v", err)), nil
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
