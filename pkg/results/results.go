// Package results holds probe results per container and probe type: the
// stable (threshold-applied) result that drives readiness and restarts, an
// update stream that never blocks the worker that writes, the last raw
// observation of each probe (and a signal of each, for readers that show
// them), and the Started and Ready flags derived from
// them exactly as kubelet's UpdatePodStatus derives them.
//
// It imports only the standard library and pkg/pubsub: its vocabulary is shared by the
// prober that writes results and the restarter that acts on them.
package results

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cri-prober/cri-prober/pkg/pubsub"
)

// ProbeType is liveness, readiness or startup.
type ProbeType int

const (
	Liveness ProbeType = iota
	Readiness
	Startup
)

// ProbeTypes lists the types in the order kubelet creates their workers.
var ProbeTypes = []ProbeType{Startup, Readiness, Liveness}

// String returns kubelet's name for the type ("Liveness", …), as used in
// events ("Liveness probe failed: …") and metric labels.
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	default:
		return "Unknown"
	}
}

// Result is a stable probe result, kubelet's results.Result.
type Result int

const (
	Unknown Result = iota - 1
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "UNKNOWN"
	}
}

// MarshalText writes the result by name (state files outlive versions).
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a name MarshalText wrote; anything else is Unknown.
func (r *Result) UnmarshalText(b []byte) error {
	switch string(b) {
	case "Success":
		*r = Success
	case "Failure":
		*r = Failure
	default:
		*r = Unknown
	}
	return nil
}

// Key identifies one probe of one container instance.
type Key struct {
	ContainerID string
	Type        ProbeType
}

// Update says that the stable result for Key changed. PodKey is the
// key of the container's pod (pods.Pod.Key: its UID, or for a pod without
// one its namespace and name), as the prober gave it to Set.
type Update struct {
	Key
	Result Result
	PodKey string
}

// Observation is what the last probe run saw, before thresholds: for
// people and APIs, never for decisions.
type Observation struct {
	Time     time.Time
	Duration time.Duration
	// Outcome is the probe's own verdict: success, warning, failure, or
	// unknown when it could not run (Err says why).
	Outcome     Outcome
	Output      string
	Err         string
	Consecutive int // consecutive results equal to this one, this included
	Threshold   int // how many are needed to change the stable result
	// Changed: this run changed the stable result (a threshold reached).
	Changed     bool
	ContainerID string
}

// Outcome is a probe run's raw verdict, as kubelet's probe.Result.
type Outcome string

const (
	OutcomeSuccess Outcome = "success"
	OutcomeWarning Outcome = "warning"
	OutcomeFailure Outcome = "failure"
	OutcomeUnknown Outcome = "unknown"
)

// entry is one probe's: its last observation kept in place (a probe in
// steady state writes it every run, allocating nothing).
type entry struct {
	result      Result
	podKey      string
	observed    bool
	observation Observation
}

// Store holds results. It is safe for concurrent use.
type Store struct {
	mu      sync.RWMutex
	entries map[Key]*entry
	// changes counts the stable results set and removed; observed, the
	// runs observed: readers that cache what they show compare them.
	changes, observed atomic.Uint64

	updates pubsub.Topic[Update, []Update]
	// runs tells of each run observed, for readers that show the last
	// runs (cri-prober wait, play); pod sync acts on stable results alone.
	runs pubsub.Topic[struct{}, struct{}]
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{entries: map[Key]*entry{}}
}

// Get returns the stable result for k.
func (s *Store) Get(k Key) (Result, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[k]
	if !ok {
		return Unknown, false
	}
	return e.result, true
}

// Set records the stable result for k, a probe of a container of the pod
// of podKey, and tells subscribers if it changed.
func (s *Store) Set(k Key, r Result, podKey string) (changed bool) {
	s.mu.Lock()
	e, ok := s.entries[k]
	switch {
	case !ok:
		s.entries[k] = &entry{result: r, podKey: podKey}
		changed = true
	case e.result != r:
		e.result = r
		changed = true
	}
	s.mu.Unlock()
	if changed {
		s.changes.Add(1)
		s.updates.Publish(Update{Key: k, Result: r, PodKey: podKey})
	}
	return changed
}

// Versions count the stable results set or removed, and the runs
// observed, so far: a reader that caches what it made of the store
// compares them.
func (s *Store) Versions() (results, observations uint64) {
	return s.changes.Load(), s.observed.Load()
}

// Remove forgets k (its result and observation). Like kubelet, removal is
// not an update: it happens when a worker stops or its container is gone.
func (s *Store) Remove(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, k)
	s.changes.Add(1)
}

