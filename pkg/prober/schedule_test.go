package prober

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func latenessSamples(t *testing.T, h prometheus.Histogram) (count uint64, sum float64) {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, h.Write(m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A step that overruns its period is followed at once by one late step,
// its lateness observed; the ticks it missed are dropped, and the grid
// goes on (a Go ticker's behaviour, which kubelet's workers have).
func TestSchedulerOverrunRunsOneLateTick(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	gate := make(chan struct{})
	wt.runner.gate = gate
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	require.Eventually(t, func() bool { return wt.runner.callCount() == 1 }, 5*time.Second, time.Millisecond)

	wt.clock.Step(25 * time.Second) // ticks at 10 s and 20 s fall during the step
	gate <- struct{}{}
	require.Eventually(t, func() bool { return wt.runner.callCount() == 2 }, 5*time.Second, time.Millisecond, "the late tick runs at once")
	count, sum := latenessSamples(t, wt.metrics.lateness)
	assert.Equal(t, uint64(1), count)
	assert.InDelta(t, 15, sum, 0.001, "the tick at 10 s, run at 25 s")

	close(gate)
	rw.waitCalls(t, 2) // the tick at 20 s was dropped
	wt.clock.Step(5 * time.Second)
	rw.waitCalls(t, 3) // 30 s: the grid goes on
}

// Triggers during a step merge into one step right after it, and the next
// tick comes a full period after that one.
func TestSchedulerTriggersDuringAStepMerge(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	gate := make(chan struct{})
	wt.runner.gate = gate
	rw := startWorker(t, wt, wt.clock.Now().Add(-time.Hour), 0)
	require.Eventually(t, func() bool { return wt.runner.callCount() == 1 }, 5*time.Second, time.Millisecond)
	wt.clock.Step(3 * time.Second)
	rw.sched.trigger(rw.task)
	rw.sched.trigger(rw.task)
	close(gate)
	rw.waitCalls(t, 2)
	wt.clock.Step(9 * time.Second)
	rw.waitCalls(t, 2)
	wt.clock.Step(time.Second) // a period after the triggered step
	rw.waitCalls(t, 3)
}

// A worker stopped while it waits for its first step exits without
// probing.
func TestSchedulerStopWhileWaiting(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	rw := startWorker(t, wt, wt.clock.Now(), 0.9) // waits out its start-up jitter
	require.Eventually(t, wt.clock.HasWaiters, 5*time.Second, time.Millisecond)
	rw.sched.stop(rw.task)
	select {
	case <-rw.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not exit")
	}
	assert.Zero(t, wt.runner.callCount())
}

// Network probes beyond the bound wait for a slot; exec probes, which wait
// on the runtime rather than on the agent's CPUs, take none.
func TestSchedulerBoundsNetworkProbesInFlight(t *testing.T) {
	tcp := func(p *corev1.Probe) {
		p.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
	}
	first := newWorkerTest(t, readiness, tcp)
	clk := first.clock
	gate := make(chan struct{})
	first.runner.gate = gate
	second := newWorkerTest(t, liveness, tcp)
	second.w.clock, second.w.runner = clk, first.runner
	exec := newWorkerTest(t, readiness, nil)
	exec.w.clock = clk
	exec.runner.block = true // in flight until stopped
	network := first.runner.callCount

	s := newScheduler(clk, 1)
	ctx, cancel := context.WithCancel(context.Background())
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		s.run(ctx)
	}()
	defer func() {
		cancel()
		<-loop
	}()
	agentStart := clk.Now().Add(-time.Hour)
	exits := make(chan struct{}, 3)
	exit := func() { exits <- struct{}{} }
	tasks := []*task{s.add(ctx, exec.w, agentStart, nil, exit)}
	require.Eventually(t, func() bool { return exec.runner.callCount() == 1 }, 5*time.Second, time.Millisecond, "the exec probe is in flight")
	tasks = append(tasks, s.add(ctx, first.w, agentStart, nil, exit))
	require.Eventually(t, func() bool { return network() == 1 }, 5*time.Second, time.Millisecond, "a network probe beside it: exec takes no slot")
	tasks = append(tasks, s.add(ctx, second.w, agentStart, nil, exit))
	assert.Never(t, func() bool { return network() > 1 }, 100*time.Millisecond, 5*time.Millisecond, "the second network probe waits for the slot")

	gate <- struct{}{} // the network probe in flight ends
	require.Eventually(t, func() bool { return network() == 2 }, 5*time.Second, time.Millisecond, "the waiting probe takes the slot")
	close(gate)
	for _, tk := range tasks {
		s.stop(tk)
	}
	for range tasks {
		select {
		case <-exits:
		case <-time.After(5 * time.Second):
			t.Fatal("a worker did not exit")
		}
	}
}

// A trigger does not cut the start-up jitter short (kubelet's worker
// reads its trigger channel only after its first probe): the first step
// comes at its jittered time, the triggered one right after it.
func TestSchedulerTriggerWaitsForTheJitter(t *testing.T) {
	wt := newWorkerTest(t, readiness, func(p *corev1.Probe) { p.PeriodSeconds = 10 })
	rw := startWorker(t, wt, wt.clock.Now(), 0.5)
	require.Eventually(t, wt.clock.HasWaiters, 5*time.Second, time.Millisecond)
	rw.sched.trigger(rw.task)
	wt.clock.Step(4 * time.Second)
	rw.waitCalls(t, 0)
	wt.clock.Step(time.Second) // the jitter is over
	rw.waitCalls(t, 2)
	wt.clock.Step(9 * time.Second)
	rw.waitCalls(t, 2)
	wt.clock.Step(time.Second)
	rw.waitCalls(t, 3)
}
