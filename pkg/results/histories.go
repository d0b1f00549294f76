package results

import (
	"slices"
	"strings"
	"sync"
)

// HistoryKey identifies a probe across its container's restarts: the pod's
// key (pods.Pod.Key), the container's name and the probe type.
type HistoryKey struct {
	Pod       string
	Container string
	Type      ProbeType
}

// ProbeHistory is one probe's recent runs, oldest first.
type ProbeHistory struct {
	Container string
	Type      ProbeType
	Recent    []Observation // the last runs, any outcome
	Failures  []Observation // the last failures and errors, kept apart
}

// Histories keeps every probe's History: written by the prober's workers,
// read by the restarter (the failures behind a restart) and the state API.
// A history outlives the worker that writes it (a spec edit replaces the
// worker, a restart keeps it) and goes with its probe (Retain). Safe for
// concurrent use.
type Histories struct {
	mu sync.Mutex
	m  map[HistoryKey]*History
}

// NewHistories returns an empty registry.
func NewHistories() *Histories { return &Histories{m: map[HistoryKey]*History{}} }

// Get returns the history of k, made on first use.
func (hs *Histories) Get(k HistoryKey) *History {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok := hs.m[k]
	if !ok {
		h = NewHistory()
		hs.m[k] = h
	}
	return h
}

// Retain drops the histories of the probes keep does not accept.
func (hs *Histories) Retain(keep func(HistoryKey) bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for k := range hs.m {
		if !keep(k) {
			delete(hs.m, k)
		}
	}
}

// For returns the recent runs of every probe of a pod (by its key), by
// container then type.
func (hs *Histories) For(pod string) []ProbeHistory {
	hs.mu.Lock()
	var out []ProbeHistory
	var list []*History
	for k, h := range hs.m {
		if k.Pod == pod {
			out = append(out, ProbeHistory{Container: k.Container, Type: k.Type})
			list = append(list, h)
		}
	}
	hs.mu.Unlock()
	for i, h := range list {
		out[i].Recent, out[i].Failures = h.Snapshot()
	}
	slices.SortFunc(out, func(a, b ProbeHistory) int {
		if c := strings.Compare(a.Container, b.Container); c != 0 {
			return c
		}
		return int(a.Type) - int(b.Type)
	})
	return out
}

// FailuresBehind returns the failures of one container instance's probe
// that reached its threshold: the last run of consecutive failures, oldest
// first (nil if the history has none).
func (hs *Histories) FailuresBehind(k HistoryKey, containerID string) []Observation {
	hs.mu.Lock()
	h, ok := hs.m[k]
	hs.mu.Unlock()
	if !ok {
		return nil
	}
	_, all := h.Snapshot()
	end := len(all)
	for end > 0 && (all[end-1].ContainerID != containerID || all[end-1].Outcome != OutcomeFailure) {
		end--
	}
	if end == 0 {
		return nil
	}
	start := end - 1
	for start > 0 && all[start-1].ContainerID == containerID && all[start-1].Outcome == OutcomeFailure &&
		all[start-1].Consecutive == all[start].Consecutive-1 {
		start--
	}
	return all[start:end]
}
