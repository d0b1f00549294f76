package pods

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// ManifestSource gives the pods of Pod manifests (spec.ManifestDir).
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

// Resolver resolves every relist and every change of the specs into a
// View and hands it to its subscribers. Create it with NewResolver and run
// it with Run.
type Resolver struct {
	manifests    ManifestSource
	hostIP       string
	probeNetwork string
	// ignoreAnnotations: CRI annotations are not a spec source.
	ignoreAnnotations bool
	recorder          Recorder
	clock             clock.PassiveClock

	view atomic.Pointer[View]

	startingMu sync.Mutex
	starting   map[Instance]struct{}
	wake       chan struct{} // capacity 1: the starting set changed

	subsMu sync.Mutex
	subs   map[*Subscription]struct{}

	// Owned by Run.
	snapshot    *cri.Snapshot
	annotations map[string]annotationSpec // by container ID: configs never change
	reported    map[string]bool           // problems already logged
}

type annotationSpec struct {
	spec *spec.Container
	errs []*spec.Error
}

// Instance names a container instance before it exists: the sandbox it is
// created in, the container's name and its attempt.
type Instance struct {
	SandboxID string
	Name      string
	Attempt   uint32
}

// InstanceOf returns the Instance of c.
func InstanceOf(c *cri.Container) Instance {
	return Instance{SandboxID: c.SandboxID, Name: c.Name, Attempt: c.Attempt}
}

// Option configures NewResolver.
type Option func(*Resolver)

// WithManifests adds Pod manifests as a spec source.
func WithManifests(src ManifestSource) Option { return func(r *Resolver) { r.manifests = src } }

// WithHostIP sets the address probed for host-network pods (default
// 127.0.0.1).
func WithHostIP(ip string) Option { return func(r *Resolver) { r.hostIP = ip } }

// WithProbeNetwork sets where network probes are dialled from for pods
// that do not say (spec.ProbeNetworkNode, the default, or ProbeNetworkPod).
func WithProbeNetwork(network string) Option { return func(r *Resolver) { r.probeNetwork = network } }

// WithoutAnnotations leaves CRI annotations out as a spec source: only
// manifests say what is probed and restarted.
func WithoutAnnotations() Option { return func(r *Resolver) { r.ignoreAnnotations = true } }

// WithRecorder receives configuration problems as events (default: logged).
func WithRecorder(rec Recorder) Option { return func(r *Resolver) { r.recorder = rec } }

// WithClock replaces the real clock (event times).
func WithClock(c clock.PassiveClock) Option { return func(r *Resolver) { r.clock = c } }

