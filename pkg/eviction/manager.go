package eviction

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// DefaultMonitoringPeriod is kubelet's evictionMonitoringPeriod.
const DefaultMonitoringPeriod = 10 * time.Second

// DefaultVolumeStatsAggPeriod is kubelet's volumeStatsAggPeriod: a
// volume's usage is measured at most this often (its fsResourceAnalyzer's
// cache), whatever the monitoring period.
const DefaultVolumeStatsAggPeriod = time.Minute

// kubelet's podCleanupTimeout and podCleanupPollFreq: after an eviction,
// how long it waits for the pods to be cleaned up, and how often it looks.
const (
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
)

// kubelet's event reasons: a pod evicted (eviction.Reason), a threshold
// met on the node, and the node's condition changing. kubelet records the
// last two from its node status sync (nodestatus.DiskPressureCondition),
// which a standalone kubelet never runs: there they are the agent's
// events, under kubelet's names.
const (
	ReasonEvicted               = pods.ReasonEvicted
	ReasonEvictionThresholdMet  = "EvictionThresholdMet"
	ReasonNodeHasDiskPressure   = "NodeHasDiskPressure"
	ReasonNodeHasNoDiskPressure = "NodeHasNoDiskPressure"
)

// kubeletAlpha begins the HELP text of a series kubelet declares at its
// ALPHA stability level (kubelet_evictions), as kubelet's registry
// writes it.
const kubeletAlpha = "[ALPHA] "

// Config is how the agent bounds local storage. Zero values are the
// defaults.
type Config struct {
	// LocalStorageLimits is spec.LocalStorageIgnore ("", kubelet's outcome
	// for a static pod: nothing evicted) or spec.LocalStorageEnforce
	// (run --local-storage-limits).
	LocalStorageLimits string
	// EvictionHard are the hard eviction thresholds (run --eviction-hard,
	// kubelet's evictionHard, parsed: ParseThresholds); nil: none.
	EvictionHard []Threshold
	// MonitoringPeriod is how often usage is measured
	// (DefaultMonitoringPeriod).
	MonitoringPeriod time.Duration
	// VolumeStatsAggPeriod is how often a volume's usage is measured
	// again (DefaultVolumeStatsAggPeriod, kubelet's volumeStatsAggPeriod).
	VolumeStatsAggPeriod time.Duration
	// PressureTransitionPeriod is how long DiskPressure stays after its
	// threshold was last met (DefaultPressureTransitionPeriod).
	PressureTransitionPeriod time.Duration
	// NodeName names the node in its condition's events.
	NodeName string
}

// Runtime is what the manager asks of the runtime: its containers'
// stats and its image filesystems.
type Runtime interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Viewer gives the latest view of the pods (the resolver).
type Viewer interface {
	View() *pods.View
}

// ContainerGC removes the dead containers and sandboxes the agent may
// remove (kubelet's ContainerGC.DeleteAllUnusedContainers), wired to the
// container garbage collector.
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// ImageGC removes the images no container uses (kubelet's
// ImageGC.DeleteUnusedImages) and says how many bytes it freed, wired to
// the image garbage collector.
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) (int64, error)
}

// Recorder receives events.
type Recorder interface {
	Record(events.Event)
}

// Manager is kubelet's eviction manager for the agent's pods. Create it
// with New and run it with Run; it is the pods.EvictionSource of the
// resolver.
type Manager struct {
	runtime     Runtime
	viewer      Viewer
	layout      podconfig.Layout
	cfg         Config
	clock       clock.WithTicker
	recorder    Recorder
	statfs      Statfs
	containerGC ContainerGC
	imageGC     ImageGC
	evictions   *prometheus.CounterVec

	changed chan struct{}

	mu       sync.Mutex
	evicted  map[string]string // by UID: kubelet's message
	pressure Pressure
	// evictions counts the pods evicted since it was made (Evictions).
	evictionCount uint64

	// volumes is the volumes' usage as last measured, by pod UID and
	// volume name (kubelet's volume stats cache); owned by Synchronize's
	// caller.
	volumes map[string]map[string]volumeUsage
}

