package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client reaches an agent listening on a unix socket, and never prints
// the password a --server URL carries.
func TestClientServerURLs(t *testing.T) {
	dir, err := os.MkdirTemp("", "cli")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"pods":[]}`))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	_, err = NewClient("unix://"+socket, nil).Pods(context.Background())
	require.NoError(t, err)

	// --listen's own forms, as the help suggests: host:port and :port.
	tcp := httptest.NewServer(srv.Handler)
	t.Cleanup(tcp.Close)
	hostPort := strings.TrimPrefix(tcp.URL, "http://")
	_, err = NewClient(hostPort, nil).Pods(context.Background())
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(hostPort)
	_, err = NewClient(":"+port, nil).Pods(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9440", serverURL(":9440"))
	assert.Equal(t, "https://node1:9440", serverURL("https://node1:9440"))

	_, err = NewClient("http://prometheus:s3cret@127.0.0.1:1", nil).Pods(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "cannot reach the agent at http://prometheus:xxxxx@127.0.0.1:1")
}
