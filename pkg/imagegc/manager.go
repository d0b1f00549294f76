package imagegc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
)

// Runtime is what the collector asks of the runtime (cri.Client).
type Runtime interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	RemoveImage(ctx context.Context, image string) error
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	SandboxImage(ctx context.Context) (string, error)
}

var _ Runtime = (*cri.Client)(nil)

// Recorder receives the collector's events, which are the node's (no pod).
type Recorder interface{ Record(events.Event) }

// Event reasons: kubelet's (pkg/kubelet/events/event.go).
const (
	ReasonImageGCFailed       = "ImageGCFailed"
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
)

// Reasons an image was removed: the labels of
// kubelet_image_garbage_collected_total.
const (
	RemovedForAge   = "age"
	RemovedForSpace = "space"
)

// Manager is kubelet's image garbage collector on one runtime. Its
// methods may be called at once (the loop and the eviction manager): one
// collection runs at a time.
type Manager struct {
	rt       Runtime
	cfg      Config
	clock    clock.WithTicker
	recorder Recorder
	statfs   Statfs
	metrics  *metrics

	mu      sync.Mutex // held through a collection
	records Records    // under mu

	// removed counts the images removed since it was made, by reason
	// (Removed); measured is the last measurement of the image
	// filesystem (LastImageFs).
	removedForAge, removedForSpace atomic.Uint64
	measured                       atomic.Pointer[Measured]
}

// Measured is a measurement of the image filesystem and when it was made.
type Measured struct {
	Usage
	At time.Time
}

// Option adjusts a Manager.
type Option func(*Manager)

// WithClock replaces the real clock (tests).
func WithClock(c clock.WithTicker) Option { return func(m *Manager) { m.clock = c } }

// WithRecorder sends the events to r (default: logged).
func WithRecorder(r Recorder) Option { return func(m *Manager) { m.recorder = r } }

// WithRegisterer registers the collector's series with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(m *Manager) { m.metrics = newMetrics(reg) }
}

// WithStatfs replaces statfs of the image filesystem (tests).
func WithStatfs(f Statfs) Option { return func(m *Manager) { m.statfs = f } }

// New returns the collector of rt's images under cfg (checked first).
func New(rt Runtime, cfg Config, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{rt: rt, cfg: cfg, clock: clock.RealClock{}, statfs: statfs, records: Records{}}
	for _, opt := range opts {
		opt(m)
	}
	if m.recorder == nil {
		m.recorder = events.Log(klog.Background())
	}
	if m.metrics == nil {
		m.metrics = newMetrics(nil)
	}
	return m, nil
}

