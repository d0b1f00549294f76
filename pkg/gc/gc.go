package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// DefaultPeriod is kubelet's ContainerGCPeriod: a collection every minute.
const DefaultPeriod = time.Minute

// minimumGracePeriod is kubelet's minimumGracePeriodInSeconds: an instance
// in an unknown state is stopped with at least this before its removal.
const minimumGracePeriod = 2

// Config is the garbage collection's settings. Zero values are kubelet's
// defaults.
type Config struct {
	// Policy is what is kept (nil: DefaultPolicy, kubelet's).
	Policy *Policy
	// Period is how often it collects (0: DefaultPeriod); only tests set
	// another.
	Period time.Duration
}

// Runtime is what the collection does through CRI (cri.Client).
type Runtime interface {
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

var _ Runtime = (*cri.Client)(nil)

// ContainerLogs removes a removed instance's log files (its log, rotated
// files and link), as kubelet's removeContainerLog (pkg/logs; the same
// value pod sync is given).
type ContainerLogs interface {
	Remove(namespace, podName string, inst *cri.Container) error
}

// Terminator tears a terminated pod's host side down, keeping its pod
// directory and record (pkg/podmaker): its volumes (emptyDir contents
// removed, tmpfs unmounted, downwardAPI and projected files removed) and
// its pod cgroup.
type Terminator interface {
	TearDownTerminated(ctx context.Context, p *pods.Pod) error
}

// PodLogs removes a pod's log directory
// (<podLogsDir>/<namespace>_<name>_<uid>), as kubelet's
// evictPodLogsDirectories, for a pod whose content may be removed but
// whose record stays (an evicted pod); the same removal pod sync's
// teardown of an orphan does (pkg/podmaker).
type PodLogs interface {
	RemovePodLogs(ctx context.Context, p *pods.Pod) error
}

// DanglingLinks removes the log links whose log file is gone (pkg/logs'
// Links): kubelet's container GC removes every dangling link of
// /var/log/containers at each collection.
type DanglingLinks interface {
	PruneDangling() (int, error)
}

// GC is the node's garbage collection of the agent's instances, sandboxes
// and terminated pods.
type GC struct {
	runtime Runtime
	cfg     Config
	clock   clock.WithTicker
	logs    ContainerLogs
	term    Terminator
	podLogs PodLogs
	links   DanglingLinks
	metrics *metrics

	// latest is the newest view Run was given, for a collection node
	// pressure asks for (DeleteAllUnusedContainers); collecting serializes
	// that one with Run's.
	latest     atomic.Pointer[pods.View]
	collecting sync.Mutex

	// removed counts what it removed since it was made (Removed).
	containersRemoved, sandboxesRemoved atomic.Uint64

	// Owned by Run's goroutine: the terminated pods torn down (by UID) and
	// those whose teardown failed, retried at the next collection; the
	// instances deleteExited removed while a view may still list them.
	done, failed, deleted map[string]bool
}

// Option is an optional dependency of GC.
type Option func(*GC)

// WithClock sets the clock (default: the real one).
func WithClock(c clock.WithTicker) Option { return func(g *GC) { g.clock = c } }

// WithContainerLogs removes the log files of the instances it removes.
func WithContainerLogs(l ContainerLogs) Option { return func(g *GC) { g.logs = l } }

// WithTerminator tears terminated pods down (nil: not done; the agent
// makes no pods).
func WithTerminator(t Terminator) Option { return func(g *GC) { g.term = t } }

// WithPodLogs removes the pod log directory of an evicted pod at each
// collection (nil: not done).
func WithPodLogs(l PodLogs) Option { return func(g *GC) { g.podLogs = l } }

// WithDanglingLinks removes the dangling log links at each collection.
func WithDanglingLinks(l DanglingLinks) Option { return func(g *GC) { g.links = l } }

// WithRegisterer exports its series to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(g *GC) { g.metrics = newMetrics(reg) }
}

// New returns the garbage collection of rt's containers and sandboxes.
func New(rt Runtime, cfg Config, opts ...Option) *GC {
	g := &GC{runtime: rt, cfg: cfg, clock: clock.RealClock{}, done: map[string]bool{}, failed: map[string]bool{}, deleted: map[string]bool{}}
	for _, o := range opts {
		o(g)
	}
	if g.cfg.Period <= 0 {
		g.cfg.Period = DefaultPeriod
	}
	if g.cfg.Policy == nil {
		g.cfg.Policy = &DefaultPolicy
	}
	if g.metrics == nil {
		g.metrics = newMetrics(nil)
	}
	return g
}

