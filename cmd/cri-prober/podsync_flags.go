package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/restart"
)

// podSyncFlags are kubelet's settings of pod sync, under kubelet's names:
// flags of the commands that restart containers (run, play).
type podSyncFlags struct {
	maxRestartPeriod time.Duration
	syncFrequency    time.Duration
}

func (f *podSyncFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.maxRestartPeriod, "max-container-restart-period", restart.DefaultMaxBackoff, "the longest CrashLoopBackOff between two restarts of a container (kubelet's crashLoopBackOff.maxContainerRestartPeriod, 1s to 5m): the back-off starts at 10s, or at this if shorter, and doubles up to it; it starts over once a container's back-off has not changed for 10 minutes, as kubelet's")
	fs.DurationVar(&f.syncFrequency, "sync-frequency", restart.DefaultSyncFrequency, "the longest a pod waiting out a back-off goes without a sync (kubelet's syncFrequency): its restart comes within half of this after the back-off ends (kubelet's pod workers requeue at the back-off's end, at most this far ahead, jittered by up to half)")
}

// check validates the values before anything is started.
func (f *podSyncFlags) check() error {
	if f.maxRestartPeriod < restart.MinMaxContainerRestartPeriod || f.maxRestartPeriod > restart.MaxMaxContainerRestartPeriod {
		return fmt.Errorf("--max-container-restart-period %s: want %s to %s, as kubelet's crashLoopBackOff.maxContainerRestartPeriod",
			f.maxRestartPeriod, restart.MinMaxContainerRestartPeriod, restart.MaxMaxContainerRestartPeriod)
	}
	if f.syncFrequency < time.Second {
		return fmt.Errorf("--sync-frequency %s: want at least 1s", f.syncFrequency)
	}
	return nil
}

// apply gives pod sync the settings (check first).
func (f *podSyncFlags) apply(cfg *restart.Config) {
	cfg.MaxContainerRestartPeriod, cfg.SyncFrequency = f.maxRestartPeriod, f.syncFrequency
}
