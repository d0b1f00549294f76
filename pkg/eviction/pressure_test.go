package eviction

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubelet's thresholdsMet over the disk signals: a threshold is met when
// what is available is below it; memory is never observed here.
func TestMet(t *testing.T) {
	th, err := ParseThresholds(DefaultEvictionHard)
	require.NoError(t, err)
	signals := func(met []Threshold) []Signal {
		var s []Signal
		for _, t := range met {
			s = append(s, t.Signal)
		}
		return s
	}
	roomy := FsStats{AvailableBytes: 50, CapacityBytes: 100, InodesFree: 50, Inodes: 100}
	assert.Empty(t, Met(th, Observe(roomy, roomy)))

	full := FsStats{AvailableBytes: 9, CapacityBytes: 100, InodesFree: 50, Inodes: 100}
	assert.Equal(t, []Signal{SignalImageFsAvailable, SignalNodeFsAvailable}, signals(Met(th, Observe(full, full))), "the images on nodefs: both")

	images := FsStats{AvailableBytes: 14, CapacityBytes: 100, InodesFree: 4, Inodes: 100}
	assert.Equal(t, []Signal{SignalImageFsAvailable, SignalImageFsInodesFree}, signals(Met(th, Observe(roomy, images))), "a dedicated image filesystem")
	assert.Empty(t, Met(th, Observe(FsStats{}, FsStats{})), "nothing known: nothing met")
}

// kubelet's nodeConditionsObservedSince: DiskPressure is true while a
// threshold is met and for the transition period after.
func TestPressure(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	met := []Threshold{{Signal: SignalNodeFsAvailable, Percentage: 0.1}}
	var p Pressure
	assert.True(t, p.Transition.IsZero(), "not observed yet")
	p = p.Observe(nil, t0, time.Minute)
	assert.False(t, p.Active())
	assert.Equal(t, t0, p.Transition, "kubelet sets lastTransitionTime when it makes the condition, false too")
	p = p.Observe(nil, t0.Add(5*time.Second), time.Minute)
	assert.Equal(t, t0, p.Transition, "unchanged")
	p = p.Observe(met, t0.Add(10*time.Second), time.Minute)
	assert.True(t, p.Active())
	assert.Equal(t, t0.Add(10*time.Second), p.Since)
	assert.Equal(t, t0.Add(10*time.Second), p.Transition)
	p = p.Observe(nil, t0.Add(60*time.Second), time.Minute)
	assert.True(t, p.Active(), "within the transition period")
	assert.Equal(t, t0.Add(10*time.Second), p.Since, "since it became true")
	p = p.Observe(nil, t0.Add(70*time.Second), time.Minute)
	assert.False(t, p.Active())
	assert.Equal(t, t0.Add(70*time.Second), p.Transition, "when it became false")
}

// kubelet's getReclaimableThreshold and buildSignalToNodeReclaimFuncs.
func TestReclaim(t *testing.T) {
	_, res, ok := toReclaim([]Threshold{{Signal: SignalNodeFsInodesFree}})
	assert.True(t, ok)
	assert.Equal(t, "inodes", res)
	_, res, _ = toReclaim([]Threshold{{Signal: SignalImageFsAvailable}})
	assert.Equal(t, "ephemeral-storage", res)
	_, _, ok = toReclaim([]Threshold{{Signal: SignalMemoryAvailable}})
	assert.False(t, ok)

	assert.Equal(t, Reclaim{Containers: true, Images: true}, reclaimFor(SignalNodeFsAvailable, false), "images on nodefs")
	assert.Equal(t, Reclaim{}, reclaimFor(SignalNodeFsAvailable, true), "a dedicated imagefs: nothing reclaims nodefs")
	assert.Equal(t, Reclaim{Containers: true, Images: true}, reclaimFor(SignalImageFsAvailable, true))
}
