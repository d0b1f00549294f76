package eviction

import (
	"slices"
	"time"
)

// FsStats is what statfs says of a filesystem.
type FsStats struct {
	AvailableBytes, CapacityBytes int64
	InodesFree, Inodes            int64
}

// Observation is a signal's available amount against its capacity.
type Observation struct {
	Available, Capacity int64
}

// Observe makes the disk signals' observations of the node's
// filesystem (nodefs: --root-dir's) and the runtime's image filesystem
// (imagefs; the same figures when it is on nodefs), as kubelet's
// makeSignalObservations.
func Observe(nodefs, imagefs FsStats) map[Signal]Observation {
	return map[Signal]Observation{
		SignalNodeFsAvailable:   {nodefs.AvailableBytes, nodefs.CapacityBytes},
		SignalNodeFsInodesFree:  {nodefs.InodesFree, nodefs.Inodes},
		SignalImageFsAvailable:  {imagefs.AvailableBytes, imagefs.CapacityBytes},
		SignalImageFsInodesFree: {imagefs.InodesFree, imagefs.Inodes},
	}
}

// Met is kubelet's thresholdsMet: the thresholds whose signal is
// observed and below the threshold, in their order. A signal not
// observed (memory, PIDs: never here) is never met.
func Met(thresholds []Threshold, obs map[Signal]Observation) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok || o.Capacity <= 0 {
			continue
		}
		if t.Value(o.Capacity) > o.Available {
			out = append(out, t)
		}
	}
	return out
}

// DefaultPressureTransitionPeriod is kubelet's
// evictionPressureTransitionPeriod: a pressure condition stays true this
// long after its threshold was last met.
const DefaultPressureTransitionPeriod = 5 * time.Minute

// Pressure is the node's DiskPressure condition, kubelet's
// nodeConditionsLastObservedAt for it: a value, each Observe returning
// the next.
type Pressure struct {
	// LastObserved is when a disk threshold was last met (zero: never).
	LastObserved time.Time
	// Since is when the condition last became true (zero: false).
	Since time.Time
	// Transition is when the condition last changed, its first
	// observation included (kubelet's lastTransitionTime, set when the
	// condition is made and at each change); zero before the first.
	Transition time.Time
}

// Observe is the condition after thresholds met (Met) at now: true while
// one is met and for transition after (kubelet's
// nodeConditionsObservedSince).
func (p Pressure) Observe(met []Threshold, now time.Time, transition time.Duration) Pressure {
	was, first := p.Active(), p.Transition.IsZero()
	if len(met) > 0 {
		p.LastObserved = now
	}
	if !p.LastObserved.IsZero() && now.Sub(p.LastObserved) < transition || len(met) > 0 {
		if p.Since.IsZero() {
			p.Since = now
		}
	} else {
		p.Since = time.Time{}
	}
	if first || p.Active() != was {
		p.Transition = now
	}
	return p
}

// Active reports whether the condition is true.
func (p Pressure) Active() bool { return !p.Since.IsZero() }

// resourceInodes and resourceEphemeralStorage are the resources kubelet
// names in its EvictionThresholdMet event ("Attempting to reclaim %s").
const (
	resourceEphemeralStorage = "ephemeral-storage"
	resourceInodes           = "inodes"
)

// toReclaim is kubelet's getReclaimableThreshold over the disk signals:
// the first threshold met and the resource it reclaims.
func toReclaim(met []Threshold) (Threshold, string, bool) {
	for _, t := range met {
		switch t.Signal {
		case SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable:
			return t, resourceEphemeralStorage, true
		case SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalContainerFsInodesFree:
			return t, resourceInodes, true
		}
	}
	return Threshold{}, "", false
}

// Reclaim is what node-level garbage collection runs for a signal.
type Reclaim struct {
	Containers, Images bool
}

// reclaimFor is kubelet's buildSignalToNodeReclaimFuncs: with the images
// on nodefs, any disk pressure collects dead containers and unused
// images; with a dedicated image filesystem, imagefs pressure does and
// nodefs pressure collects nothing (kubelet leaves it to evicting pods).
func reclaimFor(signal Signal, dedicatedImageFs bool) Reclaim {
	image := slices.Contains([]Signal{SignalImageFsAvailable, SignalImageFsInodesFree, SignalContainerFsAvailable, SignalContainerFsInodesFree}, signal)
	if dedicatedImageFs && !image {
		return Reclaim{}
	}
	return Reclaim{Containers: true, Images: true}
}
