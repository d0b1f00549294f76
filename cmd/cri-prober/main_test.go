package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The child of TestSecondSignalExitsAtOnce: a command whose shutdown never
// ends.
func TestMain(m *testing.M) {
	if socket := os.Getenv("CRI_PROBER_TEST_IMPOSTOR"); socket != "" {
		impostor(socket)
		return
	}
	if os.Getenv("CRI_PROBER_TEST_STUCK_SHUTDOWN") != "" {
		ctx, stop := signalContext()
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("shutting down\n")
		select {} // a shutdown that hangs
	}
	os.Exit(m.Run())
}

// The first SIGTERM starts the shutdown; a second one ends the process at
// once, whatever the shutdown is waiting for.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CRI_PROBER_TEST_STUCK_SHUTDOWN=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	line := make([]byte, len("ready\n"))
	_, err = out.Read(line)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(line))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	line = make([]byte, len("shutting down\n"))
	_, err = out.Read(line)
	require.NoError(t, err)
	require.Equal(t, "shutting down\n", string(line))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		require.True(t, errors.As(err, &exitErr), "%v", err)
		assert.Equal(t, 128+int(syscall.SIGTERM), exitErr.ExitCode())
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGTERM did not end the process")
	}
}
