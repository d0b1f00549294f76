// Package killbudget is the node's restart budget and pause: how many
// probe-triggered kills may go ahead in a window, on the node and in any
// one pod (systemd's StartLimitBurst within StartLimitIntervalSec), whether
// cri-prober pause holds them all, the kills that wait and why, and the
// pause kept under --state-dir across the agent's restarts.
//
// Pod sync (pkg/restart) reads a Snapshot, decides from it which kills
// wait (a pure step of its plan), and spends the others with Commit, which
// refuses a plan made from a budget that changed since (another pod's
// kills, a pause): the plan is then made again. The prober asks Waits
// (a failed container whose kill waits is probed on), and the API reads
// and changes the pause (Kills, PauseKills, ResumeKills).
//
// It imports pkg/events and pkg/statefile only: pod sync, the prober and
// the API hold the budget; it knows none of them.
package killbudget

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Config is the restart budget: at most Node probe-triggered kills on the
// node, and at most Pod in any one pod, in any Interval (systemd's
// StartLimitBurst within StartLimitIntervalSec). 0 is no limit; both 0: no
// budget (kubelet's behaviour).
type Config struct {
	Node     int
	Pod      int
	Interval time.Duration
}

// Limited reports whether a budget is set.
func (c Config) Limited() bool { return c.Node > 0 || c.Pod > 0 }

// Check validates the configuration, naming the flags.
func (c Config) Check() error {
	switch {
	case c.Node < 0 || c.Pod < 0:
		return fmt.Errorf("--kill-budget and --pod-kill-budget: want 0 (no budget) or a positive number of kills, got %d and %d", c.Node, c.Pod)
	case c.Limited() && c.Interval <= 0:
		return fmt.Errorf("--kill-budget-interval %s: want a positive window, such as 5m, for the kill budget", c.Interval)
	case c.Node > 0 && c.Pod > c.Node:
		return fmt.Errorf("--pod-kill-budget %d is above --kill-budget %d: a pod could never spend it; lower it or raise --kill-budget", c.Pod, c.Node)
	}
	return nil
}

// Why a probe-triggered kill waits.
const (
	DeferPaused = "paused"      // cri-prober pause
	DeferNode   = "node-budget" // --kill-budget is spent
	DeferPod    = "pod-budget"  // --pod-kill-budget is spent
)

// ReasonKillsPaused and ReasonKillsResumed audit cri-prober pause and
// resume.
const (
	ReasonKillsPaused  = "KillsPaused"
	ReasonKillsResumed = "KillsResumed"
)

// Pause says who paused the node's kills and when.
type Pause struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
}

// DeferredKill is a probe-triggered kill that waits, and why.
type DeferredKill struct {
	Namespace   string    `json:"namespace"`
	Pod         string    `json:"pod"`
	Container   string    `json:"container"`
	ContainerID string    `json:"containerID"`
	Probe       string    `json:"probe"`
	Reason      string    `json:"reason"` // DeferPaused, DeferNode, DeferPod
	Since       time.Time `json:"since"`
	// Until is when the budget frees a kill (zero while paused): the kill
	// then goes ahead if its probe still fails.
	Until time.Time `json:"until,omitzero"`
}

// Status is the budget, the pause and the kills that wait, for the API,
// the status page and cri-prober status.
type Status struct {
	Paused *Pause `json:"paused,omitempty"`
	// NodeBudget and PodBudget are the kills allowed per Interval (0: no
	// limit); KillsInWindow the node's kills in the current window.
	NodeBudget    int            `json:"nodeBudget,omitempty"`
	PodBudget     int            `json:"podBudget,omitempty"`
	Interval      string         `json:"interval,omitempty"`
	KillsInWindow int            `json:"killsInWindow"`
	Deferred      []DeferredKill `json:"deferred"`
}

// Recorder receives the pause's and the resume's events.
type Recorder interface {
	Record(events.Event)
}

// Budget is the node's restart budget and pause. Safe for concurrent use;
// a nil *Budget is no budget, never paused.
type Budget struct {
	cfg      Config
	dir      *statefile.Dir // nil: the pause is not kept
	clock    clock.PassiveClock
	recorder Recorder // nil: logged
	metrics  *metrics

	mu       sync.Mutex
	kills    []Kill // oldest first, within the window
	paused   *Pause
	version  uint64
	deferred map[string][]DeferredKill // pod key → its kills that wait
	// changed is signalled when kills may go ahead (resume).
	changed chan struct{}
}

// Kill is a probe-triggered kill the budget counts: of which pod (its
// key), when.
type Kill struct {
	Pod string
	At  time.Time
}

