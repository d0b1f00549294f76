package probe

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestProcs(t *testing.T) {
	for _, tt := range []struct{ cpus, want int }{{1, 4}, {2, 4}, {3, 6}, {8, 16}} {
		assert.Equal(t, tt.want, Procs(tt.cpus), "%d CPUs", tt.cpus)
	}
}

// kubelet's probe dialer (used by HTTP, TCP and gRPC probes here) sets
// SO_LINGER on, 1 s, so that thousands of probes do not fill TIME_WAIT
// (kubernetes#89898); Procs exists because of its blocking close.
func TestProbeSocketsLingerOneSecond(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	conn, err := NewDialer().netDialer().DialContext(context.Background(), "tcp", l.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var linger *unix.Linger
	var sockErr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		linger, sockErr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER)
	}))
	require.NoError(t, sockErr)
	assert.Equal(t, unix.Linger{Onoff: 1, Linger: 1}, *linger)
}
