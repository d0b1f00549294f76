package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/gc"
)

// gcFlags are kubelet's container garbage collection flags, under its
// names and defaults (flags only: kubelet's configuration file has no keys
// for them), and a test knob.
type gcFlags struct {
	minAge             time.Duration
	maxPerPodContainer int
	maxContainers      int
	period             time.Duration
}

func (f *gcFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.minAge, "minimum-container-ttl-duration", gc.DefaultPolicy.MinAge, "the minimum age of a dead container before the garbage collection removes it (kubelet's flag), for the agent's pods and the instances it made")
	fs.IntVar(&f.maxPerPodContainer, "maximum-dead-containers-per-container", gc.DefaultPolicy.MaxPerPodContainer, "dead instances of each container kept (kubelet's flag): the rest are removed, with their log files, every minute; negative: no limit")
	fs.IntVar(&f.maxContainers, "maximum-dead-containers", gc.DefaultPolicy.MaxContainers, "dead containers kept on the node, of those the agent made (kubelet's flag); -1: no limit")
	fs.DurationVar(&f.period, "container-gc-period", gc.DefaultPeriod, "how often the garbage collection runs (kubelet's is fixed at 1m; for tests)")
	_ = fs.MarkHidden("container-gc-period")
}

// config is the garbage collection's settings (check first).
func (f *gcFlags) config() gc.Config {
	return gc.Config{Policy: &gc.Policy{MinAge: f.minAge, MaxPerPodContainer: f.maxPerPodContainer, MaxContainers: f.maxContainers}, Period: f.period}
}

// check validates the values before anything is started.
func (f *gcFlags) check() error {
	if f.minAge < 0 {
		return fmt.Errorf("--minimum-container-ttl-duration %s: want 0 or more, as kubelet's", f.minAge)
	}
	if f.period <= 0 {
		return fmt.Errorf("--container-gc-period %s: want a positive duration", f.period)
	}
	return nil
}
