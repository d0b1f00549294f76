package restart

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

var (
	t0     = time.Unix(1_000_000, 0)
	appKey = containerKey{pod: "pod", container: "app"}
	kKey   = containerKey{pod: "pod", container: "k"}
)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// A container that crashes at once every time: restarts after 0, 10, 20,
// 40, 80, 160, 300, 300 s, each measured from the previous exit.
func TestBackoffCrashLoop(t *testing.T) {
	b := NewBackoff[containerKey](DefaultInitialBackoff, DefaultMaxBackoff)
	now := t0
	var waits []time.Duration
	for range 8 {
		finished := now // it crashed just now
		wait := b.Wait(appKey, finished, now)
		waits = append(waits, wait)
		now = now.Add(wait)
		assert.Zero(t, b.Wait(appKey, finished, now), "may restart once the wait is over")
		b.Next(appKey, finished, now)
	}
	assert.Equal(t, []time.Duration{0, 10, 20, 40, 80, 160, 300, 300}, seconds(waits))
}

func seconds(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Second
	}
	return out
}

// The sequence observed on a real kubelet with a 12 s liveness cycle
// (§11): the decision at each kill looks at the previous, already exited
// instance, so kills 1–3 restart at once and kill 4 waits 20 s, kill 5
// 40 s, kill 6 80 s.
func TestBackoffLivenessKills(t *testing.T) {
	const cycle = 12.0 // seconds from a container's start to its kill
	b := NewBackoff[containerKey](DefaultInitialBackoff, DefaultMaxBackoff)
	var prevExit *time.Time // newest exited instance before this kill
	now := at(0)
	var waits []float64
	for range 6 {
		now = now.Add(cycle * time.Second) // the running instance fails and is killed
		killedAt := now
		wait := 0.0
		if prevExit != nil {
			// Decided with the killed instance still running: measured from
			// the previous exit.
			if d := b.Wait(appKey, *prevExit, now); d > 0 {
				// In back-off: the killed instance is now the newest exited
				// one, and the start waits for the back-off from its exit.
				wait = b.Wait(appKey, killedAt, now).Seconds()
				now = now.Add(time.Duration(wait * float64(time.Second)))
				b.Next(appKey, killedAt, now)
			} else {
				b.Next(appKey, *prevExit, now)
			}
		}
		waits = append(waits, wait)
		prevExit = &killedAt
	}
	assert.Equal(t, []float64{0, 0, 0, 20, 40, 80}, waits)
}

// A container that ran 10 minutes (2× the maximum) since the last decision
// starts over at 10 s.
func TestBackoffResetsAfterTenMinutes(t *testing.T) {
	b := NewBackoff[containerKey](DefaultInitialBackoff, DefaultMaxBackoff)
	for _, s := range []float64{0, 10, 30, 70} {
		b.Next(kKey, at(s), at(s))
	}
	assert.Equal(t, 80*time.Second, b.Delay(kKey))
	assert.Equal(t, 80*time.Second, b.Wait(kKey, at(70+599), at(70+599)), "just under ten minutes: still backing off")
	assert.Zero(t, b.Wait(kKey, at(70+601), at(70+601)), "over ten minutes: expired")
	b.Next(kKey, at(70+601), at(70+601))
	assert.Equal(t, 10*time.Second, b.Delay(kKey))
	b.GC(at(70 + 601 + 600))
	assert.Equal(t, 10*time.Second, b.Delay(kKey), "kept while not expired")
	b.GC(at(70 + 601 + 601))
	assert.Zero(t, b.Delay(kKey), "dropped once expired")
}

