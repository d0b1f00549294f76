package logs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// Kubelet's defaults of its container log settings.
const (
	DefaultMaxSize         = 10 << 20 // containerLogMaxSize: 10Mi
	DefaultMaxFiles        = 5        // containerLogMaxFiles
	DefaultMaxWorkers      = 1        // containerLogMaxWorkers
	DefaultMonitorInterval = 10 * time.Second
	// MinMonitorInterval is the shortest containerLogMonitorInterval
	// kubelet accepts.
	MinMonitorInterval = 3 * time.Second
	// DefaultLinkDir is kubelet's legacyContainerLogsDir.
	DefaultLinkDir = "/var/log/containers"
)

// Config is how the container logs of the agent's containers are kept:
// kubelet's containerLog* settings and where the links go. Zero values are
// kubelet's defaults, but for LinkDir.
type Config struct {
	// MaxSize is the size in bytes at which a log file is rotated
	// (--container-log-max-size; 0: 10Mi); negative: no rotation, as
	// kubelet's.
	MaxSize int64
	// MaxFiles is the most files kept for a container, the current one
	// included (--container-log-max-files; 0: 5; else at least 2).
	MaxFiles int
	// MaxWorkers is how many containers are rotated at once
	// (--container-log-max-workers; 0: 1).
	MaxWorkers int
	// MonitorInterval is how often the log files are looked at
	// (--container-log-monitor-interval; 0: 10s; else at least 3s).
	MonitorInterval time.Duration
	// LinkDir is where a link to each started container's log file is
	// made, as kubelet's /var/log/containers (--container-log-link-dir;
	// "": no links).
	LinkDir string
	// PodLogsDir is the pod logs directory (--pod-logs-dir): only a log
	// file under it is rotated, reopened or counted ("": none). The
	// runtime reports the log path any client gave a container.
	PodLogsDir string
}

// MaxMaxFiles bounds containerLogMaxFiles: the most names a listing of a
// log's files returns.
const MaxMaxFiles = maxListed

// Check validates the settings as kubelet validates its configuration,
// with its messages.
func (c Config) Check() error {
	var errs []error
	if c.MaxFiles != 0 && c.MaxFiles <= 1 {
		errs = append(errs, fmt.Errorf("invalid configuration: containerLogMaxFiles must be greater than 1"))
	}
	if c.MaxFiles > MaxMaxFiles {
		errs = append(errs, fmt.Errorf("invalid configuration: containerLogMaxFiles must be at most %d (the agent lists no more files of a log)", MaxMaxFiles))
	}
	if c.MaxWorkers < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: containerLogMaxWorkers must be greater than or equal to 1"))
	}
	if c.MonitorInterval != 0 && c.MonitorInterval < MinMonitorInterval {
		errs = append(errs, fmt.Errorf("invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to %s", MinMonitorInterval))
	}
	if c.LinkDir != "" && !filepath.IsAbs(c.LinkDir) {
		errs = append(errs, fmt.Errorf("the link directory %q must be an absolute path", c.LinkDir))
	}
	if c.PodLogsDir != "" && !filepath.IsAbs(c.PodLogsDir) {
		errs = append(errs, fmt.Errorf("the pod logs directory %q must be an absolute path", c.PodLogsDir))
	}
	return errors.Join(errs...)
}

// Stub says whether the settings make kubelet's stub log manager (a
// negative MaxSize): no rotation, no reopening of a missing log file, no
// removal of an instance's log files with it.
func (c Config) Stub() bool { return c.MaxSize < 0 }

func (c Config) withDefaults() Config {
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = DefaultMaxWorkers
	}
	if c.MonitorInterval == 0 {
		c.MonitorInterval = DefaultMonitorInterval
	}
	return c
}

// Target is a running container whose log file the manager keeps.
type Target struct {
	Namespace, Pod, PodUID string
	// Container is the running instance; its LogPath is the file.
	Container *cri.Container
}

// Reopener asks the runtime to reopen a container's log file (CRI
// ReopenContainerLog).
type Reopener interface {
	ReopenContainerLog(ctx context.Context, id string) error
}

// Manager is kubelet's ContainerLogManager for the containers the agent
// manages: every MonitorInterval, each running target's log file that
// reached MaxSize is rotated (Plan, then carried out in its directory and
// ReopenContainerLog), by MaxWorkers workers. It also tells how many bytes
// each target's files hold.
type Manager struct {
	runtime Reopener
	targets func() []Target
	cfg     Config
	clock   clock.WithTicker
	metrics *managerMetrics

	mu    sync.Mutex
	bytes map[string]ContainerLogBytes // by container ID: its log files' bytes, at the last round
}

// ManagerOption sets an optional dependency of the manager.
type ManagerOption func(*Manager)

// WithClock paces the manager and names rotated files by c (tests).
func WithClock(c clock.WithTicker) ManagerOption { return func(m *Manager) { m.clock = c } }

// WithRegisterer exports the manager's series to reg.
func WithRegisterer(reg prometheus.Registerer) ManagerOption {
	return func(m *Manager) { m.metrics = newManagerMetrics(reg) }
}