// NewResolver returns a resolver.
func NewResolver(opts ...Option) *Resolver {
	r := &Resolver{
		hostIP:      "127.0.0.1",
		clock:       clock.RealClock{},
		starting:    map[Instance]struct{}{},
		wake:        make(chan struct{}, 1),
		subs:        map[*Subscription]struct{}{},
		annotations: map[string]annotationSpec{},
		reported:    map[string]bool{},
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

// SetStarting marks an instance the agent is bringing up (true) or done
// with (false). While marked, the instance is not its container's current
// one: its predecessor stays current, probed and reported, until the start
// (postStart included) is over.
func (r *Resolver) SetStarting(i Instance, starting bool) {
	r.startingMu.Lock()
	if starting {
		r.starting[i] = struct{}{}
	} else {
		delete(r.starting, i)
	}
	r.startingMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Resolver) isStarting(c *cri.Container) bool {
	r.startingMu.Lock()
	defer r.startingMu.Unlock()
	_, ok := r.starting[InstanceOf(c)]
	return ok
}

// Run resolves every change of the runtime (changes), of the manifests and
// of the instances being started, until ctx is done.
func (r *Resolver) Run(ctx context.Context, changes *cri.Subscription) {
	if r.recorder == nil {
		r.recorder = events.Log(klog.FromContext(ctx))
	}
	var manifestsChanged <-chan struct{}
	if r.manifests != nil {
		manifestsChanged = r.manifests.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Ready():
			b := changes.Next()
			r.snapshot = b.Snapshot
		case <-manifestsChanged:
		case <-r.wake:
		}
		if r.snapshot != nil {
			r.publish(ctx, r.resolve())
		}
	}
}

// resolve builds the view of the last snapshot under the current specs.
func (r *Resolver) resolve() *View {
	in := Inputs{HostIP: r.hostIP, ProbeNetwork: r.probeNetwork, Starting: r.isStarting, Annotations: r.readAnnotations, IgnoreAnnotations: r.ignoreAnnotations}
	if r.manifests != nil {
		in.Manifests, in.ManifestErrors = r.manifests.Pods()
	}
	for id := range r.annotations {
		if _, ok := r.snapshot.Container(id); !ok {
			delete(r.annotations, id)
		}
	}
	return Resolve(r.snapshot, in)
}

// readAnnotations parses each container's annotations once: its config
// never changes.
func (r *Resolver) readAnnotations(namespace, pod string, c *cri.Container) (*spec.Container, []*spec.Error) {
	a, ok := r.annotations[c.ID]
	if !ok {
		a.spec, a.errs = ReadAnnotations(namespace, pod, c)
		r.annotations[c.ID] = a
	}
	return a.spec, a.errs
}

func (r *Resolver) publish(ctx context.Context, v *View) {
	prev := r.view.Swap(v)
	r.reportProblems(ctx, v)
	changed := changedPods(prev, v)
	if len(changed) == 0 {
		return
	}
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	for s := range r.subs {
		s.push(v, changed)
	}
}

// changedPods returns the keys of the pods that appeared, went or changed
// in any way a reader acts on.
func changedPods(prev, next *View) []string {
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
	if a.Source != b.Source || a.Manifest != b.Manifest || a.Policy != b.Policy || a.Phase != b.Phase || a.Terminating != b.Terminating ||
		a.ProbeHost != b.ProbeHost || a.InPodNetwork != b.InPodNetwork || len(a.Problems) != len(b.Problems) ||
		!slices.EqualFunc(a.Sandboxes, b.Sandboxes, func(x, y *cri.Pod) bool { return x.ID == y.ID && x.State == y.State && x.IP() == y.IP() }) ||
		len(a.Containers) != len(b.Containers) {
		return false
	}
	for i, x := range a.Containers {
		y := b.Containers[i]
		if x.Name != y.Name || x.Spec != y.Spec || x.Managed != y.Managed || len(x.Problems) != len(y.Problems) ||
			!sameInstance(x.Current, y.Current) || !sameInstance(x.Starting, y.Starting) ||
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

// reportProblems logs each configuration problem once while it lasts
// (again if it comes back after being fixed); container-level ones are
// also events. Warnings (inert probes) are logged and evented the same way.
func (r *Resolver) reportProblems(ctx context.Context, v *View) {
	logger := klog.FromContext(ctx)
	seen := map[string]bool{}
	report := func(e *spec.Error, warning bool) {
		msg := e.Error()
		seen[msg] = true
		if r.reported[msg] {
			return
		}
		if warning {
			logger.Info("WARNING: probe configuration makes a probe inert", "warning", msg)
		} else {
			logger.Error(e, "Invalid probe configuration; fix it and it is picked up without a restart")
		}
		if e.Pod != "" {
			r.recorder.Record(events.Event{Time: r.clock.Now(), Type: events.Warning, Reason: ReasonInvalidConfig,
				Namespace: e.Namespace, Pod: e.Pod, Container: e.Container, Message: msg})
		}
	}
	for _, e := range v.ManifestErrors {
		report(e, false)
	}
	for _, p := range v.Pods() {
		if !p.ManifestInvalid {
			for _, e := range p.Problems {
				report(e, false) // annotations' (manifest errors were reported above)
			}
		}
		for _, c := range p.Containers {
			for _, e := range c.Problems {
				report(e, false)
			}
			if c.Spec != nil && (p.Manifest == nil || inSpec(p, c)) {
				for _, w := range c.Spec.Warnings {
					report(w, true)
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

// Subscribe returns a subscription whose first batch (if there is a view
// already) names every pod as changed.
func (r *Resolver) Subscribe() *Subscription {
	s := &Subscription{resolver: r, ready: make(chan struct{}, 1), changed: map[string]struct{}{}}
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	r.subs[s] = struct{}{}
	if v := r.view.Load(); v != nil {
		s.push(v, changedPods(nil, v))
	}
	return s
}

// Batch is what a subscriber receives: the latest view and the keys of the
// pods that changed since its previous Next (gone ones included).
type Batch struct {
	View    *View
	Changed []string
}

// Subscription receives views without ever blocking the resolver: views
// coalesce (the latest wins, changed keys add up) until Next.
type Subscription struct {
	resolver *Resolver
	ready    chan struct{}

	mu      sync.Mutex
	view    *View
	changed map[string]struct{}
}

func (s *Subscription) push(v *View, changed []string) {
	s.mu.Lock()
	s.view = v
	for _, k := range changed {
		s.changed[k] = struct{}{}
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when a new view is waiting.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Next returns the latest view and what changed since the previous call.
func (s *Subscription) Next() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := Batch{View: s.view, Changed: make([]string, 0, len(s.changed))}
	for k := range s.changed {
		b.Changed = append(b.Changed, k)
	}
	clear(s.changed)
	return b
}

// Close stops delivery to this subscription.
func (s *Subscription) Close() {
	s.resolver.subsMu.Lock()
	delete(s.resolver.subs, s)
	s.resolver.subsMu.Unlock()
}
