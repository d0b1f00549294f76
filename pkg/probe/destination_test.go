package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Link-local and cloud metadata addresses are refused however they are
// written (IPv4-mapped, with a zone, through NAT64), unless allowed; other
// addresses are not.
func TestDestinationPolicy(t *testing.T) {
	refused := map[string]string{
		"169.254.169.254:80":          "169.254.169.254",
		"169.254.170.2:80":            "169.254.170.2", // ECS task metadata
		"[::ffff:169.254.169.254]:80": "169.254.169.254",
		"[fe80::1%lo]:80":             "fe80::1",
		"[fd00:ec2::254]:80":          "fd00:ec2::254",
		"100.100.100.200:80":          "100.100.100.200",
		"[64:ff9b::a9fe:a9fe]:80":     "169.254.169.254", // NAT64
		"not an address":              "",
	}
	allowed := []string{"127.0.0.1:80", "10.0.0.5:8080", "[::1]:80", "100.100.100.201:80", "[fd00:ec2::253]:80", "[2001:db8::1]:443"}

	d := NewDialer()
	for address, shown := range refused {
		err := d.check(address)
		require.ErrorIs(t, err, ErrDestinationRefused, address)
		if shown != "" {
			assert.Contains(t, err.Error(), "refused to probe "+shown+" (", address)
			assert.Contains(t, err.Error(), "allow it with --allow-probe-destination "+netip.PrefixFrom(netip.MustParseAddr(shown), netip.MustParseAddr(shown).BitLen()).String())
		}
	}
	for _, address := range allowed {
		assert.NoError(t, d.check(address), address)
	}

	d = NewDialer(netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("fe80::/64"))
	assert.NoError(t, d.check("169.254.169.254:80"))
	assert.NoError(t, d.check("[::ffff:169.254.169.254]:80"), "allowed as the address it reaches")
	assert.NoError(t, d.check("[fe80::1%eth0]:80"))
	assert.ErrorIs(t, d.check("169.254.170.2:80"), ErrDestinationRefused, "only what is allowed")
}

// A refused destination is a probe that could not run (an error, never the
// target's failure), for every kind of probe, and says where it was aimed
// and how to allow it. gRPC says so at once, not after its timeout.
func TestRefusedDestinationCannotBeProbed(t *testing.T) {
	const metadata = "169.254.169.254:80"
	kinds := map[string]func(ctx context.Context) (Verdict, error){
		"HTTP": func(ctx context.Context) (Verdict, error) {
			req, err := NewRequest("http", "169.254.169.254", 80, "/computeMetadata/v1/instance/service-accounts/default/token",
				http.Header{"Metadata-Flavor": {"Google"}}, testUA)
			require.NoError(t, err)
			return NewHTTPGet(NewDialer()).Probe(ctx, req, time.Minute, nil)
		},
		"TCP": func(ctx context.Context) (Verdict, error) { return TCP(ctx, NewDialer(), metadata, time.Minute, nil) },
		"gRPC": func(ctx context.Context) (Verdict, error) {
			return GRPCHealth(ctx, NewDialer(), metadata, "", testUA, time.Minute, nil)
		},
	}
	for name, probe := range kinds {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			v, err := probe(context.Background())
			require.ErrorIs(t, err, ErrDestinationRefused)
			assert.True(t, cannotProbe(err))
			assert.Contains(t, err.Error(), "refused to probe 169.254.169.254 (")
			assert.Contains(t, err.Error(), "--allow-probe-destination 169.254.169.254/32")
			assert.Empty(t, v.Output, "nothing of a target")
			assert.Less(t, time.Since(start), 30*time.Second, "not the probe's timeout")
		})
	}
}

// refusing is a Dialer whose refusal is refuse, for addresses tests can
// serve (loopback).
func refusing(refuse func(netip.Addr) bool) *Dialer {
	return &Dialer{refusal: func(a netip.Addr) string {
		if refuse(a) {
			return "refused by the test"
		}
		return ""
	}}
}

// The check is on the address each connection goes to: a name is checked
// as what it resolves to, and a redirect's connection is checked as the
// first one is (so a name that resolves elsewhere the second time, DNS
// rebinding, is caught there).
func TestNamesAndRedirectsAreChecked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/next", http.StatusFound) // the same host: followed
			return
		}
		w.Write([]byte("the redirect's target"))
	}))
	defer srv.Close()
	_, port := target(t, srv.URL)

	t.Run("a name", func(t *testing.T) {
		d := refusing(func(a netip.Addr) bool { return a.IsLoopback() })
		_, err := TCP(context.Background(), d, net.JoinHostPort("localhost", strconv.Itoa(port)), time.Second, nil)
		require.ErrorIs(t, err, ErrDestinationRefused)
		assert.Regexp(t, `refused to probe (127\.0\.0\.1|::1) \(refused by the test\)`, err.Error())
	})
	t.Run("a redirect", func(t *testing.T) {
		var connections atomic.Int32
		d := refusing(func(netip.Addr) bool { return connections.Add(1) > 1 })
		req, err := NewRequest("http", "127.0.0.1", port, "/", nil, testUA)
		require.NoError(t, err)
		v, err := NewHTTPGet(d).Probe(context.Background(), req, time.Second, nil)
		require.ErrorIs(t, err, ErrDestinationRefused)
		assert.Empty(t, v.Output)
		assert.Equal(t, int32(2), connections.Load(), "the first request's connection, then the redirect's")
	})
}

// From a pod's network namespace too, a refused destination is refused,
// by name as by address.
func TestRefusedFromAPodsNetworkNamespace(t *testing.T) {
	path, inNS := privateNetNS(t)
	l := listenIn(t, inNS, "tcp", "127.0.0.1:0")
	ctx := WithNetNS(context.Background(), path)

	_, err := TCP(ctx, NewDialer(), "169.254.169.254:80", time.Second, nil)
	require.ErrorIs(t, err, ErrDestinationRefused)

	d := refusing(func(a netip.Addr) bool { return a.IsLoopback() })
	_, err = TCP(ctx, d, net.JoinHostPort("localhost", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), time.Second, nil)
	require.ErrorIs(t, err, ErrDestinationRefused)
	threadsAtHome(t)
}
