package restart

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// BudgetConfig is the restart budget: at most Node probe-triggered kills
// on the node, and at most Pod in any one pod, in any Interval (systemd's
// StartLimitBurst within StartLimitIntervalSec). 0 is no limit; both 0:
// no budget (kubelet's behaviour).
type BudgetConfig struct {
	Node     int
	Pod      int
	Interval time.Duration
}

// Limited reports whether a budget is set.
func (c BudgetConfig) Limited() bool { return c.Node > 0 || c.Pod > 0 }

// Check validates the configuration, naming the flags.
func (c BudgetConfig) Check() error {
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

// ReasonKillDeferred is the event of a kill that waits; ReasonKillsPaused
// and ReasonKillsResumed audit cri-prober pause and resume.
const (
	ReasonKillDeferred = "KillDeferred"
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

// KillsStatus is the budget, the pause and the kills that wait, for the
// API, the status page and cri-prober status.
type KillsStatus struct {
	Paused *Pause `json:"paused,omitempty"`
	// NodeBudget and PodBudget are the kills allowed per Interval (0: no
	// limit); KillsInWindow the node's kills in the current window.
	NodeBudget    int            `json:"nodeBudget,omitempty"`
	PodBudget     int            `json:"podBudget,omitempty"`
	Interval      string         `json:"interval,omitempty"`
	KillsInWindow int            `json:"killsInWindow"`
	Deferred      []DeferredKill `json:"deferred"`
}

// KillBudget is the node's restart budget and pause. The pod syncs read a
// snapshot of it (budgetSnapshot, an input of makePlan) and commit the
// kills their plan makes; cri-prober pause and resume change it. Safe for
// concurrent use.
type KillBudget struct {
	cfg BudgetConfig
	dir *statefile.Dir // nil: the pause is not kept

	mu       sync.Mutex
	kills    []budgetKill // oldest first, within the window
	paused   *Pause
	version  uint64
	deferred map[string][]DeferredKill // pod key → its kills that wait
	// changed is signalled when kills may go ahead (resume).
	changed chan struct{}
}

type budgetKill struct {
	pod string
	at  time.Time
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

// NewKillBudget returns the budget of cfg (check it first). With
// stateDir, a pause is kept there and restored: a node paused for
// maintenance stays paused across the agent's restarts until resumed.
func NewKillBudget(cfg BudgetConfig, stateDir string) (*KillBudget, error) {
	b := &KillBudget{cfg: cfg, deferred: map[string][]DeferredKill{}, changed: make(chan struct{}, 1)}
	if stateDir == "" {
		return b, nil
	}
	d, err := statefile.OpenDir(stateDir)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	return b, nil
}

// Config returns the budget's configuration.
func (b *KillBudget) Config() BudgetConfig { return b.cfg }

// budgetSnapshot is what a plan reads of the budget: immutable.
type budgetSnapshot struct {
	cfg     BudgetConfig
	kills   []budgetKill
	paused  bool
	version uint64
}

// snapshot returns the budget as it is now.
func (b *KillBudget) snapshot() budgetSnapshot {
	if b == nil {
		return budgetSnapshot{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return budgetSnapshot{cfg: b.cfg, kills: slices.Clone(b.kills), paused: b.paused != nil, version: b.version}
}

// commit spends n kills of pod at now, made by a plan from the snapshot
// of version; it reports false, spending nothing, when the budget changed
// since (another pod's kills, a pause): the plan is made again.
func (b *KillBudget) commit(version uint64, pod string, n int, now time.Time) bool {
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
	b.kills = slices.DeleteFunc(b.kills, func(k budgetKill) bool { return !k.at.After(now.Add(-b.cfg.Interval)) })
	for range n {
		b.kills = append(b.kills, budgetKill{pod: pod, at: now})
	}
	b.version++
	return true
}

// setDeferred sets the kills of a pod that wait (none: nil), keeping when
// each began to wait.
func (b *KillBudget) setDeferred(pod string, list []DeferredKill) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(list) == 0 {
		delete(b.deferred, pod)
		return
	}
	for i := range list {
		for _, old := range b.deferred[pod] {
			if old.ContainerID == list[i].ContainerID {
				list[i].Since = old.Since
			}
		}
	}
	b.deferred[pod] = list
}

// hasDeferred reports whether a kill of the pod waits.
func (b *KillBudget) hasDeferred(pod string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.deferred[pod]) > 0
}

// deferredPods returns the pods with kills that wait.
func (b *KillBudget) deferredPods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for pod := range b.deferred {
		out = append(out, pod)
	}
	return out
}

// deferredCounts returns how many kills wait, by reason.
func (b *KillBudget) deferredCounts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := map[string]int{DeferPaused: 0, DeferNode: 0, DeferPod: 0}
	for _, list := range b.deferred {
		for _, d := range list {
			n[d.Reason]++
		}
	}
	return n
}

// Status returns the budget, the pause and the kills that wait, at now.
func (b *KillBudget) Status(now time.Time) KillsStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := KillsStatus{NodeBudget: b.cfg.Node, PodBudget: b.cfg.Pod, Deferred: []DeferredKill{}}
	if b.cfg.Limited() {
		s.Interval = b.cfg.Interval.String()
	}
	if b.paused != nil {
		p := *b.paused
		s.Paused = &p
	}
	for _, k := range b.kills {
		if k.at.After(now.Add(-b.cfg.Interval)) {
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

// setPause pauses (p non-nil) or resumes the node's kills. It reports
// whether that changed anything, and the pause in force before.
func (b *KillBudget) setPause(p *Pause) (changed bool, before *Pause, err error) {
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
	b.paused = p
	b.version++
	if p == nil {
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	return true, before, nil
}

// killDecision is a kill that a plan defers.
type killDecision struct {
	reason string
	until  time.Time // zero: paused
}

// deferKills decides which of a pod's probe-triggered kills go ahead at
// now under the budget snapshot s: in order, each goes while the node and
// the pod have kills left in the window; the others wait (paused: all
// wait). It is pure. It returns a decision per kill, nil for a kill that
// goes ahead.
func deferKills(s budgetSnapshot, pod string, now time.Time, kills []containerToKill) []*killDecision {
	out := make([]*killDecision, len(kills))
	var nodeWindow, podWindow []time.Time
	if s.cfg.Limited() {
		from := now.Add(-s.cfg.Interval)
		for _, k := range s.kills {
			if k.at.After(from) {
				nodeWindow = append(nodeWindow, k.at)
				if k.pod == pod {
					podWindow = append(podWindow, k.at)
				}
			}
		}
	}
	for i, k := range kills {
		if _, ok := probeOf(k.cause); !ok {
			continue // exits and unknown states keep kubelet's behaviour
		}
		switch {
		case s.paused:
			out[i] = &killDecision{reason: DeferPaused}
		case s.cfg.Node > 0 && len(nodeWindow) >= s.cfg.Node:
			out[i] = &killDecision{reason: DeferNode, until: frees(nodeWindow, s.cfg.Node, s.cfg.Interval)}
		case s.cfg.Pod > 0 && len(podWindow) >= s.cfg.Pod:
			out[i] = &killDecision{reason: DeferPod, until: frees(podWindow, s.cfg.Pod, s.cfg.Interval)}
		default:
			nodeWindow = append(nodeWindow, now)
			podWindow = append(podWindow, now)
		}
	}
	return out
}

// frees is when a window holding kills (oldest first, at least limit of
// them) has room for one more: when all but limit-1 have left it.
func frees(kills []time.Time, limit int, interval time.Duration) time.Time {
	return kills[len(kills)-limit].Add(interval)
}

// probeKills counts the probe-triggered kills of a plan (what it spends).
func probeKills(pl *plan) int {
	n := 0
	for _, k := range pl.kill {
		if _, ok := probeOf(k.cause); ok {
			n++
		}
	}
	return n
}

// withheld is a result reader that hides the probe failures of the
// instances whose kill waits: to the pod's actions they run as if their
// probes had not failed.
type withheld struct {
	resultReader
	ids map[string]bool
}

func (w withheld) Get(k results.Key) (results.Result, bool) {
	r, ok := w.resultReader.Get(k)
	if ok && r == results.Failure && w.ids[k.ContainerID] && (k.Type == results.Liveness || k.Type == results.Startup) {
		return 0, false
	}
	return r, ok
}

// WithKillBudget sets the node's restart budget and pause (default: no
// budget, not paused, nothing kept).
func WithKillBudget(b *KillBudget) Option {
	return func(r *Restarter) error { r.budget = b; return nil }
}

// Kills returns the restart budget, the pause and the kills that wait.
func (r *Restarter) Kills() KillsStatus { return r.budget.Status(r.clock.Now()) }

// PauseKills pauses every probe-triggered kill on the node (cri-prober
// pause): they wait until ResumeKills; probes go on. by says who asked
// (audited in a KillsPaused event), reason why (may be empty). Pausing
// again changes nothing.
func (r *Restarter) PauseKills(ctx context.Context, by, reason string) (KillsStatus, error) {
	now := r.clock.Now()
	changed, before, err := r.budget.setPause(&Pause{By: by, Reason: reason, Since: now})
	if err != nil {
		return r.Kills(), err
	}
	if changed {
		r.syncPausedGauge()
		msg := "Probe-triggered kills paused on this node by " + by
		if reason != "" {
			msg += ": " + reason
		}
		r.nodeEvent(ctx, events.Warning, ReasonKillsPaused, msg+"; liveness and startup failures are reported but no container is killed until cri-prober resume")
	} else {
		klog.FromContext(ctx).Info("Kills already paused", "by", by, "pausedBy", before.By, "since", before.Since)
	}
	return r.Kills(), nil
}

// ResumeKills ends a pause (cri-prober resume): the kills that waited go
// ahead if their probes still fail (and the budget allows). by is audited
// in a KillsResumed event.
func (r *Restarter) ResumeKills(ctx context.Context, by string) (KillsStatus, error) {
	changed, before, err := r.budget.setPause(nil)
	if err != nil {
		return r.Kills(), err
	}
	if changed {
		r.syncPausedGauge()
		r.nodeEvent(ctx, events.Normal, ReasonKillsResumed, fmt.Sprintf("Probe-triggered kills resumed on this node by %s (paused by %s for %s)",
			by, before.By, r.clock.Since(before.Since).Round(time.Second)))
	}
	return r.Kills(), nil
}

func (r *Restarter) syncPausedGauge() {
	v := 0.0
	if r.budget.Status(r.clock.Now()).Paused != nil {
		v = 1
	}
	r.metrics.paused.Set(v)
}

// nodeEvent records an event about the node, not a pod.
func (r *Restarter) nodeEvent(ctx context.Context, eventType, reason, message string) {
	rec := r.recorder
	if rec == nil {
		rec = events.Log(klog.FromContext(ctx))
	}
	rec.Record(events.Event{Time: r.clock.Now(), Type: eventType, Reason: reason, Message: message})
}

// KillWaits reports whether the kill of container id waits (the restart
// budget, a pause): its probes go on (prober.WithKillWaits).
func (r *Restarter) KillWaits(id string) bool { return r.budget.waits(id) }

// waits reports whether a kill of container id waits.
func (b *KillBudget) waits(id string) bool {
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
