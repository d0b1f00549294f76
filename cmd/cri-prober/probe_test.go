package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestIsAddress(t *testing.T) {
	for arg, want := range map[string]bool{
		"http://127.0.0.1:8080/healthz": true,
		"https://example.com":           true,
		"grpc://10.0.0.5:5000/svc":      true,
		"ftp://x/":                      true, // an address, refused as one (a clear error)
		"127.0.0.1:5432":                true,
		"db.example:5432":               true,
		"[::1]:80":                      true,
		"[::1]":                         true,
		"web":                           false,
		"shop/web":                      false,
		"localhost":                     false, // a pod name as much as a host: the error says how to give an address
	} {
		assert.Equal(t, want, isAddress(arg), arg)
	}
}

// The address as the only argument is --address: a URL is an HTTP GET of
// it, HOST:PORT a TCP connect, grpc://HOST:PORT/SERVICE a gRPC health
// check, each against a real server; with the inline flags it aims them.
func TestProbeAnAddressArgument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	hostPort := strings.TrimPrefix(srv.URL, "http://")

	l, err := net.Listen("tcp", "127.0.0.1:9623") // in this worktree's port range
	require.NoError(t, err)
	grpcSrv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("shop.Cart", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("shop.Pay", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(grpcSrv, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		grpcSrv.Serve(l) //nolint:errcheck // returns when stopped
	}()
	t.Cleanup(func() { grpcSrv.Stop(); <-served })

	for _, tt := range []struct {
		name    string
		args    []string
		wantErr error
		want    string
	}{
		{name: "URL", args: []string{srv.URL + "/healthz"}, want: "result:   success\noutput:   ok\n"},
		{name: "URL failing", args: []string{srv.URL + "/ready"}, wantErr: errProblemsFound, want: "HTTP probe failed with statuscode: 503"},
		{name: "HOST:PORT is a TCP connect", args: []string{hostPort}, want: "result:   success"},
		{name: "HOST:PORT refused", args: []string{"127.0.0.1:9624"}, wantErr: errProblemsFound, want: "connection refused"},
		{name: "HOST:PORT with an inline path", args: []string{hostPort, "--http-get", "/healthz"}, want: "output:   ok"},
		{name: "gRPC service serving", args: []string{"grpc://127.0.0.1:9623/shop.Cart"}, want: "result:   success"},
		{name: "gRPC service not serving", args: []string{"grpc://127.0.0.1:9623/shop.Pay"}, wantErr: errProblemsFound, want: "service unhealthy (responded with \"NOT_SERVING\")"},
		{name: "gRPC server's overall health", args: []string{"grpc://127.0.0.1:9623"}, want: "result:   success"},
		{name: "gRPC URL with --grpc's service", args: []string{"127.0.0.1:9623", "--grpc", "/shop.Pay"}, wantErr: errProblemsFound, want: "NOT_SERVING"},
		{name: "json", args: []string{srv.URL + "/healthz", "-o", "json"}, want: `"result": "success"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runCLI(t, append([]string{"probe"}, tt.args...)...)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr, errOut)
			} else {
				require.NoError(t, err, errOut)
			}
			assert.Contains(t, out, tt.want)
		})
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"ftp://x/"}, `error: ftp://x/: address "ftp://x/": a URL's scheme must be http or https (an httpGet probe) or grpc (grpc://HOST:PORT[/SERVICE]); or give HOST:PORT (a TCP connect)`},
		{[]string{"grpc://127.0.0.1/shop.Cart"}, `names no port: give grpc://HOST:PORT[/SERVICE]`},
		{[]string{srv.URL, "--address", hostPort}, "the address is given twice (argument and --address): give one"},
		{[]string{hostPort, "-c", "app"}, "give either a container (POD -c NAME, --container-id) or an address (" + hostPort + "), not both"},
		{[]string{"grpc://" + hostPort, "--http-get", "/healthz"}, "is a gRPC URL, for a grpc probe"},
		{[]string{"localhost"}, "or, with no container, an address as the only argument: http(s)://HOST[:PORT]/PATH (an HTTP GET), HOST:PORT (a TCP connect) or grpc://HOST:PORT[/SERVICE] (a gRPC health check)"},
		{nil, "give a probe: for a container (POD -c NAME, or --container-id ID)"},
		{[]string{"shop/web", "-c", "app", "--liveness", "--readiness"}, "give exactly one probe"},
	} {
		_, errOut, err := runCLI(t, append([]string{"probe"}, tt.args...)...)
		assert.ErrorIs(t, err, errUsage, "%v", tt.args)
		assert.Contains(t, errOut, tt.want, "%v", tt.args)
	}
}