// Run collects at the first view and then every period from the newest
// view of views until ctx is done (kubelet's wait.Until runs its first
// collection at once), and tears a terminated pod down as soon as a view
// shows it terminated (a failed teardown is tried again at the next
// collection).
func (g *GC) Run(ctx context.Context, views *pods.Subscription) {
	ticker := g.clock.NewTicker(g.cfg.Period)
	defer ticker.Stop()
	collected := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-views.Ready():
			v := views.Next().View
			if v == nil {
				continue
			}
			g.latest.Store(v)
			g.deleteExited(ctx, v.Pods())
			if !collected {
				collected = true
				g.collect(ctx, v.Pods(), Periodic)
				g.tearDownTerminated(ctx, v.Pods(), true)
				continue
			}
			g.tearDownTerminated(ctx, v.Pods(), false)
		case <-ticker.C():
			v := views.Latest()
			if v == nil {
				continue // nothing listed yet
			}
			g.latest.Store(v)
			g.collect(ctx, v.Pods(), Periodic)
			g.tearDownTerminated(ctx, v.Pods(), true)
		}
	}
}

// deleteExited carries Deletions out for a new view, once per instance:
// a view listed before a removal ended may show it again.
func (g *GC) deleteExited(ctx context.Context, all []*pods.Pod) {
	removals := Deletions(all, *g.cfg.Policy)
	if len(removals) == 0 && len(g.deleted) == 0 {
		return
	}
	g.collecting.Lock()
	defer g.collecting.Unlock()
	listed := map[string]bool{}
	for _, p := range all {
		for _, c := range p.Containers {
			for _, i := range c.Instances {
				listed[i.ID] = true
			}
		}
	}
	for id := range g.deleted {
		if !listed[id] {
			delete(g.deleted, id)
		}
	}
	for _, r := range removals {
		if g.deleted[r.Instance.ID] {
			continue
		}
		if err := g.removeContainer(ctx, r); err != nil {
			klog.FromContext(ctx).Info("DeleteContainer returned error", "containerID", r.Instance.ID, "err", err)
			continue
		}
		g.deleted[r.Instance.ID] = true
		g.removedContainer()
	}
}

// Removed is how many dead instances and sandboxes it removed since it
// was made.
func (g *GC) Removed() (containers, sandboxes uint64) {
	return g.containersRemoved.Load(), g.sandboxesRemoved.Load()
}

// removedContainer counts a dead instance removed.
func (g *GC) removedContainer() {
	g.metrics.containers.Inc()
	g.containersRemoved.Add(1)
}

// Policy is the policy in force (kubelet's when none was given).
func (g *GC) Policy() Policy { return *g.cfg.Policy }

// DeleteAllUnusedContainers is a collection now in AllUnused mode (every
// terminated pod loses all its dead instances and sandboxes), over the
// newest view Run was given: what kubelet's eviction manager asks of its
// container GC under disk pressure before it evicts anything.
func (g *GC) DeleteAllUnusedContainers(ctx context.Context) error {
	klog.FromContext(ctx).Info("Attempting to delete unused containers")
	v := g.latest.Load()
	if v == nil {
		return errors.New("no pods listed yet")
	}
	g.collect(ctx, v.Pods(), AllUnused)
	return nil
}

// collect is one collection over the pods of a view (kubelet's
// GarbageCollect): what Decide says, carried out. Failures are logged, as
// kubelet logs them, and what failed is tried again at the next
// collection.
func (g *GC) collect(ctx context.Context, all []*pods.Pod, mode Mode) {
	g.collecting.Lock()
	defer g.collecting.Unlock()
	logger := klog.FromContext(ctx)
	d := Decide(all, g.clock.Now(), *g.cfg.Policy, mode)
	for _, r := range d.Containers {
		if err := g.removeContainer(ctx, r); err != nil {
			logger.Error(err, "Failed to remove container", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "containerName", r.Instance.Name, "containerID", r.Instance.ID)
			continue
		}
		g.removedContainer()
	}
	for _, r := range d.Sandboxes {
		if err := g.removeSandbox(ctx, r.Sandbox.ID); err != nil {
			logger.Error(err, "Failed to remove sandbox", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name), "sandboxID", r.Sandbox.ID)
			continue
		}
		g.metrics.sandboxes.Inc()
		g.sandboxesRemoved.Add(1)
	}
	g.removePodLogs(ctx, d.PodLogs)
	if g.links != nil {
		if n, err := g.links.PruneDangling(); err != nil {
			logger.Error(err, "Failed to remove dangling container log links")
		} else if n > 0 {
			logger.V(2).Info("Removed dangling container log links", "links", n)
		}
	}
	if n := len(d.Containers) + len(d.Sandboxes); n > 0 {
		logger.V(4).Info("Container garbage collection succeeded", "containers", len(d.Containers), "sandboxes", len(d.Sandboxes))
	}
}