// kubelet's setTerminationGracePeriod: a probe kill takes the probe's
// terminationGracePeriodSeconds when it sets one, smaller or larger than
// the pod's; every other kill the pod's. (The 2 s floor is applied after
// the preStop hook's time is taken off, in killContainer.)
func TestGracePeriod(t *testing.T) {
	five, big := int64(5), int64(500)
	p := testPod(corev1.RestartPolicyAlways)
	probed := &pods.Container{Name: "app", Spec: &spec.Container{Liveness: &corev1.Probe{TerminationGracePeriodSeconds: &five}, Startup: &corev1.Probe{TerminationGracePeriodSeconds: &big}}}
	plain := &pods.Container{Name: "app", Spec: &spec.Container{Liveness: &corev1.Probe{}}}
	assert.Equal(t, int64(5), gracePeriod(p, probed, CauseLiveness), "the probe's wins, even when smaller")
	assert.Equal(t, int64(500), gracePeriod(p, probed, CauseStartup), "and when larger")
	assert.Equal(t, int64(30), gracePeriod(p, plain, CauseLiveness), "the pod's")
	assert.Equal(t, int64(30), gracePeriod(p, probed, CausePodKill), "a pod kill: the pod's, whatever the probe says")
	assert.Equal(t, int64(30), gracePeriod(p, probed, CausePostStart))
	assert.Equal(t, int64(30), gracePeriod(p, &pods.Container{Name: "x"}, CauseLiveness), "no spec: the pod's")
	assert.Equal(t, int64(1), gracePeriod(p, probed, CauseEvicted), "an eviction: kubelet's immediateEvictionGracePeriodSeconds, whatever the pod says")

	// A grace period that would overflow a time.Duration is clamped: an
	// overflowed deadline is in the past and the stop would never happen.
	huge := int64(math.MaxInt64)
	hugeProbe := &pods.Container{Name: "app", Spec: &spec.Container{Liveness: &corev1.Probe{TerminationGracePeriodSeconds: &huge}}}
	assert.Equal(t, int64(maxGracePeriod), gracePeriod(p, hugeProbe, CauseLiveness))
	hugePod := &pods.Pod{Policy: spec.PodPolicy{TerminationGracePeriodSeconds: huge}}
	assert.Equal(t, int64(maxGracePeriod), gracePeriod(hugePod, plain, CausePodKill))
	assert.Positive(t, time.Duration(gracePeriod(hugePod, plain, CausePodKill))*time.Second, "no overflow")
}

// Kubelet's pull back-off (flowcontrol's IsInBackOffSinceUpdate): the wait
// is counted from the last failed pull, not from an exit, and an entry
// untouched for 2×max is gone.
func TestBackoffWaitSinceUpdate(t *testing.T) {
	b := NewBackoff[string](DefaultInitialBackoff, DefaultMaxBackoff)
	assert.Zero(t, b.WaitSinceUpdate("u1_app", at(0)), "no failure yet")
	b.Next("u1_app", at(0), at(0))
	assert.Equal(t, 10*time.Second, b.WaitSinceUpdate("u1_app", at(0)))
	assert.Equal(t, 4*time.Second, b.WaitSinceUpdate("u1_app", at(6)))
	assert.Zero(t, b.WaitSinceUpdate("u1_app", at(10)), "over at exactly 10 s")
	b.Next("u1_app", at(10), at(10))
	assert.Equal(t, 20*time.Second, b.WaitSinceUpdate("u1_app", at(10)))
	assert.Zero(t, b.WaitSinceUpdate("u2_app", at(10)), "per key")

	b.Next("u2_app", at(10), at(10))
	b.GC(at(10 + 600))
	assert.Equal(t, 20*time.Second, b.Delay("u1_app"), "2×max exactly: kept")
	b.GC(at(10 + 600.001))
	assert.Zero(t, b.Delay("u1_app"), "over 2×max: collected")
	assert.Zero(t, b.Delay("u2_app"))

	b.Next("u1_app", at(1000), at(1000))
	b.Next("u1_app", at(1010), at(1010))
	assert.Equal(t, 20*time.Second, b.Delay("u1_app"))
	b.Next("u1_app", at(1010+601), at(1010+601))
	assert.Equal(t, 10*time.Second, b.Delay("u1_app"), "a failure after 2×max starts over")
}

