package imagegc

import (
	"errors"
	"fmt"
	"time"
)

// Kubelet's defaults (pkg/kubelet/apis/config/v1beta1/defaults.go) and its
// image garbage collection period (kubelet.go ImageGCPeriod).
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
	DefaultPeriod               = 5 * time.Minute
)

// Config is kubelet's ImageGCPolicy, under its configuration's names
// (imageGCHighThresholdPercent, imageGCLowThresholdPercent,
// imageMinimumGCAge, imageMaximumGCAge). DefaultConfig gives kubelet's
// defaults; the zero Config collects at any usage.
type Config struct {
	// HighThresholdPercent is the usage of the image filesystem at or
	// above which images are removed (100 with MaxAge 0: no collection).
	HighThresholdPercent int
	// LowThresholdPercent is the usage collection frees down to.
	LowThresholdPercent int
	// MinAge is how long after it was first seen an unused image is kept.
	MinAge time.Duration
	// MaxAge removes an image unused for longer, whatever the usage (0:
	// never).
	MaxAge time.Duration
	// Period is for tests only: kubelet's period is fixed at 5 minutes
	// (0), and no command sets it.
	Period time.Duration
}

// DefaultConfig is kubelet's image garbage collection policy.
func DefaultConfig() Config {
	return Config{HighThresholdPercent: DefaultHighThresholdPercent, LowThresholdPercent: DefaultLowThresholdPercent, MinAge: DefaultMinAge}
}

// Validate checks the policy as kubelet validates its configuration
// (pkg/kubelet/apis/config/validation), with kubelet's texts ("invalid
// configuration: " and the configuration key), each naming the flag too
// (kubelet names none for the ages: its flag is the deprecated
// --minimum-image-ttl-duration).
func (c Config) Validate() error {
	var errs []error
	if c.HighThresholdPercent < 0 || c.HighThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) %v must be between 0 and 100, inclusive", c.HighThresholdPercent))
	}
	if c.LowThresholdPercent < 0 || c.LowThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be between 0 and 100, inclusive", c.LowThresholdPercent))
	}
	if c.LowThresholdPercent >= c.HighThresholdPercent {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %v", c.LowThresholdPercent, c.HighThresholdPercent))
	}
	if c.MinAge < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMinimumGCAge (--image-minimum-gc-age) %v must not be negative", c.MinAge))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMaximumGCAge (--image-maximum-gc-age) %v must not be negative", c.MaxAge))
	}
	if c.MaxAge > 0 && c.MaxAge <= c.MinAge {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMaximumGCAge (--image-maximum-gc-age) %v must be greater than imageMinimumGCAge (--image-minimum-gc-age) %v", c.MaxAge, c.MinAge))
	}
	if c.Period < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: image garbage collection period %v must not be negative", c.Period))
	}
	return errors.Join(errs...)
}

// Disabled says kubelet's StartGarbageCollection starts no image
// collection: the high threshold at 100 and no maximum age.
func (c Config) Disabled() bool { return c.HighThresholdPercent == 100 && c.MaxAge == 0 }

func (c Config) period() time.Duration {
	if c.Period > 0 {
		return c.Period
	}
	return DefaultPeriod
}
