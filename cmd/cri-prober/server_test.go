package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// impostorAnswer is what a process holding the agent's address answers:
// an escape sequence that retitles and clears the terminal, and a forged
// log line.
const impostorAnswer = "\x1b]0;owned\a\x1b[2J\nE1126 00:00:00.000000 1 forged.go:1] \"all pods healthy\""

// impostor serves the agent's API as someone else would, on a loopback
// port (printed) and on the unix socket at path, until killed: the child
// of TestCLIRefusesAServerThatIsNotTheAgent, run as another user.
func impostor(path string) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, impostorAnswer) //nolint:errcheck // best effort
	})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	unixL, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(unixL, h) //nolint:errcheck // until killed
	fmt.Println(tcp.Addr())
	http.Serve(tcp, h) //nolint:errcheck // until killed
}

// A process of another user holding the agent's address (a local user
// can bind 127.0.0.1:9440 while the agent restarts) is refused by the
// CLI, on a loopback port and on a unix socket, and nothing it sent is
// printed. Fails on the old code: the CLI printed its answer raw.
func TestCLIRefusesAServerThatIsNotTheAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the impostor as another user")
	}
	dir, err := os.MkdirTemp("", "impostor")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chown(dir, 65534, 65534), "the impostor makes its socket here")
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	bin := filepath.Join(dir, "impostor")
	require.NoError(t, os.WriteFile(bin, self, 0o755))
	socket := filepath.Join(dir, "api.sock")

	cmd := exec.Command(bin, "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CRI_PROBER_TEST_IMPOSTOR="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // killed
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	addr := strings.TrimSpace(line)

	for _, server := range []string{addr, "unix://" + socket} {
		var stdout, stderr bytes.Buffer
		code := report(run(context.Background(), []string{"status", "--server", server}, &stdout, &stderr), &stderr)
		assert.NotZero(t, code, server)
		assert.Contains(t, stderr.String(), "belongs to uid 65534", server)
		assert.NotContains(t, stderr.String()+stdout.String(), "forged", server)
		assert.NotContains(t, stderr.String(), "\x1b", server)
	}
}

// What a trusted server sends in an error is printed on one line with
// escape sequences escaped: it may carry what a workload sent.
func TestCLIPrintsServerErrorsSafely(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, impostorAnswer) //nolint:errcheck // test
	})}
	go srv.Serve(l) //nolint:errcheck // closed below
	t.Cleanup(func() { srv.Close() })
	var stdout, stderr bytes.Buffer
	code := report(run(context.Background(), []string{"status", "--server", l.Addr().String()}, &stdout, &stderr), &stderr)
	assert.NotZero(t, code)
	assert.NotContains(t, stderr.String(), "\x1b")
	assert.NotContains(t, stderr.String(), "\nE1126", "no forged log line")
	assert.Contains(t, stderr.String(), `\x1b]0;owned`)
}

// The kernel's TCP tables, as /proc/net/tcp prints them.
func TestParseProcAddr(t *testing.T) {
	got, err := parseProcAddr("0100007F:24D0")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.1:9424"), got)
	got, err = parseProcAddr("00000000000000000000000001000000:24D0")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort("[::1]:9424"), got)
	_, err = parseProcAddr("zz")
	assert.Error(t, err)
}
