package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

// killBudgetFlags are the restart budget (run): systemd's
// StartLimitBurst= and StartLimitIntervalSec= for probe-triggered kills.
type killBudgetFlags struct {
	node, pod int
	interval  time.Duration
}

// defaultKillBudgetInterval is the budget's window when only a budget is
// given.
const defaultKillBudgetInterval = 5 * time.Minute

func (f *killBudgetFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.node, "kill-budget", 0, "at most this many liveness or startup kills on the node per --kill-budget-interval (systemd's StartLimitBurst); past it, kills wait (a KillDeferred event) and go ahead when the window frees if the probe still fails; exits are restarted as before; 0: no budget (kubelet's behaviour)")
	fs.IntVar(&f.pod, "pod-kill-budget", 0, "at most this many liveness or startup kills in any one pod per --kill-budget-interval; 0: no budget (kubelet's behaviour)")
	fs.DurationVar(&f.interval, "kill-budget-interval", defaultKillBudgetInterval, "the window of --kill-budget and --pod-kill-budget (systemd's StartLimitIntervalSec)")
}

// config is the budget (check it first).
func (f *killBudgetFlags) config() killbudget.Config {
	return killbudget.Config{Node: f.node, Pod: f.pod, Interval: f.interval}
}
