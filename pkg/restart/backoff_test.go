package restart

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Unix(1_000_000, 0)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// A container that crashes at once every time: restarts after 0, 10, 20,
// 40, 80, 160, 300, 300 s, each measured from the previous exit.
func TestBackoffCrashLoop(t *testing.T) {
	b := NewBackoff(DefaultInitialBackoff, DefaultMaxBackoff)
	now := t0
	var waits []time.Duration
	for range 8 {
		finished := now // it crashed just now
		wait := b.Wait("pod/app", finished, now)
		waits = append(waits, wait)
		now = now.Add(wait)
		assert.Zero(t, b.Wait("pod/app", finished, now), "may restart once the wait is over")
		b.Next("pod/app", finished, now)
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
	b := NewBackoff(DefaultInitialBackoff, DefaultMaxBackoff)
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
			if d := b.Wait("pod/app", *prevExit, now); d > 0 {
				// In back-off: the killed instance is now the newest exited
				// one, and the start waits for the back-off from its exit.
				wait = b.Wait("pod/app", killedAt, now).Seconds()
				now = now.Add(time.Duration(wait * float64(time.Second)))
				b.Next("pod/app", killedAt, now)
			} else {
				b.Next("pod/app", *prevExit, now)
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
	b := NewBackoff(DefaultInitialBackoff, DefaultMaxBackoff)
	for _, s := range []float64{0, 10, 30, 70} {
		b.Next("k", at(s), at(s))
	}
	assert.Equal(t, 80*time.Second, b.Delay("k"))
	assert.Equal(t, 80*time.Second, b.Wait("k", at(70+599), at(70+599)), "just under ten minutes: still backing off")
	assert.Zero(t, b.Wait("k", at(70+601), at(70+601)), "over ten minutes: expired")
	b.Next("k", at(70+601), at(70+601))
	assert.Equal(t, 10*time.Second, b.Delay("k"))
	b.Forget("k")
	assert.Zero(t, b.Delay("k"))
}

func TestRestartPolicy(t *testing.T) {
	tests := []struct {
		policy   corev1.RestartPolicy
		exitCode int32
		onExit   bool
		onKill   bool
	}{
		{corev1.RestartPolicyAlways, 0, true, true},
		{corev1.RestartPolicyAlways, 1, true, true},
		{corev1.RestartPolicyOnFailure, 0, false, true}, // kubelet restarts a killed container even if it exits 0
		{corev1.RestartPolicyOnFailure, 137, true, true},
		{corev1.RestartPolicyNever, 0, false, false},
		{corev1.RestartPolicyNever, 1, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.onExit, restartOnExit(tt.policy, tt.exitCode), "%s exit %d", tt.policy, tt.exitCode)
		assert.Equal(t, tt.onKill, restartAfterKill(tt.policy), "%s kill", tt.policy)
	}
}

func TestGracePeriod(t *testing.T) {
	five, one := int64(5), int64(1)
	assert.Equal(t, int64(30), gracePeriod(30, nil), "the pod's")
	assert.Equal(t, int64(5), gracePeriod(500, &five), "the probe's wins, even when smaller")
	assert.Equal(t, int64(500), gracePeriod(30, ptr(int64(500))), "and when larger")
	assert.Equal(t, int64(2), gracePeriod(0, nil), "never below 2 s")
	assert.Equal(t, int64(2), gracePeriod(30, &one))
}

func ptr[T any](v T) *T { return &v }
