package main

import (
	"encoding/json"
	"fmt"
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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func TestAtAddress(t *testing.T) {
	service := "api"
	httpGet := &corev1.Probe{TimeoutSeconds: 3, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/healthz", Port: intstr.FromString("http"), Host: "ignored.example", Scheme: corev1.URISchemeHTTP,
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}}
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}
	grpcProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000, Service: &service}}}
	execProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	defaulted := func(p *corev1.Probe) *corev1.Probe {
		spec.DefaultProbe(p)
		return p
	}
	// wantHTTP is the httpGet probe expected, with timeout 3 and httpGet's
	// header when withProbe (the row aims httpGet).
	wantHTTP := func(withProbe bool, scheme corev1.URIScheme, port int, path string) *corev1.Probe {
		h := &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port), Scheme: scheme}
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: h}}
		if withProbe {
			p.TimeoutSeconds, h.HTTPHeaders = 3, []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}}
		}
		return defaulted(p)
	}
	tests := []struct {
		name     string
		probe    *corev1.Probe
		address  string
		want     *corev1.Probe
		wantHost string
		wantErr  string
	}{
		{
			name: "HOST:PORT replaces an httpGet probe's host and port", probe: httpGet, address: "10.0.0.5:9090",
			want: wantHTTP(true, corev1.URISchemeHTTP, 9090, "/healthz"), wantHost: "10.0.0.5",
		},
		{
			name: "a URL alone is an httpGet probe with kubelet's defaults", address: "https://example.com/ready?full=1#frag",
			want: wantHTTP(false, corev1.URISchemeHTTPS, 443, "/ready?full=1"), wantHost: "example.com",
		},
		{
			name: "a URL keeps the probe's headers and timeout", probe: httpGet, address: "HTTP://127.0.0.1:8080",
			want: wantHTTP(true, corev1.URISchemeHTTP, 8080, "/"), wantHost: "127.0.0.1",
		},
		{
			name: "an escaped path stays escaped", address: "http://[::1]:8080/a%2Fb?x=%20",
			want: wantHTTP(false, corev1.URISchemeHTTP, 8080, "/a%2Fb?x=%20"), wantHost: "::1",
		},
		{
			name: "IPv6 HOST:PORT for a TCP probe", probe: tcp, address: "[fd00::1]:8443",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(8443)}}}),
			wantHost: "fd00::1",
		},
		{
			name: "a HOST alone keeps the probe's port", probe: tcp, address: "::1",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}),
			wantHost: "::1",
		},
		{
			name: "gRPC", probe: grpcProbe, address: "localhost:5000",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5000, Service: &service}}}),
			wantHost: "localhost",
		},
		{
			name: "a gRPC URL alone is a grpc probe of its service", address: "grpc://10.0.0.5:5000/my.Service",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5000, Service: new("my.Service")}}}),
			wantHost: "10.0.0.5",
		},
		{
			name: "a gRPC URL without a path: the server's overall health", address: "GRPC://[::1]:5000",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5000}}}),
			wantHost: "::1",
		},
		{
			name: "a gRPC URL aims a grpc probe, its service kept", probe: grpcProbe, address: "grpc://localhost:7000",
			want:     defaulted(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 7000, Service: &service}}}),
			wantHost: "localhost",
		},
		{name: "exec at a gRPC URL", probe: execProbe, address: "grpc://127.0.0.1:5000", wantErr: "an exec probe runs in a container"},
		{name: "a gRPC URL has a port", address: "grpc://localhost/x", wantErr: `names no port: give grpc://HOST:PORT[/SERVICE]`},
		{name: "a gRPC URL for an httpGet probe", probe: httpGet, address: "grpc://localhost:5000", wantErr: "is a gRPC URL, for a grpc probe"},
		{name: "a gRPC URL with a query", address: "grpc://localhost:5000/?x=1", wantErr: "with no credentials, query or fragment"},
		{name: "a HOST alone with a named port", probe: httpGet, address: "web.example", wantErr: `address "web.example" has no port and the probe's port "http" is not a number`},
		{name: "exec", probe: execProbe, address: "127.0.0.1:80", wantErr: "an exec probe runs in a container"},
		{name: "a URL for a TCP probe", probe: tcp, address: "http://127.0.0.1:80/", wantErr: "is a URL, for an httpGet probe"},
		{name: "credentials in the URL", address: "http://user:pw@127.0.0.1/", wantErr: "cannot carry credentials"},
		{name: "port 0", probe: tcp, address: "127.0.0.1:0", wantErr: `invalid port "0"`},
		{name: "port not a number", probe: tcp, address: "127.0.0.1:http", wantErr: `invalid port "http"`},
		{name: "no host", probe: tcp, address: ":8080", wantErr: "names no host"},
		{name: "another scheme", probe: tcp, address: "ftp://127.0.0.1/", wantErr: "a URL's scheme must be http or https (an httpGet probe) or grpc (grpc://HOST:PORT[/SERVICE]); or give HOST:PORT (a TCP connect)"},
		{name: "a URL without a host", address: "http:///healthz", wantErr: "names no host"},
		{name: "neither HOST:PORT nor a URL", probe: tcp, address: "127.0.0.1/healthz", wantErr: "want HOST:PORT or a URL"},
		{name: "no probe, no URL", address: "127.0.0.1:80", wantErr: "no probe to aim at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *corev1.Probe
			if tt.probe != nil {
				before = tt.probe.DeepCopy()
			}
			got, target, err := atAddress(tt.probe, tt.address)
			assert.Equal(t, before, tt.probe, "the probe given is left alone")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, prober.Target{Host: tt.wantHost}, target)
			assert.Empty(t, spec.ValidateReadinessProbe(got), "a valid probe")
		})
	}
}

