package main

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
	// lastRelist is when the relist loop last finished a relist; alive
	// says how old that may be before the agent counts as stuck.
	lastRelist func() time.Time
	alive      time.Duration
	now        func() time.Time
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
		if age := n.now().Sub(n.lastRelist()); age > n.alive {
			logger.Error(fmt.Errorf("no relist has finished for %s", age.Round(time.Second)), "Not notifying the systemd watchdog: the agent looks stuck")
			continue
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
			logger.Error(err, "Notifying the systemd watchdog")
		}
	}
}
