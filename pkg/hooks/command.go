package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

const (
	commandTimeout = 10 * time.Second
	// commandWaitDelay is how long the command's standard error may stay
	// open after it has ended (held by a process that left its group)
	// before it is closed and the delivery ends.
	commandWaitDelay = time.Second
)

// runCommand runs the command in a process group of its own and kills the
// group when the command has exited, at its timeout and when ctx ends.
//
// It does not use exec.CommandContext's Cancel: that runs on a goroutine of
// os/exec that may fire after Wait has reaped the command, when the
// group's ID may already belong to someone else. Here the group is only
// ever killed while its leader is alive or a zombie not yet reaped (seen
// with waitid and WNOWAIT), so the ID is still the command's.
func (h *Hooks) runCommand(ctx context.Context, t Transition, body []byte) ([]any, error) {
	cmd := exec.Command(h.command[0], h.command[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(),
		"CRI_PROBER_TRANSITION="+t.Transition, "CRI_PROBER_NAMESPACE="+t.Namespace,
		"CRI_PROBER_POD="+t.Pod, "CRI_PROBER_CONTAINER="+t.Container)
	stderr := &capped{limit: bounded.Output}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = h.waitDelay
	kv := []any{"command", h.command[0]}
	if err := cmd.Start(); err != nil {
		return kv, fmt.Errorf("--on-transition: %w", err)
	}
	pgid := cmd.Process.Pid // Setpgid(0): it leads a group of its own
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		awaitExit(pgid)
	}()
	timer := time.NewTimer(h.commandTimeout)
	defer timer.Stop()
	var cut error
	select {
	case <-exited:
	case <-timer.C:
		cut = fmt.Errorf("--on-transition still running after %s: its process group was killed", h.commandTimeout)
	case <-ctx.Done():
		cut = fmt.Errorf("--on-transition cut short, its process group killed: %w", context.Cause(ctx))
	}
	if cut != nil {
		killGroup(pgid)
		<-exited
	}
	// The leader has exited and is not reaped yet: the group's ID is still
	// its own. Whatever it left behind goes with it.
	killGroup(pgid)
	err := cmd.Wait()
	if out := stderr.String(); out != "" {
		kv = append(kv, "stderr", out)
	}
	switch {
	case cut != nil:
		return kv, cut
	case errors.Is(err, exec.ErrWaitDelay):
		return nil, nil // it succeeded; an escaped process held its standard error
	case err != nil:
		return kv, fmt.Errorf("--on-transition: %w", err)
	}
	return nil, nil
}

// awaitExit returns when process pid has exited, without reaping it.
func awaitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// killGroup kills every process of the group pgid; a group already gone is
// fine.
func killGroup(pgid int) {
	_ = unix.Kill(-pgid, unix.SIGKILL)
}

// capped keeps the first limit bytes written to it and takes the rest
// without keeping it, so that the command never blocks on its output.
type capped struct {
	mu    sync.Mutex
	limit int
	buf   bytes.Buffer
	cut   int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(len(p), c.limit-c.buf.Len())
	c.buf.Write(p[:keep])
	c.cut += len(p) - keep
	return len(p), nil
}

// String returns what was kept, trimmed, saying how much was not.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.TrimSpace(c.buf.String())
	if c.cut > 0 {
		s += "… (" + strconv.Itoa(c.cut) + " more bytes cut)"
	}
	return s
}
