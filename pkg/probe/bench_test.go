package probe

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTPProbe compares an HTTP probe done with cri-prober's shared
// transport with the same probe done with a new transport per probe, both
// against the same loopback server in one run. cpu-ns/op is the whole
// process's CPU (client and server) per probe.
func BenchmarkHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	host, port := target(&testing.T{}, srv.URL)
	probe := func(b *testing.B, get *HTTPGet) {
		req, err := NewRequest("http", host, port, "/healthz", nil, testUA)
		if err != nil {
			b.Fatal(err)
		}
		r, out, err := split(get.Probe(context.Background(), req, time.Second, nil))
		if err != nil || r != Success {
			b.Fatalf("probe: %v %v %s", r, err, out)
		}
	}
	run := func(b *testing.B, next func() *HTTPGet) {
		b.ReportAllocs()
		start := cpuTime(b)
		for b.Loop() {
			probe(b, next())
		}
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
	b.Run("shared-transport", func(b *testing.B) {
		shared := NewHTTPGet(NewDialer())
		run(b, func() *HTTPGet { return shared })
	})
	b.Run("transport-per-probe", func(b *testing.B) {
		run(b, func() *HTTPGet {
			g := NewHTTPGet(NewDialer())
			return &HTTPGet{transport: &http.Transport{
				DialContext:        g.transport.DialContext,
				TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kubelet
				DisableKeepAlives:  true,
				DisableCompression: true,
			}}
		})
	})
}

// BenchmarkTCPProbe is one TCP connect-and-close probe.
func BenchmarkTCPProbe(b *testing.B) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		if r, out, _ := split(TCP(context.Background(), NewDialer(), addr, time.Second, nil)); r != Success {
			b.Fatal(out)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkBodyMatch is the cost of HTTPCheck.BodyMustMatch over a whole
// (MaxBody) body, as the probe matches it (through a reader the probe's
// deadline stops) and, for comparison, with MatchString, which cannot be
// stopped but can skip ahead to a literal.
func BenchmarkBodyMatch(b *testing.B) {
	body := strings.Repeat("a", MaxBody-20) + `{"status": "ok"}`
	for _, tt := range []struct{ name, expr string }{
		{"field", `"status":\s*"ok"`},
		{"anchored", `^a+`},
		{"whole", `(?s)^.*"ok"\}$`},
	} {
		re := regexp.MustCompile(tt.expr)
		b.Run(tt.name+"/probe", func(b *testing.B) {
			deadline := time.Now().Add(time.Hour)
			for b.Loop() {
				if matched, finished := matchBefore(context.Background(), deadline, re, body); !matched || !finished {
					b.Fatal("no match")
				}
			}
		})
		b.Run(tt.name+"/MatchString", func(b *testing.B) {
			for b.Loop() {
				if !re.MatchString(body) {
					b.Fatal("no match")
				}
			}
		})
	}
}

// BenchmarkTranscriptHTTPProbe is BenchmarkHTTPProbe's shared-transport
// probe recorded in a transcript (probe --debug): what recording costs.
// Without one, a probe allocates nothing more (TestNoTranscriptAllocatesNothing).
func BenchmarkTranscriptHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	host, port := target(&testing.T{}, srv.URL)
	get := NewHTTPGet(NewDialer())
	b.ReportAllocs()
	for b.Loop() {
		req, err := NewRequest("http", host, port, "/healthz", nil, testUA)
		if err != nil {
			b.Fatal(err)
		}
		tr := &Transcript{}
		if v, err := get.Probe(context.Background(), req, time.Second, tr); err != nil || v.Result != Success {
			b.Fatalf("probe: %v %v %s", v.Result, err, v.Output)
		}
		tr.Finish("success", "ok", nil)
	}
}
