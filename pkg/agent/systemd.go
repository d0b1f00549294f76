package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"k8s.io/klog/v2"
)

// systemdNotifier tells systemd (Type=notify) when the agent is ready and,
// with WatchdogSec=, that it is alive. Without $NOTIFY_SOCKET it does
// nothing.
type systemdNotifier struct {
	// ready is nil once the agent serves (the first relist succeeded).
	ready func() error
	// live is nil while the agent works (loopCheck).
	live func() error
}

// loopCheck says whether the relist loop turns: it must have finished a
// relist (failed or not) within alive, counted from start before the
// first. The systemd watchdog and /livez both ask it.
type loopCheck struct {
	lastRelist func() time.Time
	start      time.Time
	alive      time.Duration
	now        func() time.Time
}

func (c loopCheck) err() error {
	last := c.lastRelist()
	if last.IsZero() {
		last = c.start
	}
	if age := c.now().Sub(last); age > c.alive {
		return fmt.Errorf("no relist has finished for %s: the agent looks stuck", age.Round(time.Second))
	}
	return nil
}

// run notifies READY=1 once ready, then WATCHDOG=1 at half the watchdog
// interval for as long as the relist loop keeps turning, and STOPPING=1
// when ctx ends. A runtime that is down does not stop the pings (the loop
// still turns; restarting the agent would not help); a loop stuck longer
// than alive does, and systemd restarts the agent.
func (n systemdNotifier) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		logger.Error(err, "Reading the systemd watchdog settings")
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for n.ready() != nil {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
	if sent, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		logger.Error(err, "Notifying systemd that the agent is ready")
	} else if sent {
		logger.V(2).Info("Notified systemd: ready")
	}
	defer daemon.SdNotify(false, daemon.SdNotifyStopping)
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	watchdog := time.NewTicker(interval / 2)
	defer watchdog.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-watchdog.C:
		}
		if err := n.live(); err != nil {
			logger.Error(err, "Not notifying the systemd watchdog")
			continue
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
			logger.Error(err, "Notifying the systemd watchdog")
		}
	}
}
