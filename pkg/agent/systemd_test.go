package agent

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notifySocket is systemd's end of $NOTIFY_SOCKET: the datagrams sent.
func notifySocket(t *testing.T) <-chan string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Setenv("NOTIFY_SOCKET", path)
	got := make(chan string, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	})
	t.Cleanup(func() { conn.Close(); wg.Wait() })
	return got
}

func next(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
		return ""
	}
}

// READY=1 only once the agent is ready; WATCHDOG=1 while the relist loop
// turns, none when it is stuck; STOPPING=1 at the end.
func TestSystemdNotifications(t *testing.T) {
	got := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100 ms
	t.Setenv("WATCHDOG_PID", "")
	var ready atomic.Bool
	var stuck atomic.Bool
	n := systemdNotifier{
		ready: func() error {
			if !ready.Load() {
				return errors.New("no relist has succeeded yet")
			}
			return nil
		},
		live: loopCheck{
			lastRelist: func() time.Time {
				if stuck.Load() {
					return time.Now().Add(-time.Hour)
				}
				return time.Now()
			},
			start: time.Now(),
			alive: time.Minute,
			now:   time.Now,
		}.err,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.run(ctx); close(done) }()

	select {
	case m := <-got:
		t.Fatalf("notified %q before the agent was ready", m)
	case <-time.After(300 * time.Millisecond): // nothing may come meanwhile
	}
	ready.Store(true)
	assert.Equal(t, "READY=1", next(t, got))
	assert.Equal(t, "WATCHDOG=1", next(t, got))

	stuck.Store(true)
	// Drain a ping already on its way, then expect silence for several
	// intervals.
	deadline := time.After(600 * time.Millisecond)
	var late []string
loop:
	for {
		select {
		case m := <-got:
			late = append(late, m)
		case <-deadline:
			break loop
		}
	}
	assert.LessOrEqual(t, len(late), 1, "no pings while stuck: %v", late)

	cancel()
	<-done
	assert.Equal(t, "STOPPING=1", strings.TrimSpace(next(t, got)))
}

// The loop counts as stuck only once no relist has finished for longer
// than alive, counted from the start before the first.
func TestLoopCheck(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tt := range []struct {
		name      string
		last, now time.Time
		wantErr   string
	}{
		{name: "just started", now: start.Add(30 * time.Second)},
		{name: "never relisted", now: start.Add(2 * time.Minute), wantErr: "no relist has finished for 2m0s"},
		{name: "recent relist", last: start.Add(5 * time.Minute), now: start.Add(5*time.Minute + 59*time.Second)},
		{name: "old relist", last: start.Add(5 * time.Minute), now: start.Add(7 * time.Minute), wantErr: "for 2m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := loopCheck{lastRelist: func() time.Time { return tt.last }, start: start, alive: time.Minute, now: func() time.Time { return tt.now }}
			if tt.wantErr == "" {
				assert.NoError(t, c.err())
			} else {
				assert.ErrorContains(t, c.err(), tt.wantErr)
			}
		})
	}
}