// Run is kubelet's StartGarbageCollection for images: a collection now
// and every period (5 minutes) until ctx ends; a failure is logged, and
// told as an ImageGCFailed event when the one before failed too. With
// the high threshold at 100 and no maximum age it does nothing, as
// kubelet.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if m.cfg.Disabled() {
		logger.V(2).Info("ImageGCHighThresholdPercent is set 100 and ImageMaximumGCAge is 0, Disable image GC")
		return
	}
	began := m.clock.Now()
	ticker := m.clock.NewTicker(m.cfg.period())
	defer ticker.Stop()
	prevFailed := false
	for {
		prevFailed = m.collect(ctx, began, prevFailed)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// collect runs one collection from the loop and says whether it failed.
func (m *Manager) collect(ctx context.Context, began time.Time, prevFailed bool) (failed bool) {
	logger := klog.FromContext(ctx)
	err := m.GarbageCollect(ctx, began)
	switch {
	case err != nil && ctx.Err() != nil:
		return prevFailed // stopping: not the collector's failure
	case err != nil && prevFailed:
		logger.Error(err, "Image garbage collection failed multiple times in a row")
		m.event(events.Warning, ReasonImageGCFailed, err.Error())
		return true
	case err != nil:
		logger.Error(err, "Image garbage collection failed once. Stats initialization may not have completed yet")
		return true
	case prevFailed:
		logger.V(1).Info("Image garbage collection succeeded")
	default:
		logger.V(4).Info("Image garbage collection succeeded")
	}
	return false
}

// GarbageCollect is kubelet's: it removes the images unused for longer
// than the maximum age (once it has passed since began), then measures
// the image filesystem and, at or above the high threshold, removes
// images in eviction order down to the low threshold. Freeing less than
// that is an error, told as kubelet's FreeDiskSpaceFailed event.
func (m *Manager) GarbageCollect(ctx context.Context, began time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	logger := klog.FromContext(ctx)
	now := m.clock.Now()
	cands, err := m.evictionOrder(ctx, now)
	if err != nil {
		return err
	}
	old, cands := TooOld(cands, m.cfg.MaxAge, now, began)
	var errs []error
	for _, c := range old {
		if err := m.remove(ctx, c, RemovedForAge); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w", m.cfg.MaxAge, errors.Join(errs...))
	}

	usage, err := m.usage(ctx)
	if err != nil {
		return err
	}
	goal, err := SpaceGoal(usage, m.cfg)
	if errors.Is(err, ErrInvalidCapacity) {
		m.event(events.Warning, ReasonInvalidDiskCapacity, err.Error())
	}
	if err != nil || goal.ToFree <= 0 {
		return err
	}
	logger.Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", goal.UsagePercent, "highThreshold", m.cfg.HighThresholdPercent, "amountToFree", goal.ToFree, "lowThreshold", m.cfg.LowThresholdPercent)
	freed, err := m.freeSpace(ctx, goal.ToFree, Freeable(cands, m.cfg.MinAge, now))
	if err != nil {
		return err
	}
	if freed < goal.ToFree {
		msg := freeDiskSpaceFailed(goal.UsagePercent, usage.Capacity, freed)
		m.event(events.Warning, ReasonFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages is kubelet's, for the eviction manager under disk
// pressure: it removes every image it may (neither in use nor pinned, and
// first seen at least the minimum age ago), whatever the usage, and says
// how many bytes that freed (also when an error stopped it).
func (m *Manager) DeleteUnusedImages(ctx context.Context) (freed int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	klog.FromContext(ctx).Info("Attempting to delete unused images")
	now := m.clock.Now()
	cands, err := m.evictionOrder(ctx, now)
	if err != nil {
		return 0, err
	}
	return m.freeSpace(ctx, math.MaxInt64, Freeable(cands, m.cfg.MinAge, now))
}

// ImageFs measures the image filesystem: the runtime's used bytes and
// mountpoint, and the filesystem's capacity and available bytes (what
// kubelet's eviction manager reads as imagefs.available).
func (m *Manager) ImageFs(ctx context.Context) (Usage, error) { return m.usage(ctx) }

// Removed is how many images it removed since it was made: for their age
// (the maximum age) and for space (the high threshold, disk pressure).
func (m *Manager) Removed() (age, space uint64) {
	return m.removedForAge.Load(), m.removedForSpace.Load()
}

// LastImageFs is the image filesystem as last measured (by a collection
// or ImageFs); false: not measured yet.
func (m *Manager) LastImageFs() (Measured, bool) {
	if p := m.measured.Load(); p != nil {
		return *p, true
	}
	return Measured{}, false
}

// Settings is the policy in force.
func (m *Manager) Settings() Config { return m.cfg }

// evictionOrder lists the images and the containers, updates the records
// (kubelet's detectImages) and returns the candidates in eviction order.
func (m *Manager) evictionOrder(ctx context.Context, now time.Time) ([]Candidate, error) {
	list, err := m.rt.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	containers, err := m.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	sandbox, err := m.rt.SandboxImage(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot tell the runtime's sandbox image; relying on its pinning", "err", err)
	}
	inUse := InUse(containers)
	m.records = Detect(m.records, Images(list, sandbox), inUse, now)
	return EvictionOrder(m.records, inUse), nil
}

// freeSpace is kubelet's: it removes the candidates in order until
// toFree bytes are freed, going on past a failed removal; it returns the
// bytes freed and the removals' errors.
func (m *Manager) freeSpace(ctx context.Context, toFree int64, cands []Candidate) (int64, error) {
	var freed int64
	var errs []error
	for _, c := range cands {
		if err := m.remove(ctx, c, RemovedForSpace); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += c.Size
		if freed >= toFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", toFree, freed, errors.Join(errs...))
	}
	return freed, nil
}

// remove removes one image and forgets it.
func (m *Manager) remove(ctx context.Context, c Candidate, reason string) error {
	klog.FromContext(ctx).Info("Removing image to free bytes", "imageID", c.ID, "size", c.Size, "reason", reason)
	if err := m.rt.RemoveImage(ctx, c.ID); err != nil {
		return err
	}
	delete(m.records, c.ID) // m.records is the manager's own, never handed out
	m.metrics.collected.WithLabelValues(reason).Inc()
	if reason == RemovedForAge {
		m.removedForAge.Add(1)
	} else {
		m.removedForSpace.Add(1)
	}
	return nil
}

// usage is kubelet's ImageFsStats over CRI: the first image filesystem
// the runtime reports, its mountpoint measured with statfs.
func (m *Manager) usage(ctx context.Context) (Usage, error) {
	resp, err := m.rt.ImageFsInfo(ctx)
	if err != nil {
		return Usage{}, err
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return Usage{}, errors.New("imageFs information is unavailable")
	}
	fs := resp.GetImageFilesystems()[0]
	u := Usage{Mountpoint: fs.GetFsId().GetMountpoint(), Used: int64(fs.GetUsedBytes().GetValue())}
	if u.Mountpoint != "" {
		if u.Capacity, u.Available, err = m.statfs(u.Mountpoint); err != nil {
			return Usage{}, fmt.Errorf("get filesystem info: %w (the agent must see the runtime's image filesystem at the path the runtime gives: run it in the host's mount namespace)", err)
		}
	}
	m.metrics.observe(u)
	m.measured.Store(&Measured{Usage: u, At: m.clock.Now()})
	return u, nil
}

func (m *Manager) event(eventType, reason, message string) {
	m.recorder.Record(events.Event{Time: m.clock.Now(), Type: eventType, Reason: reason, Message: message})
}