// kubelet collects a restart back-off 600 s after its last update
// (HandlePodCleanups → crashLoopBackOff.GC), whatever the event a
// decision is measured from. A liveness kill is decided from the exit
// before it, older than the entry: without the collection the entry
// never expires and doubles from a stale delay.
func TestBackoffCollectedTenMinutesAfterItsLastUpdate(t *testing.T) {
	b, err := NewCrashLoopBackoff[containerKey](DefaultMaxBackoff)
	require.NoError(t, err)
	b.Next(appKey, at(0), at(0))   // first exit: restarted at once, 10 s next
	b.Next(appKey, at(11), at(21)) // second exit at 11 s, restarted at 21 s: 20 s next
	require.Equal(t, 20*time.Second, b.Delay(appKey))

	// It then runs 11 minutes and is killed by its liveness probe: the
	// decision looks at the exit at 11 s.
	kill := at(21 + 660)
	assert.Zero(t, b.Wait(appKey, at(11), kill))
	b.Next(appKey, at(11), kill)
	assert.Equal(t, 10*time.Second, b.Delay(appKey), "collected: starts over, as kubelet's GC makes it")

	// Its replacement fails at once: 10 s, as under kubelet (40 s before).
	assert.Equal(t, 10*time.Second, b.Wait(appKey, kill.Add(time.Second), kill.Add(time.Second)))

	// Under 600 s since the update it is kept, whatever the event's age.
	b.Next(appKey, at(0), kill.Add(20*time.Second))
	assert.Equal(t, 20*time.Second, b.Delay(appKey))
	assert.Equal(t, 20*time.Second-time.Second, b.Wait(appKey, kill.Add(599*time.Second), kill.Add(600*time.Second)), "kept at 580 s")
}

// kubelet's crashLoopBackOff.maxContainerRestartPeriod: the initial delay
// is 10 s or the maximum if shorter, and entries expire 600 s after their
// update whatever the maximum (kubelet's HasExpiredFunc), not 2×max.
func TestCrashLoopBackoffMaximum(t *testing.T) {
	b, err := NewCrashLoopBackoff[containerKey](time.Minute)
	require.NoError(t, err)
	var delays []time.Duration
	for i := range 5 {
		b.Next(appKey, at(float64(i)), at(float64(i)))
		delays = append(delays, b.Delay(appKey))
	}
	assert.Equal(t, []time.Duration{10, 20, 40, 60, 60}, seconds(delays))
	// A crash 3 minutes (over 2×max) after the last restart still backs
	// off: 600 s is kubelet's expiry for restarts.
	assert.Equal(t, time.Minute, b.Wait(appKey, at(4+180), at(4+180)))

	short, err := NewCrashLoopBackoff[containerKey](3 * time.Second)
	require.NoError(t, err)
	short.Next(appKey, at(0), at(0))
	assert.Equal(t, 3*time.Second, short.Delay(appKey), "a maximum under 10 s is also the initial delay")

	for _, bad := range []time.Duration{0, 999 * time.Millisecond, 301 * time.Second} {
		_, err := NewCrashLoopBackoff[containerKey](bad)
		assert.ErrorContains(t, err, "want 1s to 5m0s", "kubelet's range, %s", bad)
	}
}

// Reading a back-off changes nothing: an entry expired by now counts as
// gone for Wait, WaitSinceUpdate and the plan's snapshot, and stays until
// GC, its owner's explicit step, drops it; Next then starts it over.
func TestBackoffReadsDoNotCollect(t *testing.T) {
	b, err := NewCrashLoopBackoff[containerKey](DefaultMaxBackoff)
	require.NoError(t, err)
	b.Next(appKey, at(0), at(0))
	b.Next(appKey, at(1), at(1)) // 20 s
	late := at(1 + 601)
	assert.Zero(t, b.Wait(appKey, late, late), "expired: may restart")
	assert.Zero(t, b.WaitSinceUpdate(appKey, late))
	wait, _ := readBackoff(b, &pods.Pod{Key: appKey.pod, Containers: []*pods.Container{{Name: appKey.container}}}).wait(appKey.container, late, late)
	assert.Zero(t, wait, "the snapshot agrees")
	assert.Equal(t, 20*time.Second, b.Delay(appKey), "not deleted by a read")
	b.GC(late)
	assert.Zero(t, b.Delay(appKey), "collected by GC")
	b.Next(appKey, late, late)
	assert.Equal(t, DefaultInitialBackoff, b.Delay(appKey), "started over")
}