// removePodLogs removes the pod log directories of the given pods, as
// kubelet's evictPodLogsDirectories (a failure is logged and tried again
// at the next collection).
func (g *GC) removePodLogs(ctx context.Context, all []*pods.Pod) {
	if g.podLogs == nil {
		return
	}
	logger := klog.FromContext(ctx)
	for _, p := range all {
		logger.V(4).Info("Removing pod logs", "podUID", p.UID)
		if err := g.podLogs.RemovePodLogs(ctx, p); err != nil {
			logger.Error(err, "Failed to remove pod logs directory", "pod", klog.KRef(p.Namespace, p.Name), "podUID", p.UID)
		}
	}
}

// removeContainer is kubelet's removeOldestN for one instance: one in an
// unknown state stopped first (it could be running), then its log files
// removed, then the instance, as kubelet's removeContainer.
func (g *GC) removeContainer(ctx context.Context, r Removal) error {
	i := r.Instance
	if i.State == cri.StateUnknown {
		grace := max(r.Pod.Policy.TerminationGracePeriodSeconds, minimumGracePeriod)
		if err := g.runtime.StopContainer(ctx, i.ID, grace); err != nil && !cri.IsNotFound(err) {
			return fmt.Errorf("stop container in an unknown state before its removal: %w", err)
		}
	}
	if g.logs != nil { // kubelet's removeContainer: its logs first
		if err := g.logs.Remove(r.Pod.Namespace, r.Pod.Name, i); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to remove the log files of a container", "pod", klog.KRef(r.Pod.Namespace, r.Pod.Name),
				"containerName", i.Name, "containerID", i.ID)
		}
	}
	if err := g.runtime.RemoveContainer(ctx, i.ID); err != nil && !cri.IsNotFound(err) {
		return err
	}
	return nil
}

// removeSandbox is kubelet's: stopped first (it should be already), then
// removed.
func (g *GC) removeSandbox(ctx context.Context, id string) error {
	if err := g.runtime.StopPodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("stop sandbox before removing: %w", err)
	}
	if err := g.runtime.RemovePodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
		return err
	}
	return nil
}

// tearDownTerminated tears down the pods of a view that terminated
// (Terminated) once each; one whose teardown failed is tried again only
// when retry is set (at a collection, not at every view).
func (g *GC) tearDownTerminated(ctx context.Context, all []*pods.Pod, retry bool) {
	if g.term == nil {
		return
	}
	present := map[string]bool{}
	for _, p := range all {
		present[p.UID] = true
	}
	for _, m := range []map[string]bool{g.done, g.failed} {
		for uid := range m {
			if !present[uid] {
				delete(m, uid)
			}
		}
	}
	logger := klog.FromContext(ctx)
	for _, p := range Terminated(all, g.done) {
		if g.failed[p.UID] && !retry {
			continue
		}
		if err := g.term.TearDownTerminated(ctx, p); err != nil {
			g.failed[p.UID] = true
			g.metrics.terminatedErrors.Inc()
			if !errors.Is(err, context.Canceled) {
				logger.Error(err, "Failed to tear down the volumes and cgroup of a terminated pod; retrying at the next garbage collection", "pod", klog.KRef(p.Namespace, p.Name), "podUID", p.UID)
			}
			continue
		}
		delete(g.failed, p.UID)
		g.done[p.UID] = true
		g.metrics.terminated.Inc()
		logger.Info("Tore down the volumes and cgroup of a terminated pod", "pod", klog.KRef(p.Namespace, p.Name), "podUID", p.UID, "phase", p.Phase)
	}
}