// volumeUsage is a volume's usage measured at a time.
type volumeUsage struct {
	used int64
	at   time.Time
}

// Option configures New.
type Option func(*Manager)

// WithClock replaces the real clock.
func WithClock(c clock.WithTicker) Option { return func(m *Manager) { m.clock = c } }

// WithRecorder receives the events (default: logged).
func WithRecorder(r Recorder) Option { return func(m *Manager) { m.recorder = r } }

// WithRegisterer registers kubelet_evictions with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(m *Manager) {
		if reg != nil {
			reg.MustRegister(m.evictions)
		}
	}
}

// WithGarbageCollectors is what disk pressure reclaims with before
// anything else (either may be nil: not run).
func WithGarbageCollectors(containers ContainerGC, images ImageGC) Option {
	return func(m *Manager) { m.containerGC, m.imageGC = containers, images }
}

// WithStatfs replaces statfs(2) (tests).
func WithStatfs(f Statfs) Option { return func(m *Manager) { m.statfs = f } }

// New returns a manager of the pods viewer shows, laid out on the host as
// layout says (their volumes and logs; nodefs is layout.RootDir's
// filesystem).
func New(runtime Runtime, viewer Viewer, layout podconfig.Layout, cfg Config, opts ...Option) *Manager {
	if cfg.MonitoringPeriod <= 0 {
		cfg.MonitoringPeriod = DefaultMonitoringPeriod
	}
	if cfg.PressureTransitionPeriod <= 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if cfg.VolumeStatsAggPeriod <= 0 {
		cfg.VolumeStatsAggPeriod = DefaultVolumeStatsAggPeriod
	}
	m := &Manager{
		runtime: runtime, viewer: viewer, layout: layout, cfg: cfg,
		clock:   clock.RealClock{},
		statfs:  statfs,
		changed: make(chan struct{}, 1),
		evicted: map[string]string{},
		volumes: map[string]map[string]volumeUsage{},
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: kubeletAlpha + "Cumulative number of pod evictions by eviction signal",
		}, []string{"eviction_signal"}),
	}
	for _, opt := range opts {
		opt(m)
	}
	return m
}

// Enforced reports whether local storage limits are enforced.
func (m *Manager) Enforced() bool { return m.cfg.LocalStorageLimits == spec.LocalStorageEnforce }

// Evicted returns the evicted pods, by UID, with kubelet's message
// (pods.EvictionSource).
func (m *Manager) Evicted() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.evicted)
}

// Changed is signalled when a pod is evicted (pods.EvictionSource).
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// DiskPressure is the node's DiskPressure condition: whether it is true,
// and when it last changed (its lastTransitionTime, the first observation
// included; zero before it).
func (m *Manager) DiskPressure() (bool, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pressure.Active(), m.pressure.Transition
}

// Evictions is how many pods it evicted since it was made.
func (m *Manager) Evictions() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictionCount
}

// Settings is the configuration in force (its periods' defaults applied).
func (m *Manager) Settings() Config { return m.cfg }

// Run measures and acts every MonitoringPeriod until ctx is done, as
// kubelet's eviction manager's loop: after a round that evicted pods it
// waits for them to be cleaned up (up to 30 s, looking every second)
// and then synchronizes again at once.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if m.recorder == nil {
		m.recorder = events.Log(logger)
	}
	if !m.Enforced() && len(m.cfg.EvictionHard) == 0 {
		return // nothing to watch
	}
	for ctx.Err() == nil {
		if evicted := m.Synchronize(ctx); len(evicted) > 0 {
			logger.Info("Eviction manager: pods evicted, waiting for pod to be cleaned up", "pods", refs(evicted))
			m.waitForPodsCleanup(ctx, evicted)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(m.cfg.MonitoringPeriod):
		}
	}
}