// A probe at an address runs through the agent's handlers; a transcript
// records it and never changes the outcome.
func TestRunProbeAt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("fine"))
		case "/moved":
			http.Redirect(w, r, "http://192.0.2.1/", http.StatusFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	grpcSrv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(grpcSrv, hs)
	go grpcSrv.Serve(lis)
	defer grpcSrv.Stop()

	httpGet := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(1)}}}
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(1)}}}
	sick := "sick"
	grpcProbe := func(service *string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 1, Service: service}}}
	}
	tests := []struct {
		name       string
		probe      *corev1.Probe
		address    string
		wantRaw    results.Outcome
		wantOutput string
		wantText   string
	}{
		{name: "HTTP at HOST:PORT", probe: httpGet, address: addr, wantRaw: results.OutcomeSuccess, wantOutput: "fine", wantText: "> GET /ok HTTP/1.1"},
		{name: "HTTP at a URL", address: srv.URL + "/broken", wantRaw: results.OutcomeFailure, wantOutput: "HTTP probe failed with statuscode: 500", wantText: "< HTTP/1.1 500 Internal Server Error"},
		{name: "HTTP redirect elsewhere", address: srv.URL + "/moved", wantRaw: results.OutcomeWarning, wantOutput: "Probe terminated redirects, Response body: ", wantText: "Redirect not followed"},
		{name: "TCP", probe: tcp, address: addr, wantRaw: results.OutcomeSuccess, wantText: "Connected  address=" + addr},
		{name: "TCP refused", probe: tcp, address: closedAddr, wantRaw: results.OutcomeFailure,
			wantOutput: "dial tcp " + closedAddr + ": connect: connection refused", wantText: "Connection failed  address=" + closedAddr},
		{name: "gRPC serving", probe: grpcProbe(nil), address: lis.Addr().String(), wantRaw: results.OutcomeSuccess, wantOutput: "service healthy", wantText: "status=SERVING"},
		{name: "gRPC not serving", probe: grpcProbe(&sick), address: lis.Addr().String(), wantRaw: results.OutcomeFailure,
			wantOutput: `service unhealthy (responded with "NOT_SERVING")`, wantText: "status=NOT_SERVING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			without, err := runProbeAt(t.Context(), tt.probe, tt.address, nil, nil)
			require.NoError(t, err)
			tr := &probe.Transcript{}
			with, err := runProbeAt(t.Context(), tt.probe, tt.address, tr, nil)
			require.NoError(t, err)
			assert.Equal(t, without, with, "a transcript does not change the outcome")
			require.NoError(t, with.Err)
			assert.Equal(t, tt.wantRaw, with.Raw)
			assert.True(t, strings.HasPrefix(with.Output, tt.wantOutput), "output %q", with.Output)

			rec := tr.Record()
			require.NotNil(t, rec.Result)
			assert.Equal(t, probe.Final{Result: string(with.Raw), Output: with.Output, DurationMs: rec.Result.DurationMs}, *rec.Result)
			var text strings.Builder
			require.NoError(t, tr.Write(&text))
			assert.Contains(t, text.String(), tt.wantText)
			assert.Contains(t, text.String(), "  result:   "+string(with.Raw))
			_, err = json.Marshal(tr)
			require.NoError(t, err)
		})
	}
}

// The transcript keeps credentials out as the output does: the header's
// name shows it was sent, its value does not.
func TestRunProbeTranscriptRedactsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Header.Get("X-Api-Key"))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "no: %s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{HTTPHeaders: []corev1.HTTPHeader{
		{Name: "Authorization", Value: "Bearer s3cr3t-t0ken"}, {Name: "X-Api-Key", Value: "k3y-v4lue"}}}}}
	tr := &probe.Transcript{}
	out, err := runProbeAt(t.Context(), p, srv.URL, tr, nil)
	require.NoError(t, err)
	assert.Equal(t, results.OutcomeFailure, out.Raw)
	var text strings.Builder
	require.NoError(t, tr.Write(&text))
	j, err := json.Marshal(tr)
	require.NoError(t, err)
	for _, s := range []string{text.String(), string(j)} {
		assert.NotContains(t, s, "s3cr3t")
		assert.NotContains(t, s, "k3y-v4lue")
		assert.Contains(t, s, "Authorization: [redacted]")
		assert.Contains(t, s, "X-Seen: [redacted]")
	}
}

// A credential longer than a transcript keeps of a line (a JWT often is)
// is redacted before the line is cut: no part of it is kept, in a header
// line, a redirect's URL, the request line or a body excerpt.
func TestRunProbeTranscriptRedactsLongCredentials(t *testing.T) {
	token := strings.Repeat("eyJhbGciOi", 200) // 2000 bytes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/next?t="+token, http.StatusFound)
			return
		}
		fmt.Fprintf(w, "seen: %s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{HTTPHeaders: []corev1.HTTPHeader{
		{Name: "Authorization", Value: "Bearer " + token}}}}}
	tr := &probe.Transcript{}
	out, err := runProbeAt(t.Context(), p, srv.URL, tr, nil)
	require.NoError(t, err)
	assert.Equal(t, "seen: [redacted]", out.Output)
	var text strings.Builder
	require.NoError(t, tr.Write(&text))
	j, err := json.Marshal(tr)
	require.NoError(t, err)
	for _, s := range []string{text.String(), string(j)} {
		assert.NotContains(t, s, token[:64])
		assert.Contains(t, s, "Authorization: [redacted]")
		assert.Contains(t, s, "X-Seen: [redacted]")
		assert.Contains(t, s, "GET /next?t=[redacted] HTTP/1.1")
	}
}
