package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/imagegc"
)

// imageGCFlags are kubelet's image garbage collection settings, under
// kubelet's names (its flags --image-gc-high-threshold and
// --image-gc-low-threshold; its configuration's imageMinimumGCAge and
// imageMaximumGCAge, whose flags kubelet lacks, as the issue names them;
// kubelet's deprecated --minimum-image-ttl-duration kept hidden): run's,
// where they apply with --static-pod-path only.
type imageGCFlags struct {
	high, low      int
	minAge, maxAge time.Duration
}

func (f *imageGCFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.high, "image-gc-high-threshold", imagegc.DefaultHighThresholdPercent, "with --static-pod-path, the percent of the image filesystem's usage at or above which the node's unused images are removed, least recently used first, every 5 minutes, as kubelet's (imageGCHighThresholdPercent; 0 to 100; 100 with --image-maximum-gc-age 0: no image garbage collection)")
	fs.IntVar(&f.low, "image-gc-low-threshold", imagegc.DefaultLowThresholdPercent, "the percent of the image filesystem's usage image garbage collection frees down to (kubelet's imageGCLowThresholdPercent; 0 to 100, below --image-gc-high-threshold)")
	fs.DurationVar(&f.minAge, "image-minimum-gc-age", imagegc.DefaultMinAge, "how long after the agent first saw it an unused image is kept from garbage collection (kubelet's imageMinimumGCAge)")
	fs.DurationVar(&f.minAge, "minimum-image-ttl-duration", imagegc.DefaultMinAge, "kubelet's deprecated name of --image-minimum-gc-age")
	_ = fs.MarkHidden("minimum-image-ttl-duration")
	fs.DurationVar(&f.maxAge, "image-maximum-gc-age", 0, "with --static-pod-path, remove an image unused for longer than this, whatever the usage (kubelet's imageMaximumGCAge; 0: never; above --image-minimum-gc-age)")
}

// config is the collector's policy; Validate checks it with kubelet's rules.
func (f *imageGCFlags) config() imagegc.Config {
	return imagegc.Config{HighThresholdPercent: f.high, LowThresholdPercent: f.low, MinAge: f.minAge, MaxAge: f.maxAge}
}
