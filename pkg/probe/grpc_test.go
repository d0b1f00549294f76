package probe

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func startGRPC(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// hangingHealth never answers until its context ends.
type hangingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (hangingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestGRPCHealth(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
	healthy := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	noHealth := startGRPC(t, func(*grpc.Server) {})
	hanging := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hangingHealth{}) })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name       string
		addr       string
		service    string
		timeout    time.Duration
		wantResult Result
		wantOutput string
		wantCause  Cause
	}{
		{name: "serving", addr: healthy, wantResult: Success, wantOutput: "service healthy"},
		{name: "not serving", addr: healthy, service: "sick", wantResult: Failure, wantOutput: `service unhealthy (responded with "NOT_SERVING")`, wantCause: CauseNotServing},
		{name: "unknown service", addr: healthy, service: "nope", wantResult: Failure, wantOutput: "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service", wantCause: CauseNetwork},
		{name: "no health service", addr: noHealth, wantResult: Failure, wantOutput: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health", wantCause: CauseNotServing},
		{name: "hanging server", addr: hanging, timeout: 200 * time.Millisecond, wantResult: Failure, wantOutput: "timeout: health rpc did not complete within 200ms", wantCause: CauseTimeout},
		{name: "closed port", addr: closedAddr, timeout: 200 * time.Millisecond, wantResult: Failure, wantOutput: `timeout: failed to connect service "` + closedAddr + `" within 200ms: context deadline exceeded`, wantCause: CauseTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 2 * time.Second
			}
			v, err := GRPCHealth(context.Background(), NewDialer(), tt.addr, tt.service, testUA, timeout, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, v.Result)
			assert.Equal(t, tt.wantOutput, v.Output)
			assert.Equal(t, tt.wantCause, v.Cause)
		})
	}
}