// Synchronize is one round of kubelet's synchronize, in its order: node
// pressure observed (the DiskPressure condition kept), then, if enforced,
// each static pod's local storage measured against its limits; if that
// evicted a pod, the round ends there (kubelet skips the rest of eviction
// action), else node-level resources are reclaimed under pressure. It
// returns the pods it evicted.
func (m *Manager) Synchronize(ctx context.Context) []*pods.Pod {
	v := m.viewer.View()
	m.forget(v)
	var met []Threshold
	var dedicated bool
	if len(m.cfg.EvictionHard) > 0 {
		met, dedicated = m.observePressure(ctx)
	}
	if m.Enforced() {
		if evicted := m.localStorage(ctx, v); len(evicted) > 0 {
			return evicted
		}
	}
	m.reclaim(ctx, met, dedicated)
	return nil
}

// waitForPodsCleanup is kubelet's: it waits until every evicted pod is
// cleaned up (CleanedUp), looking every second, for at most 30 s.
func (m *Manager) waitForPodsCleanup(ctx context.Context, evicted []*pods.Pod) {
	logger := klog.FromContext(ctx)
	timeout := m.clock.NewTimer(podCleanupTimeout)
	defer timeout.Stop()
	ticker := m.clock.NewTicker(podCleanupPollFreq)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			logger.Info("Eviction manager: timed out waiting for pods to be cleaned up", "pods", refs(evicted))
			return
		case <-ticker.C():
			if CleanedUp(m.viewer.View(), evicted) {
				logger.Info("Eviction manager: pods successfully cleaned up", "pods", refs(evicted))
				return
			}
		}
	}
}

// CleanedUp is kubelet's PodIsFinished for each evicted pod, from the
// view: the pod is gone, or nothing of it runs any more (its containers
// and sandbox stopped; the garbage collection tears its volumes down as
// soon as a view shows it so). It is pure.
func CleanedUp(v *pods.View, evicted []*pods.Pod) bool {
	for _, e := range evicted {
		for _, p := range v.Pods() {
			if p.UID == e.UID && !p.Stopped() {
				return false
			}
		}
	}
	return true
}

// refs names pods in a log record.
func refs(ps []*pods.Pod) []klog.ObjectRef {
	out := make([]klog.ObjectRef, 0, len(ps))
	for _, p := range ps {
		out = append(out, klog.KRef(p.Namespace, p.Name))
	}
	return out
}

// forget drops the evictions of pods no longer in the view (their
// manifest changed or went, and they were removed).
func (m *Manager) forget(v *pods.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.evicted {
		if !hasUID(v, uid) {
			delete(m.evicted, uid)
		}
	}
	for uid := range m.volumes {
		if !hasUID(v, uid) {
			delete(m.volumes, uid)
		}
	}
}