// NewManager returns the manager of the log files of the containers
// targets returns at each round (the running instances the agent
// manages); cfg is checked (Config.Check).
func NewManager(runtime Reopener, targets func() []Target, cfg Config, opts ...ManagerOption) (*Manager, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	m := &Manager{runtime: runtime, targets: targets, cfg: cfg.withDefaults(), clock: clock.RealClock{}, bytes: map[string]ContainerLogBytes{}}
	for _, o := range opts {
		o(m)
	}
	if m.metrics == nil {
		m.metrics = newManagerMetrics(nil)
	}
	return m, nil
}

// Run looks at the log files at once and every MonitorInterval, until ctx
// is done; its workers stop with it.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.Info("Initializing container log rotate workers", "workers", m.cfg.MaxWorkers, "monitorPeriod", m.cfg.MonitorInterval)
	work := make(chan item)
	var workers sync.WaitGroup
	for i := range m.cfg.MaxWorkers {
		workers.Go(func() {
			for it := range work {
				m.process(ctx, i+1, it.target)
				it.done.Done()
			}
		})
	}
	defer workers.Wait()
	defer close(work)
	ticker := m.clock.NewTicker(m.cfg.MonitorInterval)
	defer ticker.Stop()
	for {
		m.round(ctx, work)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

type item struct {
	target Target
	done   *sync.WaitGroup
}

// round hands each target to the workers and waits for all of them, so
// that no container is rotated twice at once; then the series of the
// containers no longer kept are deleted.
func (m *Manager) round(ctx context.Context, work chan<- item) {
	targets := m.targets()
	var done sync.WaitGroup
	for _, t := range targets {
		if t.Container == nil || t.Container.LogPath == "" || t.Container.State != cri.StateRunning {
			continue // kubelet rotates running containers only
		}
		done.Add(1)
		select {
		case work <- item{target: t, done: &done}:
		case <-ctx.Done():
			done.Done()
		}
	}
	done.Wait()
	m.forgetGone(targets)
}

// Step is one round without workers: each target processed in turn
// (tests).
func (m *Manager) Step(ctx context.Context) {
	targets := m.targets()
	for _, t := range targets {
		if t.Container != nil && t.Container.LogPath != "" && t.Container.State == cri.StateRunning {
			m.process(ctx, 0, t)
		}
	}
	m.forgetGone(targets)
}

// LogBytes is what a container's log files held at the last round
// (its current file and its rotated ones); false: it is not kept.
func (m *Manager) LogBytes(containerID string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.bytes[containerID]
	return n.Bytes, ok
}

// ContainerLogBytes is what a container's log files held at the last
// round.
type ContainerLogBytes struct {
	Namespace, Pod, PodUID, Container, ContainerID string
	Bytes                                          int64
}

// AllLogBytes is what the log files of every kept container held at the
// last round, by namespace, pod and container.
func (m *Manager) AllLogBytes() []ContainerLogBytes {
	m.mu.Lock()
	out := slices.Collect(maps.Values(m.bytes))
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b ContainerLogBytes) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container), cmp.Compare(a.ContainerID, b.ContainerID))
	})
	return out
}

// Settings is the configuration in force, kubelet's defaults applied.
func (m *Manager) Settings() Config { return m.cfg }

func (m *Manager) forgetGone(targets []Target) {
	ids, series := make(map[string]bool, len(targets)), make(map[string]bool, len(targets))
	for _, t := range targets {
		if t.Container != nil {
			ids[t.Container.ID], series[seriesKey(t)] = true, true
		}
	}
	m.mu.Lock()
	for id := range m.bytes {
		if !ids[id] {
			delete(m.bytes, id)
		}
	}
	m.mu.Unlock()
	m.metrics.forget(series)
}