// Saved is what an agent restart needs of one probe to go on where it
// was: the stable result and the current run of equal results, counted up
// to the threshold only (beyond it the count changes nothing), so that a
// probe in a steady state leaves its Saved unchanged.
type Saved struct {
	Result      Result `json:"result"`
	LastOutcome Result `json:"lastOutcome"` // Success or Failure: the run's kind ("" before any run)
	Consecutive int    `json:"consecutive"`
}

// Export returns every probe's Saved state.
func (s *Store) Export() map[Key]Saved {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[Key]Saved, len(s.entries))
	for k, e := range s.entries {
		sv := Saved{Result: e.result}
		if o := &e.observation; e.observed && o.Err == "" {
			sv.LastOutcome, sv.Consecutive = Failure, min(o.Consecutive, o.Threshold)
			if o.Outcome == OutcomeSuccess || o.Outcome == OutcomeWarning {
				sv.LastOutcome = Success
			}
		}
		out[k] = sv
	}
	return out
}

// Observe records the last raw observation for k, if k has a result, and
// tells the subscribers of runs (SubscribeRuns).
func (s *Store) Observe(k Key, o Observation) {
	if s.observe(k, o) {
		s.runs.Publish(struct{}{})
	}
}

func (s *Store) observe(k Key, o Observation) (observed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[k]
	if !ok {
		return false
	}
	// An output equal to the last one keeps the last one's string: the
	// history holds that one too (probes mostly print the same thing).
	if e.observed && o.Output == e.observation.Output {
		o.Output = e.observation.Output
	}
	e.observation, e.observed = o, true
	s.observed.Add(1)
	return true
}

// LastObservation returns the last raw observation for k.
func (s *Store) LastObservation(k Key) (Observation, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[k]
	if !ok || !e.observed {
		return Observation{}, false
	}
	return e.observation, true
}

// Container is what a container's Started and Ready flags depend on
// besides its probes' results.
type Container struct {
	ID      string
	Running bool
	// Started is the container's Started flag (Store.Started), which
	// gates Ready.
	Started bool
	// HasStartupProbe and HasReadinessProbe: the container has one.
	HasStartupProbe, HasReadinessProbe bool
}

// Started reports a container's Started flag as kubelet's UpdatePodStatus
// computes it: false unless running; the startup result if there is one;
// otherwise true only when the container has no startup probe.
func (s *Store) Started(c Container) bool {
	if !c.Running {
		return false
	}
	if r, ok := s.Get(Key{ContainerID: c.ID, Type: Startup}); ok {
		return r == Success
	}
	return !c.HasStartupProbe
}

// Ready reports a container's Ready flag as kubelet's UpdatePodStatus
// computes it: running and started, and a readiness result of Success or
// no readiness probe at all.
func (s *Store) Ready(c Container) bool {
	if !c.Running || !c.Started {
		return false
	}
	if r, ok := s.Get(Key{ContainerID: c.ID, Type: Readiness}); ok && r == Success {
		return true
	}
	return !c.HasReadinessProbe
}

// Subscription receives updates without ever blocking the writer: updates
// for the same key coalesce to the latest one until Next is called. Next
// returns the pending updates in the order their keys first changed, each
// with its latest result.
type Subscription = pubsub.Subscription[Update, []Update]

// Subscribe returns a new subscription. Close it when done.
func (s *Store) Subscribe() *Subscription {
	return s.updates.Subscribe(&pendingUpdates{index: map[Key]int{}}, nil)
}

// RunSubscription is signalled (Ready) when runs were observed since its
// previous Next.
type RunSubscription = pubsub.Subscription[struct{}, struct{}]

// SubscribeRuns returns a subscription to the runs observed (Observe).
// Close it when done.
func (s *Store) SubscribeRuns() *RunSubscription { return s.runs.Subscribe(anyRun{}, nil) }

// anyRun gathers that some run was observed: which one, the reader reads
// from the store.
type anyRun struct{}

func (anyRun) Add(struct{}) bool { return true }
func (anyRun) Take() struct{}    { return struct{}{} }

// pendingUpdates gathers updates, one per key.
type pendingUpdates struct {
	index   map[Key]int // into updates
	updates []Update
}

func (p *pendingUpdates) Add(u Update) bool {
	if i, ok := p.index[u.Key]; ok {
		p.updates[i] = u
	} else {
		p.index[u.Key] = len(p.updates)
		p.updates = append(p.updates, u)
	}
	return true
}

func (p *pendingUpdates) Take() []Update {
	out := p.updates
	p.updates = nil
	clear(p.index)
	return out
}
