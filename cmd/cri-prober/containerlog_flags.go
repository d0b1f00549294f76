package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cri-prober/cri-prober/pkg/logs"
)

// containerLogFlags are kubelet's container log settings, under kubelet's
// names, and where the links of /var/log/containers go.
type containerLogFlags struct {
	maxSize         string
	maxFiles        int
	maxWorkers      int
	monitorInterval time.Duration
	linkDir         string
}

func (f *containerLogFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.maxSize, "container-log-max-size", "10Mi", "the size (a quantity, like 10Mi) at which the log file of a container the agent manages is rotated: renamed to <file>.<timestamp>, the runtime asked to reopen it, older files compressed (kubelet's containerLogMaxSize); negative: no rotation")
	fs.IntVar(&f.maxFiles, "container-log-max-files", logs.DefaultMaxFiles, "the most log files kept for a container, the current one included; the oldest rotated files go first (kubelet's containerLogMaxFiles, at least 2)")
	fs.IntVar(&f.maxWorkers, "container-log-max-workers", logs.DefaultMaxWorkers, "containers whose logs are rotated at once (kubelet's containerLogMaxWorkers, at least 1)")
	fs.DurationVar(&f.monitorInterval, "container-log-monitor-interval", logs.DefaultMonitorInterval, "how often the containers' log files are checked for rotation (kubelet's containerLogMonitorInterval, at least 3s)")
	fs.StringVar(&f.linkDir, "container-log-link-dir", logs.DefaultLinkDir, "`directory` of a link to the log file of each container the agent starts, named <pod>_<namespace>_<container>-<id>.log as kubelet's /var/log/containers (what log shippers tail), removed with the container; on a node where a kubelet also runs, another directory; empty: no links")
}

// config validates the values as kubelet validates its configuration and
// returns them as the agent takes them.
func (f *containerLogFlags) config() (logs.Config, error) {
	size, err := parseMaxSize(f.maxSize)
	if err != nil {
		return logs.Config{}, fmt.Errorf("--container-log-max-size: failed to parse container log max size %q: %w", f.maxSize, err)
	}
	if size == 0 {
		return logs.Config{}, fmt.Errorf("--container-log-max-size: invalid configuration: containerLogMaxSize 0 would rotate every log file at every check, empty ones too: give a size, or a negative one for no rotation")
	}
	if f.maxWorkers < 1 {
		return logs.Config{}, fmt.Errorf("--container-log-max-workers: invalid configuration: containerLogMaxWorkers must be greater than or equal to 1 (got %d)", f.maxWorkers)
	}
	if f.maxFiles <= 1 {
		return logs.Config{}, fmt.Errorf("--container-log-max-files: invalid configuration: containerLogMaxFiles must be greater than 1 (got %d)", f.maxFiles)
	}
	if f.maxFiles > logs.MaxMaxFiles {
		return logs.Config{}, fmt.Errorf("--container-log-max-files: invalid configuration: containerLogMaxFiles must be at most %d, the most files of a log the agent lists (got %d)", logs.MaxMaxFiles, f.maxFiles)
	}
	if f.monitorInterval < logs.MinMonitorInterval {
		return logs.Config{}, fmt.Errorf("--container-log-monitor-interval: invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to %s (got %s)", logs.MinMonitorInterval, f.monitorInterval)
	}
	cfg := logs.Config{MaxSize: size, MaxFiles: f.maxFiles, MaxWorkers: f.maxWorkers, MonitorInterval: f.monitorInterval, LinkDir: f.linkDir}
	if err := cfg.Check(); err != nil {
		return cfg, fmt.Errorf("--container-log-link-dir: %w", err)
	}
	return cfg, nil
}

// parseMaxSize is kubelet's: a quantity, in bytes.
func parseMaxSize(size string) (int64, error) {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return 0, err
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("invalid max log size")
	}
	return n, nil
}
