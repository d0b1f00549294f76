package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A credential a target echoes is redacted before the output is bounded:
// a token longer than the bound, in the URL of an error, leaves none of
// itself behind (it used to leave its first KiB). A body that echoes it
// is redacted too.
func TestCredentialsRedactedBeforeTheBound(t *testing.T) {
	token := strings.Repeat("s3cr3t", 400) // 2,400 bytes, past bounded.Message
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			w.Header().Set("Location", "http://elsewhere.invalid/") // another host: not followed
			w.WriteHeader(http.StatusFound)
			w.Write([]byte("your token: " + token))
			return
		}
		http.Redirect(w, r, "/loop?t="+token, http.StatusFound) // a redirect loop: an error naming the URL
	}))
	t.Cleanup(srv.Close)
	host, port := target(t, srv.URL)
	header := http.Header{"Authorization": {"Bearer " + token}}

	for _, path := range []string{"/loop", "/echo"} {
		req, err := NewRequest("http", host, port, path, header, testUA)
		require.NoError(t, err)
		v, err := NewHTTPGet(NewDialer()).ProbeChecked(context.Background(), req, 5*time.Second, HTTPCheck{}, nil)
		require.NoError(t, err, path)
		t.Logf("%s: %.120s", path, v.Output)
		assert.NotContains(t, v.Output, "s3cr3t", "%s: %s", path, v.Output)
		assert.Contains(t, v.Output, "[redacted]", path)
	}
}
