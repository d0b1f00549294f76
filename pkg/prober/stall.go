package prober

import (
	"context"
	"errors"
	"fmt"
	rtmetrics "runtime/metrics"
	"sync"
	"time"

	"github.com/cri-prober/cri-prober/pkg/probe"
)

// The agent's own starvation is not the target's failure: a probe that
// timed out while the agent's goroutines could not run (a flood of API
// requests, a CPU limit, a busy node) could not probe, as running out of
// file descriptors could not (kubelet's error path: thrown away, never
// counted). stallMonitor measures it two ways: how late a ticker's
// goroutine runs (the process itself not scheduled: a CPU limit, a busy
// node), and how long the Go runtime's goroutines waited to run
// (/sched/latencies: the agent's own goroutines crowding the probes', a
// flood of API requests); a probe's response wakes its goroutine through
// the network poller, which gets no priority over the others.
const (
	stallTick = 20 * time.Millisecond
	// schedEvery ticks, the runtime's scheduling latencies are read.
	schedEvery = 5
	// schedQuantile of the goroutines that became runnable since the
	// last read waited at most the lateness noted: a probe's goroutine is
	// one of many.
	schedQuantile = 0.99
	// stallWindow is how far back stalls are kept: a probe's timeout is
	// at most this (longer probes are not judged by the monitor).
	stallWindow = 2 * time.Minute
	// stallFraction of a probe's timeout, lost to the agent's own lateness
	// while it ran, makes its timeout the agent's: the target may have
	// answered in time.
	stallFraction = 4
	// minStall is the least lateness that counts, whatever the timeout:
	// below it, scheduling noise.
	minStall = 100 * time.Millisecond
)

// ErrAgentOverload is a probe timeout the agent caused: its goroutines ran
// late during the probe.
var ErrAgentOverload = errors.New("the agent itself was starved of CPU during the probe")

// causeStarved is the agent_resource_errors_total cause of ErrAgentOverload.
const causeStarved = "CPU"

// resourceCause names the agent's own shortage behind err, if any: a
// bounded label.
func resourceCause(err error) string {
	if errors.Is(err, ErrAgentOverload) {
		return causeStarved
	}
	return probe.ResourceCause(err)
}

// resourceCauses lists every label resourceCause gives.
func resourceCauses() []string { return append(probe.ResourceCauses(), causeStarved) }

// stall is one late tick: when it ran, how late.
type stall struct {
	at       time.Time
	lateness time.Duration
}

// stallMonitor keeps the stalls of the last stallWindow.
type stallMonitor struct {
	mu     sync.Mutex
	stalls []stall // oldest first, at least minStall/2 late each
}

// run ticks until ctx is done, noting each tick that ran late and, every
// schedEvery ticks, how long goroutines waited to run.
func (s *stallMonitor) run(ctx context.Context) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	sched := newSchedLatency()
	want := time.Now().Add(stallTick)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// The ticker's channel holds one tick: a stall longer than a
			// tick shows as the time since the expected one.
			late := time.Since(want)
			if n%schedEvery == 0 {
				late = max(late, sched.since())
			}
			if late >= minStall/2 {
				s.note(stall{at: now, lateness: late})
			}
			want = time.Now().Add(stallTick)
		}
	}
}

// schedLatency reads the runtime's histogram of how long goroutines
// waited runnable before running, by difference between reads.
type schedLatency struct {
	sample []rtmetrics.Sample
	last   []uint64
}

func newSchedLatency() *schedLatency {
	s := &schedLatency{sample: []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}}}
	s.since() // the first read sets the base
	return s
}

// since is the schedQuantile of the waits since the last call (0 if none,
// or if the runtime does not say).
func (s *schedLatency) since() time.Duration {
	rtmetrics.Read(s.sample)
	if s.sample[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	if len(s.last) != len(h.Counts) {
		s.last = make([]uint64, len(h.Counts))
		copy(s.last, h.Counts)
		return 0
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - s.last[i]
	}
	var worst time.Duration
	if total > 0 {
		// The bucket holding the quantile, from the top.
		tail := uint64(float64(total) * (1 - schedQuantile))
		var seen uint64
		for i := len(h.Counts) - 1; i >= 0; i-- {
			seen += h.Counts[i] - s.last[i]
			if seen > tail {
				worst = time.Duration(h.Buckets[i] * float64(time.Second)) // the bucket's lower bound
				break
			}
		}
	}
	copy(s.last, h.Counts)
	return worst
}

func (s *stallMonitor) note(st stall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := 0
	for cut < len(s.stalls) && st.at.Sub(s.stalls[cut].at) > stallWindow {
		cut++
	}
	s.stalls = append(s.stalls[cut:], st)
}

// starved returns how late the agent ran at worst between from and to,
// if that lost it a stallFraction of timeout (and minStall): then a
// timeout in that time is the agent's, not the target's.
func (s *stallMonitor) starved(from, to time.Time, timeout time.Duration) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var worst time.Duration
	for _, st := range s.stalls {
		// A stall noticed at st.at covers [st.at-lateness, st.at].
		if st.at.Before(from) || st.at.Add(-st.lateness).After(to) {
			continue
		}
		worst = max(worst, st.lateness)
	}
	return worst, worst >= max(timeout/stallFraction, minStall)
}

// overloadError says how late the agent ran.
func overloadError(worst time.Duration) error {
	return fmt.Errorf("%w: its goroutines ran up to %s late, so the probe's timeout says nothing of the target", ErrAgentOverload, worst.Round(time.Millisecond))
}
