package prober

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultMaxProbesInFlight bounds the network probes (HTTP, TCP, gRPC)
// running at once. A probe in flight holds a socket, buffers and a stack;
// under overload (more due probes than the CPUs can run) an unbounded
// number of them would pile up, each late, and take memory and the run
// queue from everything else, the relist included. Below the bound nothing
// waits: it takes this many probes in flight at the same moment (say, as
// many targets not answering within their timeouts) before a due probe
// waits for a slot, in the order probes fell due. Exec probes are not
// counted: they wait on the runtime, not on the agent's CPUs.
const DefaultMaxProbesInFlight = 512

// scheduler runs the workers' steps when they fall due. A worker is data
// (its state and its next due time, in a heap), not a goroutine: a
// goroutine exists only for a step in flight, so memory grows with probes
// in flight, not with probes configured. The timing is a Go ticker's, as
// kubelet's workers have: steps on a grid of the probe's period; a step
// that overruns its period is followed at once by one late step (its
// lateness observed), the ticks it missed are dropped; a manual trigger
// steps now and restarts the grid from there.
type scheduler struct {
	clock clock.WithTicker
	// maxInFlight bounds the network probes in flight (0: no bound).
	maxInFlight int

	mu       sync.Mutex
	queue    taskHeap // waiting tasks, earliest due first
	inFlight int      // network probes in flight
	wake     chan struct{}
	steps    sync.WaitGroup
}

func newScheduler(clk clock.WithTicker, maxInFlight int) *scheduler {
	return &scheduler{clock: clk, maxInFlight: maxInFlight, wake: make(chan struct{}, 1)}
}

// task is one worker's place in the scheduler; its fields are guarded by
// the scheduler's mutex, except w, which belongs to the step in flight.
type task struct {
	w *worker
	// parent is the context steps run in; each step gets a child of its
	// own, cancelled by stop (a waiting task holds no context: ten
	// thousand of them would be ten thousand entries in parent's children).
	parent context.Context
	cancel context.CancelFunc // the step in flight's
	// exit runs once, in a goroutine of the scheduler's, when the worker
	// will never step again: its step said so, or it was stopped.
	exit func()

	counted  bool          // counts against maxInFlight (not exec)
	origin   time.Time     // the grid's origin: ticks at origin + k*interval
	interval time.Duration // the grid's interval
	due      time.Time
	tick     bool // due is a tick of the grid (its lateness is observed)
	index    int  // in the heap; -1 when not queued
	running  bool
	// jitter: waiting out the start-up jitter, which no trigger cuts
	// short (as in kubelet: a trigger then runs right after the first
	// step).
	jitter  bool
	trigger bool // a trigger came during the step in flight, or the jitter
	stopped bool
}

// add schedules w's first step: now, or, right after the agent started,
// after a random part of its interval (jitter returns [0, 1)), so that a
// restarted agent does not probe everything at once (kubelet does this).
func (s *scheduler) add(ctx context.Context, w *worker, agentStart time.Time, jitter func() float64, exit func()) *task {
	t := &task{w: w, parent: ctx, exit: exit, index: -1, counted: w.probe.Exec == nil}
	now := s.clock.Now()
	t.interval = w.interval()
	t.due = now
	if t.interval > now.Sub(agentStart) {
		t.due = now.Add(time.Duration(jitter() * float64(t.interval)))
		t.jitter = true
	}
	t.origin = t.due
	s.mu.Lock()
	heap.Push(&s.queue, t)
	s.mu.Unlock()
	s.wakeUp()
	return t
}

// trigger asks for a step now instead of at the next tick; the next tick
// comes a full interval after it (kubernetes#119089). Triggers during a
// step merge into one step right after it.
func (s *scheduler) trigger(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case t.stopped:
	case t.running || t.jitter:
		t.trigger = true
	case t.index >= 0:
		now := s.clock.Now()
		t.due, t.origin, t.tick = now, now, false
		heap.Fix(&s.queue, t.index)
		s.wakeUp()
	}
}

// stop ends t: a step in flight is cancelled (and exits when it returns),
// a waiting task exits now.
func (s *scheduler) stop(t *task) {
	s.mu.Lock()
	if t.stopped {
		s.mu.Unlock()
		return
	}
	t.stopped = true
	if t.running {
		t.cancel()
		s.mu.Unlock()
		return
	}
	if t.index >= 0 {
		heap.Remove(&s.queue, t.index)
	}
	s.mu.Unlock()
	s.steps.Add(1)
	go func() {
		defer s.steps.Done()
		t.exit()
	}()
}

// run starts due steps until ctx is done; then it waits for the steps in
// flight (whose contexts derive from their own, cancelled by stop).
func (s *scheduler) run(ctx context.Context) {
	defer s.steps.Wait()
	timer := s.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if wait, ok := s.dispatch(); ok {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-s.wake:
			timer.Stop()
		}
	}
}

func (s *scheduler) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatch starts every due step there is a slot for, earliest due first,
// and says how long until the next one falls due (ok false: none waits, or
// none can start before a slot frees).
func (s *scheduler) dispatch() (wait time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for len(s.queue) > 0 {
		t := s.queue[0]
		if t.due.After(now) {
			return t.due.Sub(now), true
		}
		if t.counted && s.maxInFlight > 0 && s.inFlight >= s.maxInFlight {
			// Full: the earliest due waits for a slot (steps ending
			// wake the loop); exec steps behind it wait too, so that
			// the order stays the order of due times.
			return 0, false
		}
		heap.Pop(&s.queue)
		t.running, t.jitter = true, false
		if t.counted {
			s.inFlight++
		}
		late := time.Duration(-1)
		if t.tick {
			late = now.Sub(t.due)
		}
		var ctx context.Context
		ctx, t.cancel = context.WithCancel(t.parent)
		s.steps.Add(1)
		go s.step(ctx, t, now, late)
	}
	return 0, false
}

// step runs one step of t's worker, begun at start (late: how late its
// tick is, negative when it is not a tick), and schedules the next.
func (s *scheduler) step(ctx context.Context, t *task, start time.Time, late time.Duration) {
	defer s.steps.Done()
	if late >= 0 {
		t.w.lateness.Observe(late.Seconds())
	}
	keep := ctx.Err() == nil && t.w.step(ctx)
	// The worker may change pace (in or out of a startInterval); read
	// before taking the lock: the worker's state is this goroutine's.
	interval := t.w.interval()

	s.mu.Lock()
	t.running = false
	cancelled := ctx.Err() != nil // stop, or the parent's end
	t.cancel()
	if t.counted {
		s.inFlight--
	}
	if !keep || cancelled || t.stopped {
		t.stopped = true
		s.mu.Unlock()
		s.wakeUp()
		t.exit()
		return
	}
	now := s.clock.Now()
	switch {
	case t.trigger:
		// A trigger came during the step: one more step now, the grid
		// restarting from it.
		t.trigger = false
		t.due, t.origin, t.tick = now, now, false
	case interval != t.interval:
		// A new pace starts now.
		t.interval, t.origin = interval, now
		t.due, t.tick = now.Add(interval), true
	case t.interval <= 0:
		// Validation allows no such probe; never spin on one.
		t.due, t.tick = now.Add(time.Second), true
	default:
		// The first tick after the step began: ticks that fell during it
		// but the first are dropped, and that one runs at once, late.
		t.due = t.origin.Add((start.Sub(t.origin)/t.interval + 1) * t.interval)
		t.tick = true
	}
	heap.Push(&s.queue, t)
	s.mu.Unlock()
	s.wakeUp()
}

// taskHeap orders waiting tasks by due time.
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
