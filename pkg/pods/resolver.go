package pods

import (
	"context"
	"slices"
	"sync/atomic"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// ManifestSource gives the pods of Pod manifests (a manifests.Dir).
type ManifestSource interface {
	Pods() ([]*spec.Pod, []*spec.Error)
	Changed() <-chan struct{}
}

// Recorder receives events (configuration problems).
type Recorder interface {
	Record(events.Event)
}

// ReasonInvalidConfig is the event reason of a configuration problem.
const ReasonInvalidConfig = "InvalidProbeConfig"

// ReasonUIDConflict is the event reason of sandboxes of two pods with one
// UID (Pod.Conflicts).
const ReasonUIDConflict = "PodUIDConflict"

// Resolver resolves every relist and every change of the specs into a
// View and hands it to its subscribers. Create it with NewResolver and run
// it with Run.
type Resolver struct {
	manifests ManifestSource
	cfg       ResolverConfig // HostIP defaulted
	// readContainer reads a container's annotations, as
	// cfg.AnnotationProbeHosts says.
	readContainer AnnotationReader
	recorder      Recorder
	clock         clock.PassiveClock

	static    StaticSource
	records   RecordSource
	evictions EvictionSource

	view      atomic.Pointer[View]
	publisher Publisher

	// Owned by Run.
	snapshot    *cri.Snapshot
	annotations map[string]annotationSpec // by container ID: configs never change
	reported    map[string]bool           // problems already logged
	lastStatic  map[string]*spec.Pod      // by UID: the static pods' manifests, kept while an orphan lingers
	timed       bool                      // some pod's view depends on the time (an active deadline to come)
}

// StaticSource gives the static pods, the pods the agent makes: a static
// pod directory (a manifests.Dir in static mode) or the files `play` was
// given.
type StaticSource interface {
	Pods() ([]*spec.Pod, []*spec.Error)
	Changed() <-chan struct{}
}

// RecordSource says which static pods the agent has made and not yet
// removed, by UID (their pod records on disk survive the agent), so that a
// pod whose manifest went while the agent was away is still known to be
// its own.
type RecordSource interface {
	Records() map[string]Record
	// Changed is signalled when a record is made or removed.
	Changed() <-chan struct{}
}

// EvictionSource says which static pods the agent evicted, by UID, with
// kubelet's message (pkg/eviction's Manager).
type EvictionSource interface {
	Evicted() map[string]string
	// Changed is signalled when a pod is evicted or forgotten.
	Changed() <-chan struct{}
}

type annotationSpec struct {
	spec *spec.Container
	errs []*spec.Error
}

// ResolverConfig is how the resolver turns a relist into a view. Zero
// values are the defaults.
type ResolverConfig struct {
	// HostIP is probed for host-network pods ("": 127.0.0.1).
	HostIP string
	// ProbeNetwork is where network probes are dialled from for pods that
	// do not say (spec.ProbeNetworkNode, the default, or
	// spec.ProbeNetworkPod).
	ProbeNetwork string
	// IgnoreAnnotations leaves CRI annotations out as a spec source: only
	// manifests say what is probed and restarted (--spec-sources=manifests).
	IgnoreAnnotations bool
	// AnnotationProbeHosts says which hosts annotation probes may name
	// (--annotation-probe-hosts; "": spec.AnnotationProbeHostsPod, none;
	// or spec.AnnotationProbeHostsAny).
	AnnotationProbeHosts string
}

// Option configures NewResolver.
type Option func(*Resolver)

// WithManifests adds Pod manifests as a spec source.
func WithManifests(src ManifestSource) Option { return func(r *Resolver) { r.manifests = src } }

// WithStaticPods adds the static pods (the pods the agent makes), and
// the pod records of those it made (nil: none survive the agent).
func WithStaticPods(src StaticSource, records RecordSource) Option {
	return func(r *Resolver) { r.static, r.records = src, records }
}

// WithEvictions makes the pods evictions names Failed and Evicted.
func WithEvictions(evictions EvictionSource) Option {
	return func(r *Resolver) { r.evictions = evictions }
}

// WithRecorder receives configuration problems as events (default: logged).
func WithRecorder(rec Recorder) Option { return func(r *Resolver) { r.recorder = rec } }

// WithClock replaces the real clock (event times).
func WithClock(c clock.PassiveClock) Option { return func(r *Resolver) { r.clock = c } }

// NewResolver returns a resolver that resolves as cfg says.
func NewResolver(cfg ResolverConfig, opts ...Option) *Resolver {
	if cfg.HostIP == "" {
		cfg.HostIP = "127.0.0.1"
	}
	readContainer := ReadAnnotations
	if cfg.AnnotationProbeHosts != "" {
		readContainer = ReadAnnotationsWith(cfg.AnnotationProbeHosts)
	}
	r := &Resolver{
		cfg:           cfg,
		clock:         clock.RealClock{},
		readContainer: readContainer,
		annotations:   map[string]annotationSpec{},
		reported:      map[string]bool{},
		lastStatic:    map[string]*spec.Pod{},
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// View returns the latest view (an empty one before the first relist).
func (r *Resolver) View() *View {
	if v := r.view.Load(); v != nil {
		return v
	}
	return Resolve(nil, Inputs{})
}

// Status returns the pods' status as the latest view alone shows it,
// with nothing added: theirs when no pod sync runs.
func (r *Resolver) Status() *Status {
	if s := r.publisher.LatestStatus(); s != nil {
		return s
	}
	return NewStatus(r.View(), nil, nil)
}

// Run resolves every change of the runtime (changes, a Poller.Watch
// subscription) and of the manifests until ctx is done. What changed for
// the readers is the one diff of the views (ChangedPods).
func (r *Resolver) Run(ctx context.Context, changes *cri.Subscription) {
	if r.recorder == nil {
		r.recorder = events.Log(klog.FromContext(ctx))
	}
	var manifestsChanged, staticChanged, recordsChanged, evictionsChanged <-chan struct{}
	if r.manifests != nil {
		manifestsChanged = r.manifests.Changed()
	}
	if r.static != nil {
		staticChanged = r.static.Changed()
	}
	if r.records != nil {
		recordsChanged = r.records.Changed()
	}
	if r.evictions != nil {
		evictionsChanged = r.evictions.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Ready():
			b := changes.Next()
			r.snapshot = b.Snapshot
		case <-changes.Listed():
			b := changes.Next()
			r.snapshot = b.Snapshot
			if !b.Changed && !r.timed {
				// A relist that changed nothing: the same view, as of
				// this listing (the pod sync waits for a listing newer
				// than its own actions).
				if v := r.view.Load(); v != nil && r.snapshot != nil {
					r.publisher.Publish(v.at(r.snapshot.Time, r.snapshot.Seq), nil)
					r.view.Store(r.publisher.Latest())
					continue
				}
			}
		case <-manifestsChanged:
		case <-staticChanged:
		case <-recordsChanged:
		case <-evictionsChanged:
		}
		if r.snapshot != nil {
			r.publish(ctx, r.resolve())
		}
	}
}

// resolve builds the view of the last snapshot under the current specs.
func (r *Resolver) resolve() *View {
	in := Inputs{HostIP: r.cfg.HostIP, ProbeNetwork: r.cfg.ProbeNetwork, Annotations: r.readAnnotations, IgnoreAnnotations: r.cfg.IgnoreAnnotations}
	if r.manifests != nil {
		in.Manifests, in.ManifestErrors = r.manifests.Pods()
	}
	if r.static != nil {
		var errs []*spec.Error
		in.StaticPods, errs = r.static.Pods()
		in.ManifestErrors = append(slices.Clip(in.ManifestErrors), errs...)
		in.Removed = r.removedStatic(in.StaticPods)
	}
	if r.records != nil {
		in.Records = r.records.Records()
	}
	if r.evictions != nil {
		in.Evicted = r.evictions.Evicted()
	}
	for id := range r.annotations {
		if _, ok := r.snapshot.Container(id); !ok {
			delete(r.annotations, id)
		}
	}
	return Resolve(r.snapshot, in)
}

// removedStatic remembers the static pods' manifests and returns those of
// pods whose manifest went while their sandboxes linger, so that they are
// stopped with their spec. A manifest is forgotten once no sandbox of its
// pod is left.
func (r *Resolver) removedStatic(static []*spec.Pod) map[string]*spec.Pod {
	current := make(map[string]bool, len(static))
	for _, m := range static {
		current[m.UID] = true
		r.lastStatic[m.UID] = m
	}
	var removed map[string]*spec.Pod
	for uid, m := range r.lastStatic {
		if current[uid] {
			continue
		}
		if !r.hasSandbox(uid, m) {
			delete(r.lastStatic, uid)
			continue
		}
		if removed == nil {
			removed = map[string]*spec.Pod{}
		}
		removed[uid] = m
	}
	return removed
}

// hasSandbox reports whether the agent's sandbox of the static pod of uid
// (manifest m) is left.
func (r *Resolver) hasSandbox(uid string, m *spec.Pod) bool {
	return slices.ContainsFunc(r.snapshot.Sandboxes(), func(sb *cri.Sandbox) bool {
		return sb.UID == uid && agentsSandbox(sb, claim{m.Namespace, m.Name})
	})
}

// readAnnotations parses each container's annotations once: its config
// never changes.
func (r *Resolver) readAnnotations(namespace, pod string, c *cri.Container) (*spec.Container, []*spec.Error) {
	a, ok := r.annotations[c.ID]
	if !ok {
		a.spec, a.errs = r.readContainer(namespace, pod, c)
		r.annotations[c.ID] = a
	}
	return a.spec, a.errs
}

func (r *Resolver) publish(ctx context.Context, v *View) {
	r.timed = slices.ContainsFunc(v.Pods(), func(p *Pod) bool { return activeDeadline(p) > 0 && p.Reason == "" })
	prev := r.view.Swap(v)
	r.reportProblems(ctx, v)
	r.publisher.Publish(v, ChangedPods(prev, v))
}

// ChangedPods returns the keys of the pods that appeared, went or changed
// in any way a reader acts on.
func ChangedPods(prev, next *View) []string {
	var keys []string
	for _, p := range next.Pods() {
		if old, ok := prev.Pod(p.Key); !ok || !samePod(old, p) {
			keys = append(keys, p.Key)
		}
	}
	for _, p := range prev.Pods() {
		if _, ok := next.Pod(p.Key); !ok {
			keys = append(keys, p.Key)
		}
	}
	return keys
}

func samePod(a, b *Pod) bool {
	if a == b {
		return true
	}
	if a.Source != b.Source || a.Manifest != b.Manifest || a.Policy != b.Policy || a.Phase != b.Phase || a.Terminating != b.Terminating ||
		a.Static != b.Static || a.Orphaned != b.Orphaned || a.Reason != b.Reason ||
		a.ProbeHost != b.ProbeHost || a.InPodNetwork != b.InPodNetwork || len(a.Problems) != len(b.Problems) ||
		!slices.EqualFunc(a.Conflicts, b.Conflicts, func(x, y *spec.Error) bool { return *x == *y }) ||
		!slices.EqualFunc(a.Sandboxes, b.Sandboxes, func(x, y *cri.Sandbox) bool { return x.ID == y.ID && x.State == y.State && slices.Equal(x.IPs, y.IPs) }) ||
		len(a.Containers) != len(b.Containers) {
		return false
	}
	for i, x := range a.Containers {
		y := b.Containers[i]
		if x.Name != y.Name || x.Spec != y.Spec || x.Managed != y.Managed || len(x.Problems) != len(y.Problems) ||
			!sameInstance(x.Current, y.Current) ||
			!slices.EqualFunc(x.Instances, y.Instances, sameInstance) {
			return false
		}
	}
	return true
}

func sameInstance(a, b *cri.Container) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.State == b.State
}

// problemKind is what a reported problem is.
type problemKind int

const (
	invalid         problemKind = iota // a spec refused
	inert                              // a probe that errors at every run
	manifestWarning                    // a manifest's pod does what its author may not expect
	uidConflict                        // two pods' sandboxes with one UID
)

// reportProblems logs each configuration problem once while it lasts
// (again if it comes back after being fixed); those of a pod are also
// events. Warnings (inert probes, manifests' warnings) and UID conflicts
// are logged and evented the same way.
func (r *Resolver) reportProblems(ctx context.Context, v *View) {
	logger := klog.FromContext(ctx)
	seen := map[string]bool{}
	report := func(e *spec.Error, kind problemKind) {
		msg := e.Error()
		seen[msg] = true
		if r.reported[msg] {
			return
		}
		reason := ReasonInvalidConfig
		switch kind {
		case invalid:
			logger.Error(e, "Invalid pod manifest; fix it and it is picked up without a restart")
		case inert:
			logger.Info("WARNING: probe configuration makes a probe inert", "warning", msg)
		case manifestWarning:
			logger.Info("WARNING: pod manifest", "warning", msg)
			if e.Reason != "" {
				reason = e.Reason
			}
		case uidConflict:
			logger.Info("WARNING: sandboxes of two pods have one UID; one pod is kept apart", "problem", msg)
			reason = ReasonUIDConflict
		}
		if e.Pod != "" {
			r.recorder.Record(events.Event{Time: r.clock.Now(), Type: events.Warning, Reason: reason,
				Namespace: e.Namespace, Pod: e.Pod, Container: e.Container, Message: msg})
		}
	}
	for _, e := range v.ManifestErrors {
		report(e, invalid)
	}
	for _, w := range v.ManifestWarnings {
		report(w, manifestWarning)
	}
	for _, p := range v.Pods() {
		if !p.ManifestInvalid {
			for _, e := range p.Problems {
				report(e, invalid) // annotations' (manifest errors were reported above)
			}
		}
		for _, e := range p.Conflicts {
			report(e, uidConflict)
		}
		for _, c := range p.Containers {
			for _, e := range c.Problems {
				report(e, invalid)
			}
			if c.Spec != nil && (p.Manifest == nil || inSpec(p, c)) {
				for _, w := range c.Spec.Warnings {
					report(w, inert)
				}
			}
		}
	}
	for _, w := range v.Warnings {
		seen[w] = true
		if !r.reported[w] {
			logger.Info("Probe configuration warning", "warning", w)
		}
	}
	r.reported = seen
}

// Subscribe returns a subscription to the resolver's views; its first
// batch (if there is a view already) names every pod as changed.
func (r *Resolver) Subscribe() *Subscription { return r.publisher.Subscribe() }
