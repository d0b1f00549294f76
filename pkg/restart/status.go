package restart

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// statusManager keeps and publishes the pods' status (pods.Status), as
// kubelet's status manager does beside its pod workers: the runtime's
// view, but for a pod a sync acts on, the pod as that sync found it until
// the runtime shows the outcome (hold, release), and what the pod's syncs
// know that the runtime does not say (setWaiting, setResets,
// setInitialized). The pod workers write it; the prober, the API and the
// hooks read what it publishes.
type statusManager struct {
	// notReadyOnExit: a pod held by a sync shows its instances' exits
	// (heldStatus).
	notReadyOnExit bool
	// listed returns the newest view of the runtime, published to the pod
	// sync or not (nil before the first): what a change of what the syncs
	// add, and a release the view already shows, is published with.
	listed func() *pods.View

	mu    sync.Mutex
	held  map[string]*heldPod       // pod key → its status while a sync acts
	added map[string]pods.PodStatus // pod key → what its syncs add to its status

	status    atomic.Pointer[pods.Status]
	publisher pods.Publisher
}

// init readies m to publish, with listed as the newest view of the
// runtime; until the first view the status is empty.
func (m *statusManager) init(listed func() *pods.View) {
	m.listed = listed
	m.held = map[string]*heldPod{}
	m.added = map[string]pods.PodStatus{}
	m.status.Store(pods.NewStatus(pods.Resolve(nil, pods.Inputs{}), nil, nil))
}

// heldPod is a pod's status while a sync acts on it, and after, until the
// runtime is listed again (relist number after).
type heldPod struct {
	pod   *pods.Pod
	after uint64 // 0: the sync still acts
}

// heldStatus is what pod held (as a sync found it) shows while the sync
// acts, given latest, the pod in the newest view of the runtime (nil: not
// in it). By default, kubelet's: held as it is, so an instance the sync
// kills stays running and ready until the sync's outcome is listed (its
// replacement started, postStart over). With notReadyOnExit, each instance
// held running that latest shows exited is shown exited, as latest shows
// it: not ready from its exit; what the sync made meanwhile (the
// replacement) still shows only once listed after the sync. Pure.
func heldStatus(held, latest *pods.Pod, notReadyOnExit bool) *pods.Pod {
	if !notReadyOnExit || latest == nil {
		return held
	}
	exits := map[string]*cri.Container{}
	for _, c := range latest.Containers {
		for _, i := range c.Instances {
			if i.State == cri.StateExited {
				exits[i.ID] = i
			}
		}
	}
	var shown *pods.Pod
	for n, c := range held.Containers {
		if c.Current == nil || c.Current.State != cri.StateRunning {
			continue
		}
		exit, ok := exits[c.Current.ID]
		if !ok {
			continue
		}
		if shown == nil {
			cp := *held
			cp.Containers = slices.Clone(held.Containers)
			shown = &cp
		}
		cc := *c
		cc.Current = exit
		cc.Instances = slices.Clone(c.Instances)
		for k, i := range cc.Instances {
			if i.ID == exit.ID {
				cc.Instances[k] = exit
			}
		}
		shown.Containers[n] = &cc
	}
	if shown == nil {
		return held
	}
	return shown
}

// publishStatus publishes the pods' status for a new view of the runtime:
// a pod held by a sync keeps its held status (and a hold whose outcome
// this view shows is released), any other is the view's.
func (m *statusManager) publishStatus(v *pods.View, changed []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, key := range changed {
		_, held := m.held[key]
		if _, ok := v.Pod(key); !ok {
			delete(m.held, key) // gone: nothing to hold
			held = false
		}
		if !held || m.notReadyOnExit {
			// A held pod changes with the view only when it shows exits.
			out = append(out, key)
		}
	}
	for key, h := range m.held {
		if h.after != 0 && v.Seq > h.after {
			delete(m.held, key)
			out = append(out, key)
		}
	}
	if len(changed) == 0 && len(out) == 0 && m.status.Load().Seq == v.Seq {
		return
	}
	m.publishLocked(v, out)
}

// publishLocked builds the status from view v and publishes it, naming
// the pods that changed.
func (m *statusManager) publishLocked(v *pods.View, changed []string) {
	held := make(map[string]*pods.Pod, len(m.held))
	for key, h := range m.held {
		latest, _ := v.Pod(key)
		held[key] = heldStatus(h.pod, latest, m.notReadyOnExit)
	}
	status := pods.NewStatus(v, held, maps.Clone(m.added))
	m.status.Store(status)
	m.publisher.PublishStatus(status, changed)
}

// update changes what the pod's syncs add to its status and, when that
// changed, publishes it.
func (m *statusManager) update(key string, update func(*pods.PodStatus) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	added := m.added[key]
	if !update(&added) {
		return
	}
	m.added[key] = added
	if v := m.listed(); v != nil {
		m.publishLocked(v, []string{key})
	}
}

// forget drops what is kept of a gone pod's status.
func (m *statusManager) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.added, key)
	delete(m.held, key)
}

// hold keeps pod p's status as it is while a sync acts on it.
func (m *statusManager) hold(p *pods.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.held[p.Key]; ok {
		h.after = 0 // still held from the previous sync: as it was then
		return
	}
	m.held[p.Key] = &heldPod{pod: p}
}

// release lets pod p's status follow the runtime again from the first
// listing numbered after relist. That listing may be out already (the
// listing the sync asked for, handed on before the sync got here): then
// the status follows it now, as no later listing may come soon.
func (m *statusManager) release(key string, relist uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.held[key]
	if !ok {
		return
	}
	h.after = relist
	if v := m.listed(); v != nil && v.Seq > relist {
		delete(m.held, key)
		m.publishLocked(v, []string{key})
	}
}

// setWaiting publishes why the pod's containers wait, when it changed.
func (m *statusManager) setWaiting(key string, waiting map[string]pods.Waiting) {
	m.update(key, func(s *pods.PodStatus) bool {
		if maps.Equal(s.Waiting, waiting) {
			return false
		}
		s.Waiting = waiting
		return true
	})
}

// addedTo returns what the pod's syncs add to its status.
func (m *statusManager) addedTo(key string) pods.PodStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.added[key]
}

// resetsOf returns what the last reset of the pod removed.
func (m *statusManager) resetsOf(key string) map[string]pods.Reset {
	return m.addedTo(key).Resets
}

// setResets publishes what a RestartAllContainers reset of the pod
// removed.
func (m *statusManager) setResets(key string, resets map[string]pods.Reset) {
	m.update(key, func(s *pods.PodStatus) bool { s.Resets = resets; return true })
}

// setInitialized publishes that the pod initialized, once.
func (m *statusManager) setInitialized(key string) {
	m.update(key, func(s *pods.PodStatus) bool {
		if s.Initialized {
			return false
		}
		s.Initialized = true
		return true
	})
}