// process is kubelet's processContainer for one target: its log file
// reopened if it is gone, rotated once it reached MaxSize, its bytes
// counted.
func (m *Manager) process(ctx context.Context, worker int, t Target) {
	id, path := t.Container.ID, t.Container.LogPath
	logger := klog.FromContext(ctx).WithValues("worker", worker, "containerID", id, "path", path)
	d, base, err := openLogBeneath(m.cfg.PodLogsDir, path)
	if errors.Is(err, errOutside) {
		logger.V(2).Info("Container log not under the pod logs directory: not rotated", "podLogsDir", m.cfg.PodLogsDir)
		return
	}
	if err != nil {
		logger.Error(err, "Failed to open container log directory")
		return
	}
	defer d.Close()
	size, mode, err := d.stat(base)
	if errors.Is(err, fs.ErrNotExist) && !m.cfg.Stub() {
		if err := m.runtime.ReopenContainerLog(ctx, id); err != nil {
			logger.Error(err, "Container log doesn't exist, reopen container log failed")
			return
		}
		size, mode, err = d.stat(base)
		if err != nil {
			logger.Error(err, "Failed to stat container log after reopen")
			return
		}
	}
	if err != nil {
		logger.Error(err, "Failed to stat container log")
		return
	}
	if !mode.IsRegular() {
		logger.Error(nil, "Container log is not a regular file: not rotated", "type", mode.Type().String())
		return
	}
	files, others, full, err := d.list(rotatedOf(base))
	if err != nil {
		logger.Error(err, "Failed to list container log files")
		return
	}
	if full {
		logger.Info("Too many files beside the container log: rotating with those found, the oldest removed", "found", len(files)+len(others))
	}
	if len(others) > 0 {
		logger.V(2).Info("Left alone files beside the container log that are not regular files", "names", others)
	}
	var rotation Rotation // a negative MaxSize: kubelet's stub manager, no rotation
	if !m.cfg.Stub() {
		rotation = Plan(base, size, names(files), Policy{MaxSize: m.cfg.MaxSize, MaxFiles: m.cfg.MaxFiles}, m.clock.Now())
	}
	if rotation.Rotate == "" {
		logger.V(7).Info("log file doesn't need to be rotated", "currentSize", size, "maxSize", m.cfg.MaxSize)
	} else {
		err := m.rotate(ctx, d, id, base, rotation)
		if err != nil {
			logger.Error(err, "Failed to rotate log for container", "currentSize", size, "maxSize", m.cfg.MaxSize)
		} else {
			m.metrics.rotated(t)
		}
		size, _, _ = d.stat(base)
		if files, _, _, err = d.list(rotatedOf(base)); err != nil {
			logger.Error(err, "Failed to list container log files")
			return
		}
	}
	total := size
	for _, f := range files {
		total += f.size
	}
	used, err := d.usage()
	if err != nil {
		logger.Error(err, "Failed to measure container log directory")
	}
	m.mu.Lock()
	m.bytes[id] = ContainerLogBytes{Namespace: t.Namespace, Pod: t.Pod, PodUID: t.PodUID, Container: t.Container.Name, ContainerID: id, Bytes: total}
	m.mu.Unlock()
	m.metrics.setBytes(t, total, used)
}

// rotatedOf matches the names of a log's rotated files as kubelet names
// them: <log>.<timestamp>, compressed <log>.<timestamp>.gz, being
// compressed <log>.<timestamp>.tmp. Other names beside it are not the
// runtime's nor the agent's, and are left alone (kubelet globs <log>.*).
func rotatedOf(log string) func(string) bool {
	return func(name string) bool {
		if !isRotated(log, name) {
			return false
		}
		rest := name[len(log)+1:]
		if len(rest) < len(TimestampFormat) {
			return false
		}
		stamp, suffix := rest[:len(TimestampFormat)], rest[len(TimestampFormat):]
		for i, c := range []byte(stamp) {
			if i == 8 && c != '-' || i != 8 && (c < '0' || c > '9') {
				return false
			}
		}
		return suffix == "" || suffix == CompressSuffix || suffix == TmpSuffix
	}
}

// compressLimit is the most bytes a rotated file is compressed of: the
// runtime rotates at MaxSize, and passes it by what it writes in a
// monitor interval, unknowable; four times MaxSize, at least 64Mi.
func (m *Manager) compressLimit() int64 { return max(4*m.cfg.MaxSize, 64<<20) }

func names(files []file) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.name
	}
	return out
}

// rotate carries a rotation out, as kubelet's rotateLog.
func (m *Manager) rotate(ctx context.Context, d *logDir, id, log string, r Rotation) error {
	for _, name := range r.Remove {
		if err := d.remove(name); err != nil {
			return fmt.Errorf("failed to remove old log %q: %w", d.name(name), err)
		}
	}
	for _, name := range r.Compress {
		err := d.compress(ctx, name, m.compressLimit())
		if errors.Is(err, ErrTooLarge) {
			klog.FromContext(ctx).Info("Removed a rotated log file too large to be the runtime's", "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to compress log %q: %w", d.name(name), err)
		}
	}
	if err := m.rotateLatest(ctx, d, id, log, r.Rotate); err != nil {
		return fmt.Errorf("failed to rotate log %q: %w", d.name(log), err)
	}
	return nil
}

// rotateLatest renames the current file and has the runtime reopen it,
// uncompressed so that the container can still write it and a shipper
// finish reading it; if the runtime cannot, the file is renamed back, to
// be rotated at the next round (kubelet's rotateLatestLog).
func (m *Manager) rotateLatest(ctx context.Context, d *logDir, id, log, rotated string) error {
	if err := d.rename(log, rotated); err != nil {
		return fmt.Errorf("failed to rotate log %q to %q: %w", d.name(log), d.name(rotated), err)
	}
	if err := m.runtime.ReopenContainerLog(ctx, id); err != nil {
		if renameErr := d.rename(rotated, log); renameErr != nil {
			klog.FromContext(ctx).Error(renameErr, "Failed to rename rotated log", "rotatedLog", d.name(rotated), "newLog", d.name(log), "containerID", id)
		}
		return fmt.Errorf("failed to reopen container log %q: %w", id, err)
	}
	return nil
}
