package pods

import "time"

// Status is the pods' status as the pod sync publishes it, kubelet's
// status manager's: the runtime's view, but a pod a sync acts on shows as
// that sync found it (held) until a listing shows the outcome, and each
// pod comes with what its syncs know that the runtime does not say
// (PodStatus, For). The pods stay the runtime's picture; a reader reports
// one with both (ReportPod). Immutable, like its view.
type Status struct {
	// View is the pods as the status shows them: the runtime's view with
	// each held pod in place of the view's.
	*View
	added map[string]PodStatus
}

// NewStatus returns the status of view v: the held pods shown in place of
// v's (by key; a key v does not have is ignored), with what their syncs
// add to the pods (by key). The status of a view alone, with no pod sync,
// is NewStatus(v, nil, nil).
func NewStatus(v *View, held map[string]*Pod, added map[string]PodStatus) *Status {
	return &Status{View: v.with(held), added: added}
}

// For returns what the syncs of the pod of key add to its status (the
// zero PodStatus: nothing).
func (s *Status) For(key string) PodStatus { return s.added[key] }

// PodStatus is what a pod's syncs add to its status, which the runtime
// does not say: kubelet's reasonCache, and what its previous status keeps.
// Its maps are never changed once published.
type PodStatus struct {
	// Waiting says, by container name, why the pod sync does not start a
	// container now (kubelet's waiting reason: CrashLoopBackOff,
	// ErrImagePull…); a container not in it is held back by nothing.
	Waiting map[string]Waiting
	// Resets are, by container name, what the pod sync's last
	// RestartAllContainers reset of the pod removed, to restart every
	// container in place.
	Resets map[string]Reset
	// Initialized says the pod sync saw the pod initialized (a regular
	// container made) since the agent started: kubelet never turns a
	// pod's Initialized condition back to False (a pod restarting in
	// place, a new sandbox).
	Initialized bool
}

// waiting returns why container name waits (nil: it does not).
func (s PodStatus) waiting(name string) *Waiting {
	if w, ok := s.Waiting[name]; ok {
		return &w
	}
	return nil
}

// reset returns what a reset removed of container name (nil: none did).
func (s PodStatus) reset(name string) *Reset {
	if r, ok := s.Resets[name]; ok {
		return &r
	}
	return nil
}

// Reset is what kubelet's status keeps of a container a
// RestartAllContainers reset removed: its restart count, one more than
// before (and the removal as its last termination state, until a newer
// instance exits).
type Reset struct {
	RestartCount int32
}

// Waiting is why a container that is to start does not, and until when.
type Waiting struct {
	// Reason is kubelet's: CrashLoopBackOff, ImagePullBackOff,
	// ErrImagePull, CreateContainerConfigError, …
	Reason  string
	Message string
	// Until is when it is tried again (zero: at the next change).
	Until time.Time
}