func hasUID(v *pods.View, uid string) bool {
	for _, p := range v.Pods() {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// candidates are the pods local storage limits are enforced on: the
// agent's static pods, active (neither Succeeded nor Failed), not yet
// evicted, with a limit.
func (m *Manager) candidates(v *pods.View) []*pods.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*pods.Pod
	for _, p := range v.Pods() {
		if !p.Static || p.Orphaned || p.Manifest == nil || p.Manifest.Object == nil ||
			p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
			continue
		}
		if _, done := m.evicted[p.UID]; done || !hasLocalStorageLimits(p.Manifest.Object) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// localStorage is kubelet's localStorageEviction over the candidates; it
// returns the pods it evicted.
func (m *Manager) localStorage(ctx context.Context, v *pods.View) []*pods.Pod {
	logger := klog.FromContext(ctx)
	candidates := m.candidates(v)
	if len(candidates) == 0 {
		return nil
	}
	list, err := m.runtime.ListContainerStats(ctx, nil)
	if err != nil {
		logger.Error(err, "Eviction manager: failed to get container stats")
		return nil
	}
	stats := make(map[string]*runtimeapi.ContainerStats, len(list))
	for _, s := range list {
		stats[s.GetAttributes().GetId()] = s
	}
	dedicated := m.dedicatedImageFs(ctx)
	var evicted []*pods.Pod
	for _, p := range candidates {
		u, err := m.measure(p, stats)
		if err != nil {
			logger.Error(err, "Eviction manager: cannot measure the pod's local storage", "pod", klog.KRef(p.Namespace, p.Name))
			// What was measured is a lower bound: still a reason to evict.
		}
		if e, ok := LocalStorageEvictions(u, dedicated); ok {
			m.evict(ctx, p, e)
			evicted = append(evicted, p)
		}
	}
	return evicted
}

// measure is the pod's local storage use: each running container's
// writable layer (stats) and logs, the emptyDirs its limits need, its own
// log files and etc-hosts.
func (m *Manager) measure(p *pods.Pod, stats map[string]*runtimeapi.ContainerStats) (PodUsage, error) {
	uid := types.UID(p.UID)
	u := PodUsage{Pod: p.Manifest.Object, Volumes: map[string]int64{}, Containers: map[string]ContainerUsage{}}
	var errs []error
	for _, c := range p.Containers {
		if c.Current == nil || c.Current.State != cri.StateRunning {
			continue
		}
		logs, err := filesUsage(m.layout.ContainerLogsDirectory(p.Namespace, p.Name, uid, c.Name))
		errs = append(errs, err)
		u.Containers[c.Name] = ContainerUsage{
			WritableLayer: int64(stats[c.Current.ID].GetWritableLayer().GetUsedBytes().GetValue()),
			Logs:          logs,
		}
	}
	for _, vol := range measuredVolumes(u.Pod) {
		used, err := m.volumeUsage(p.UID, vol.Name)
		errs = append(errs, err)
		u.Volumes[vol.Name] = used
	}
	var err error
	u.PodLogs, err = filesUsage(m.layout.PodLogsDirectory(p.Namespace, p.Name, uid))
	errs = append(errs, err)
	u.EtcHosts = fileUsage(m.layout.EtcHosts(uid))
	return u, errors.Join(errs...)
}

// volumeUsage is the usage of the pod's emptyDir volume name, measured
// again only once VolumeStatsAggPeriod has passed since it was last
// measured, as kubelet's volume stats cache (a failed walk is not kept).
func (m *Manager) volumeUsage(uid, name string) (int64, error) {
	now := m.clock.Now()
	if c, ok := m.volumes[uid][name]; ok && now.Sub(c.at) < m.cfg.VolumeStatsAggPeriod {
		return c.used, nil
	}
	used, err := diskUsage(m.layout.VolumeDir(types.UID(uid), podconfig.PluginEmptyDir, name), maxWalkEntries)
	if err != nil {
		return used, err
	}
	if m.volumes[uid] == nil {
		m.volumes[uid] = map[string]volumeUsage{}
	}
	m.volumes[uid][name] = volumeUsage{used: used, at: now}
	return used, nil
}

// evict is kubelet's evictPod for a pod that is not critical: the
// Evicted event, the metric, and the pod marked (pod sync kills it with
// kubelet's eviction grace period and leaves it Failed).
func (m *Manager) evict(ctx context.Context, p *pods.Pod, e Eviction) {
	m.recorder.Record(events.Event{Time: m.clock.Now(), Type: events.Warning, Reason: ReasonEvicted, Namespace: p.Namespace, Pod: p.Name, Message: e.Message})
	m.evictions.WithLabelValues(e.Signal).Inc()
	m.mu.Lock()
	m.evicted[p.UID] = e.Message
	m.evictionCount++
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
	klog.FromContext(ctx).Info("Eviction manager: pod is evicted", "pod", klog.KRef(p.Namespace, p.Name), "podUID", p.UID, "message", e.Message)
}

// imageFs is the runtime's image filesystem's mountpoint ("": unknown).
func (m *Manager) imageFs(ctx context.Context) string {
	resp, err := m.runtime.ImageFsInfo(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Eviction manager: cannot read the image filesystem", "err", err)
		return ""
	}
	for _, fs := range resp.GetImageFilesystems() {
		if mp := fs.GetFsId().GetMountpoint(); mp != "" {
			return mp
		}
	}
	return ""
}

// dedicatedImageFs is kubelet's HasDedicatedImageFs: the image
// filesystem is another device than the root directory's.
func (m *Manager) dedicatedImageFs(ctx context.Context) bool {
	mp := m.imageFs(ctx)
	if mp == "" {
		return false
	}
	_, root, err1 := m.statfs(m.layout.RootDir)
	_, image, err2 := m.statfs(mp)
	return err1 == nil && err2 == nil && root != image
}

// observePressure observes the disk signals and keeps the DiskPressure
// condition (its NodeHasDiskPressure / NodeHasNoDiskPressure events are
// the agent's: kubelet records them from its node status sync); it
// returns the thresholds met and whether the images have a filesystem of
// their own.
func (m *Manager) observePressure(ctx context.Context) ([]Threshold, bool) {
	logger := klog.FromContext(ctx)
	nodefs, rootDev, err := m.statfs(m.layout.RootDir)
	if err != nil {
		logger.Error(err, "Eviction manager: cannot observe the node's filesystem")
		return nil, false
	}
	imagefs, dedicated := nodefs, false
	if mp := m.imageFs(ctx); mp != "" {
		if fs, dev, err := m.statfs(mp); err == nil {
			imagefs, dedicated = fs, dev != rootDev
		}
	}
	met := Met(m.cfg.EvictionHard, Observe(nodefs, imagefs))
	now := m.clock.Now()
	m.mu.Lock()
	was := m.pressure.Active()
	m.pressure = m.pressure.Observe(met, now, m.cfg.PressureTransitionPeriod)
	is := m.pressure.Active()
	m.mu.Unlock()
	if is != was {
		reason := ReasonNodeHasNoDiskPressure
		if is {
			reason = ReasonNodeHasDiskPressure
		}
		m.recorder.Record(events.Event{Time: now, Type: events.Normal, Reason: reason, Message: fmt.Sprintf("Node %s status is now: %s", m.cfg.NodeName, reason)})
	}
	return met, dedicated
}

// reclaim is, under pressure (a threshold met), kubelet's
// EvictionThresholdMet event, then reclaimNodeLevelResources. No pod is
// evicted for it: the agent's pods are static, which kubelet never
// evicts.
func (m *Manager) reclaim(ctx context.Context, met []Threshold, dedicated bool) {
	logger := klog.FromContext(ctx)
	t, resource, ok := toReclaim(met)
	if !ok {
		return
	}
	now := m.clock.Now()
	logger.Info("Eviction manager: attempting to reclaim", "resourceName", resource, "threshold", t.String())
	m.recorder.Record(events.Event{Time: now, Type: events.Warning, Reason: ReasonEvictionThresholdMet, Message: "Attempting to reclaim " + resource})
	r := reclaimFor(t.Signal, dedicated)
	if r.Containers && m.containerGC != nil {
		if err := m.containerGC.DeleteAllUnusedContainers(ctx); err != nil {
			logger.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", resource, "err", err)
		}
	}
	if r.Images && m.imageGC != nil {
		if _, err := m.imageGC.DeleteUnusedImages(ctx); err != nil {
			logger.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", resource, "err", err)
		}
	}
	// Kubelet would evict pods next if that was not enough; the agent's
	// pods are static, and kubelet evicts no static pod for node pressure.
	logger.V(2).Info("Eviction manager: no pod is evicted for node pressure: static pods are critical", "resourceName", resource)
}