// pauseFile keeps the pause under --state-dir: a Pause, or empty once
// resumed.
const pauseFile = "kills-paused.json"

// pauseFormat is the pause file's format (no version: a Pause). Its loss
// would resume the node's kills by itself, so one that cannot be read is
// kept and refused (pkg/statefile's Keep), not set aside.
var pauseFormat = statefile.Format{
	Name: pauseFile, What: "the kill pause", Limit: 64 << 10, VersionOf: statefile.Unversioned, Keep: true,
	Then: "remove it to resume kills, or run cri-prober pause again",
}

// Option configures New.
type Option func(*Budget)

// WithClock replaces the real clock (the pause's time, the window at
// Kills).
func WithClock(c clock.PassiveClock) Option { return func(b *Budget) { b.clock = c } }

// WithRecorder receives the KillsPaused and KillsResumed events (default:
// logged).
func WithRecorder(r Recorder) Option { return func(b *Budget) { b.recorder = r } }

// WithRegisterer exports the budget's gauges to reg: the kills that wait
// by reason, and whether kills are paused.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(b *Budget) { b.metrics = newMetrics(reg) }
}

// New returns the budget of cfg (check it first). With stateDir, a pause
// is kept there and restored: a node paused for maintenance stays paused
// across the agent's restarts until resumed.
func New(cfg Config, stateDir string, opts ...Option) (*Budget, error) {
	b := &Budget{cfg: cfg, deferred: map[string][]DeferredKill{}, changed: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(b)
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	if b.metrics == nil {
		b.metrics = newMetrics(nil)
	}
	if stateDir != "" {
		if err := b.load(stateDir); err != nil {
			return nil, err
		}
	}
	b.syncPausedGauge()
	return b, nil
}

// load restores the pause kept in stateDir.
func (b *Budget) load(stateDir string) error {
	d, err := statefile.OpenDir(stateDir)
	if err != nil {
		return err
	}
	b.dir = d
	_, _, err = statefile.Load(d, &pauseFormat, func(raw []byte, _ int) error {
		if len(raw) == 0 { // resumed
			return nil
		}
		var p Pause
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		b.paused = &p
		return nil
	})
	if err != nil {
		d.Close()
		return err
	}
	return nil
}

// Config returns the budget's configuration.
func (b *Budget) Config() Config { return b.cfg }

// Snapshot is what a plan reads of the budget: a value.
type Snapshot struct {
	Config Config
	Kills  []Kill // oldest first
	Paused bool
	// Version is what Commit checks: the budget has not changed since.
	Version uint64
}

// Snapshot returns the budget as it is now.
func (b *Budget) Snapshot() Snapshot {
	if b == nil {
		return Snapshot{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return Snapshot{Config: b.cfg, Kills: slices.Clone(b.kills), Paused: b.paused != nil, Version: b.version}
}

// Commit spends n kills of pod at now, made by a plan from the snapshot
// of version; it reports false, spending nothing, when the budget changed
// since (another pod's kills, a pause): the plan is made again.
func (b *Budget) Commit(version uint64, pod string, n int, now time.Time) bool {
	if b == nil || n == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.version != version {
		return false
	}
	if !b.cfg.Limited() {
		return true
	}
	b.kills = slices.DeleteFunc(b.kills, func(k Kill) bool { return !k.At.After(now.Add(-b.cfg.Interval)) })
	for range n {
		b.kills = append(b.kills, Kill{Pod: pod, At: now})
	}
	b.version++
	return true
}

// SetDeferred sets the kills of a pod that wait (none: nil), keeping when
// each began to wait.
func (b *Budget) SetDeferred(pod string, list []DeferredKill) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(list) == 0 {
		delete(b.deferred, pod)
	} else {
		for i := range list {
			for _, old := range b.deferred[pod] {
				if old.ContainerID == list[i].ContainerID {
					list[i].Since = old.Since
				}
			}
		}
		b.deferred[pod] = list
	}
	n := map[string]int{DeferPaused: 0, DeferNode: 0, DeferPod: 0}
	for _, list := range b.deferred {
		for _, d := range list {
			n[d.Reason]++
		}
	}
	for reason, count := range n {
		b.metrics.deferred.WithLabelValues(reason).Set(float64(count))
	}
}

// HasDeferred reports whether a kill of the pod waits.
func (b *Budget) HasDeferred(pod string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.deferred[pod]) > 0
}

// DeferredPods returns the pods with kills that wait.
func (b *Budget) DeferredPods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for pod := range b.deferred {
		out = append(out, pod)
	}
	return out
}

