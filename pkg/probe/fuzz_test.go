package probe

import (
	"net"
	"net/http"
	"strconv"
	"testing"
)

// Any path, host and header from a spec builds a request for the address
// the spec names, a request that cannot be sent, or an error; never a
// panic, and never a request to another address.
func FuzzNewRequest(f *testing.F) {
	f.Add("http", "10.0.0.1", 8080, "/healthz?x=1", "Host", "example.com")
	f.Add("https", "fd00::1", 443, "%zz", "Accept", "")
	f.Add("http", "127.0.0.1", 0, "http://other.host/path", "User-Agent", "probe")
	f.Add("http", "host", 65535, "//evil/x#frag", "X-Custom", "a\r\nb")
	f.Fuzz(func(t *testing.T, scheme, host string, port int, path, headerName, headerValue string) {
		if scheme != "http" && scheme != "https" {
			scheme = "http" // the spec only allows these two
		}
		headers := http.Header{}
		headers.Add(headerName, headerValue)
		req, err := NewRequest(scheme, host, port, path, headers, "kube-probe/1.36")
		if err != nil {
			return
		}
		if req.URL.Host == "" {
			// A path such as "a:0" parses as an opaque URL that drops the
			// host, in kubelet's formatURL too: the transport refuses it
			// ("no Host in request URL") and the probe fails, as kubelet's.
			if _, err := http.DefaultTransport.RoundTrip(req); err == nil {
				t.Fatalf("path %q: a request without a host was sent", path)
			}
			return
		}
		if want := net.JoinHostPort(host, strconv.Itoa(port)); req.URL.Host != want {
			t.Errorf("path %q: request for %q, want %q", path, req.URL.Host, want)
		}
		if req.URL.Scheme != scheme {
			t.Errorf("path %q: scheme %q, want %q", path, req.URL.Scheme, scheme)
		}
	})
}