// Waits reports whether the kill of container id waits (the restart
// budget, a pause): its probes go on (prober.WithKillWaits).
func (b *Budget) Waits(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, list := range b.deferred {
		for _, d := range list {
			if d.ContainerID == id {
				return true
			}
		}
	}
	return false
}

// Resumed is signalled when the kills that waited may go ahead (resume):
// pod sync then syncs the DeferredPods again.
func (b *Budget) Resumed() <-chan struct{} { return b.changed }

// Status returns the budget, the pause and the kills that wait, at now.
func (b *Budget) Status(now time.Time) Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Status{NodeBudget: b.cfg.Node, PodBudget: b.cfg.Pod, Deferred: []DeferredKill{}}
	if b.cfg.Limited() {
		s.Interval = b.cfg.Interval.String()
	}
	if b.paused != nil {
		p := *b.paused
		s.Paused = &p
	}
	for _, k := range b.kills {
		if k.At.After(now.Add(-b.cfg.Interval)) {
			s.KillsInWindow++
		}
	}
	for _, list := range b.deferred {
		s.Deferred = append(s.Deferred, list...)
	}
	slices.SortFunc(s.Deferred, func(a, b DeferredKill) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Pod, b.Pod),
			strings.Compare(a.Container, b.Container))
	})
	return s
}

// Kills returns the restart budget, the pause and the kills that wait.
func (b *Budget) Kills() Status { return b.Status(b.clock.Now()) }

// PauseKills pauses every probe-triggered kill on the node (cri-prober
// pause): they wait until ResumeKills; probes go on. by says who asked
// (audited in a KillsPaused event), reason why (may be empty). Pausing
// again changes nothing.
func (b *Budget) PauseKills(ctx context.Context, by, reason string) (Status, error) {
	changed, before, err := b.setPause(&Pause{By: by, Reason: reason, Since: b.clock.Now()}, func(*Pause) {
		msg := "Probe-triggered kills paused on this node by " + by
		if reason != "" {
			msg += ": " + reason
		}
		b.nodeEvent(ctx, events.Warning, ReasonKillsPaused, msg+"; liveness and startup failures are reported but no container is killed until cri-prober resume")
	})
	if err == nil && !changed {
		klog.FromContext(ctx).Info("Kills already paused", "by", by, "pausedBy", before.By, "since", before.Since)
	}
	return b.Kills(), err
}

// ResumeKills ends a pause (cri-prober resume): the kills that waited go
// ahead if their probes still fail (and the budget allows). by is audited
// in a KillsResumed event.
func (b *Budget) ResumeKills(ctx context.Context, by string) (Status, error) {
	_, _, err := b.setPause(nil, func(before *Pause) {
		b.nodeEvent(ctx, events.Normal, ReasonKillsResumed, fmt.Sprintf("Probe-triggered kills resumed on this node by %s (paused by %s for %s)",
			by, before.By, b.clock.Since(before.Since).Round(time.Second)))
	})
	return b.Kills(), err
}

// setPause pauses (p non-nil) or resumes the node's kills. It reports
// whether that changed anything, and the pause in force before. announce
// records the change's event once it is kept, before it takes effect: no
// kill a resume lets go ahead is told before the KillsResumed event.
func (b *Budget) setPause(p *Pause, announce func(before *Pause)) (changed bool, before *Pause, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before = b.paused
	if (p == nil) == (b.paused == nil) {
		return false, before, nil
	}
	if b.dir != nil {
		if p != nil {
			raw, _ := json.Marshal(p)
			err = statefile.Save(b.dir, &pauseFormat, raw)
		} else {
			err = statefile.Save(b.dir, &pauseFormat, nil) // empty: resumed
		}
		if err != nil {
			return false, before, fmt.Errorf("keep the pause in the state directory: %w", err)
		}
	}
	announce(before)
	b.paused = p
	b.version++
	b.syncPausedGaugeLocked()
	if p == nil {
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	return true, before, nil
}

func (b *Budget) syncPausedGauge() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.syncPausedGaugeLocked()
}

func (b *Budget) syncPausedGaugeLocked() {
	v := 0.0
	if b.paused != nil {
		v = 1
	}
	b.metrics.paused.Set(v)
}

// nodeEvent records an event about the node, not a pod.
func (b *Budget) nodeEvent(ctx context.Context, eventType, reason, message string) {
	rec := b.recorder
	if rec == nil {
		rec = events.Log(klog.FromContext(ctx))
	}
	rec.Record(events.Event{Time: b.clock.Now(), Type: eventType, Reason: reason, Message: message})
}
