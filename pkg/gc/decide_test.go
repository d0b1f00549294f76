package gc

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gcContainer is kubelet's makeGCContainer: an instance of container name
// of pod podName (its UID), attempt, created created seconds after an
// hour before now.
type gcContainer struct {
	pod, name string
	attempt   uint32
	created   int
	state     cri.ContainerState
	// theirs: someone else made it (a pod the agent does not make, an
	// instance without the agent's restart-of annotation).
	theirs bool
	// byCreator: an instance of theirs after the first that its creator
	// made too (not the agent's replacement).
	byCreator bool
}

func makeGCContainer(pod, name string, attempt uint32, created int, state cri.ContainerState) gcContainer {
	return gcContainer{pod: pod, name: name, attempt: attempt, created: created, state: state}
}

func (c gcContainer) id() string { return c.pod + "/" + c.name + "#" + string(rune('0'+c.attempt)) }

// gcPods groups the instances into pods, newest first per container, as
// a view has them: pod "deleted" is an orphan (its manifest removed), pod
// "evicted" was evicted (Failed), pod "done" finished (Succeeded), a pod
// with an instance marked theirs someone else's.
func gcPods(cs []gcContainer) []*pods.Pod {
	var out []*pods.Pod
	byName := map[string]*pods.Pod{}
	for _, c := range cs {
		p, ok := byName[c.pod]
		if !ok {
			p = &pods.Pod{Key: c.pod, UID: c.pod, Namespace: "ns", Name: c.pod, Static: !c.theirs, Orphaned: c.pod == "deleted",
				Evicted: c.pod == "evicted", Phase: corev1.PodRunning}
			switch c.pod {
			case "evicted":
				p.Phase = corev1.PodFailed
			case "done":
				p.Phase = corev1.PodSucceeded
			}
			byName[c.pod] = p
			out = append(out, p)
		}
		pc, ok := p.Container(c.name)
		if !ok {
			pc = &pods.Container{Name: c.name}
			p.Containers = append(p.Containers, pc)
		}
		i := &cri.Container{ID: c.id(), SandboxID: c.pod + "-sb", Name: c.name, Attempt: c.attempt, State: c.state,
			CreatedAt: now.Add(-time.Hour + time.Duration(c.created)*time.Second)}
		if c.theirs && c.attempt > 0 && !c.byCreator {
			i.Annotations = map[string]string{cri.AnnotationRestartOf: "x"}
		}
		pc.Instances = append(pc.Instances, i)
		slices.SortStableFunc(pc.Instances, newestFirst)
		pc.Current = pc.Instances[0]
	}
	return out
}

// The behaviour of kubelet's TestContainerGC (kuberuntime_gc_test.go), row
// by row, with its policy (MinAge 1 h there: here the instances are an
// hour old, MinAge a minute), then the agent's own rows: what someone
// else made is never removed.
func TestDecideContainers(t *testing.T) {
	exited, running := cri.StateExited, cri.StateRunning
	policy := Policy{MinAge: time.Minute, MaxPerPodContainer: 2, MaxContainers: 6}
	recent := 3600 // created now
	tests := []struct {
		name       string
		containers []gcContainer
		policy     *Policy
		mode       Mode
		remain     []int
	}{
		{
			name:       "all containers should be removed when max container limit is 0",
			containers: []gcContainer{makeGCContainer("foo", "bar", 0, 0, exited)},
			policy:     &Policy{MinAge: time.Minute, MaxPerPodContainer: 1, MaxContainers: 0},
			remain:     []int{},
		},
		{
			name: "max containers should be complied when no max per pod container limit is set",
			containers: []gcContainer{makeGCContainer("foo", "bar", 4, 4, exited), makeGCContainer("foo", "bar", 3, 3, exited),
				makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited)},
			policy: &Policy{MinAge: time.Minute, MaxPerPodContainer: -1, MaxContainers: 4},
			remain: []int{0, 1, 2, 3},
		},
		{
			name: "no containers should be removed if both max container and per pod container limits are not set",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo", "bar", 0, 0, exited)},
			policy: &Policy{MinAge: time.Minute, MaxPerPodContainer: -1, MaxContainers: -1},
			remain: []int{0, 1, 2},
		},
		{
			name: "recently started containers should not be removed",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, recent, exited), makeGCContainer("foo", "bar", 1, recent, exited),
				makeGCContainer("foo", "bar", 0, recent, exited)},
			remain: []int{0, 1, 2},
		},
		{
			name: "oldest containers should be removed when per pod container limit exceeded",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo", "bar", 0, 0, exited)},
			remain: []int{0, 1},
		},
		{
			name: "running containers should not be removed",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo", "bar", 0, 0, running)},
			remain: []int{0, 1, 2},
		},
		{
			name:       "no containers should be removed when limits are not exceeded",
			containers: []gcContainer{makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited)},
			remain:     []int{0, 1},
		},
		{
			name: "max container count should apply per (UID, container) pair",
			containers: []gcContainer{
				makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited),
				makeGCContainer("foo1", "baz", 2, 2, exited), makeGCContainer("foo1", "baz", 1, 1, exited), makeGCContainer("foo1", "baz", 0, 0, exited),
				makeGCContainer("foo2", "bar", 2, 2, exited), makeGCContainer("foo2", "bar", 1, 1, exited), makeGCContainer("foo2", "bar", 0, 0, exited),
			},
			remain: []int{0, 1, 3, 4, 6, 7},
		},
		{
			name: "max limit should apply and try to keep from every pod",
			containers: []gcContainer{
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited),
				makeGCContainer("foo1", "bar1", 1, 1, exited), makeGCContainer("foo1", "bar1", 0, 0, exited),
				makeGCContainer("foo2", "bar2", 1, 1, exited), makeGCContainer("foo2", "bar2", 0, 0, exited),
				makeGCContainer("foo3", "bar3", 1, 1, exited), makeGCContainer("foo3", "bar3", 0, 0, exited),
				makeGCContainer("foo4", "bar4", 1, 1, exited), makeGCContainer("foo4", "bar4", 0, 0, exited),
			},
			remain: []int{0, 2, 4, 6, 8},
		},
		{
			name: "oldest pods should be removed if limit exceeded",
			containers: []gcContainer{
				makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo1", "bar1", 2, 2, exited), makeGCContainer("foo1", "bar1", 1, 1, exited),
				makeGCContainer("foo2", "bar2", 1, 1, exited), makeGCContainer("foo3", "bar3", 0, 0, exited),
				makeGCContainer("foo4", "bar4", 1, 1, exited), makeGCContainer("foo5", "bar5", 0, 0, exited),
				makeGCContainer("foo6", "bar6", 2, 2, exited), makeGCContainer("foo7", "bar7", 1, 1, exited),
			},
			remain: []int{0, 2, 4, 6, 8, 9},
		},
		{
			name: "containers for deleted pods should be removed (they still respect MinAge)",
			containers: []gcContainer{
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited),
				makeGCContainer("deleted", "bar1", 2, recent, exited), makeGCContainer("deleted", "bar1", 1, 1, exited),
				makeGCContainer("deleted", "bar1", 0, 0, exited),
			},
			remain: []int{0, 1, 2},
		},
		{
			name: "containers of an evicted pod should all be removed (its content may be removed; they still respect MinAge)",
			containers: []gcContainer{
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited),
				makeGCContainer("evicted", "bar1", 2, recent, exited), makeGCContainer("evicted", "bar1", 1, 1, exited),
				makeGCContainer("evicted", "bar1", 0, 0, exited),
			},
			remain: []int{0, 1, 2},
		},
		{
			name: "a terminated pod keeps its newest per container at the periodic collection (evictNonDeletedPods false)",
			containers: []gcContainer{makeGCContainer("done", "bar", 2, 2, exited), makeGCContainer("done", "bar", 1, 1, exited),
				makeGCContainer("done", "bar", 0, 0, exited)},
			remain: []int{0, 1},
		},
		{
			name: "under disk pressure (evictNonDeletedPods true) a terminated pod others made loses all the agent's dead containers",
			containers: []gcContainer{
				{pod: "done", name: "bar", attempt: 2, created: 2, state: exited, theirs: true},
				{pod: "done", name: "bar", attempt: 1, created: 1, state: exited, theirs: true},
				{pod: "done", name: "bar", attempt: 0, created: 0, state: exited, theirs: true},
			},
			mode:   AllUnused,
			remain: []int{},
		},
		{
			name: "under disk pressure a terminated static pod keeps the newest of each container: its dead instances are its only record of its phase",
			containers: []gcContainer{makeGCContainer("done", "bar", 2, 2, exited), makeGCContainer("done", "bar", 1, 1, exited),
				makeGCContainer("done", "bar", 0, 0, exited), makeGCContainer("done", "baz", 0, 0, exited)},
			policy: &DefaultPolicy,
			mode:   AllUnused,
			remain: []int{0, 3},
		},
		{
			name: "under disk pressure a pod still running keeps what the policy keeps",
			containers: []gcContainer{makeGCContainer("foo", "bar", 3, 3, running), makeGCContainer("foo", "bar", 2, 2, exited),
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited)},
			mode:   AllUnused,
			remain: []int{0, 1, 2},
		},
		{
			name: "kubelet's defaults: one dead instance kept per container, the running one aside",
			containers: []gcContainer{makeGCContainer("foo", "bar", 3, 3, running), makeGCContainer("foo", "bar", 2, 2, exited),
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited)},
			policy: &DefaultPolicy,
			remain: []int{0, 1},
		},
		{
			name: "someone else's pod, a container the agent restarted: its instances are the agent's, the creator's first one too",
			containers: []gcContainer{
				{pod: "foo", name: "bar", attempt: 3, created: 3, state: running, theirs: true},
				{pod: "foo", name: "bar", attempt: 2, created: 2, state: exited, theirs: true},
				{pod: "foo", name: "bar", attempt: 1, created: 1, state: exited, theirs: true},
				{pod: "foo", name: "bar", attempt: 0, created: 0, state: exited, theirs: true},
			},
			policy: &DefaultPolicy,
			remain: []int{0, 1},
		},
		{
			name: "someone else's pod, containers the agent never restarted: counted, never removed",
			containers: []gcContainer{
				{pod: "foo", name: "bar", attempt: 2, created: 3, state: exited, theirs: true, byCreator: true},
				{pod: "foo", name: "bar", attempt: 1, created: 2, state: exited, theirs: true, byCreator: true},
				{pod: "foo", name: "bar", attempt: 0, created: 1, state: exited, theirs: true},
			},
			policy: &DefaultPolicy,
			remain: []int{0, 1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := policy
			if tt.policy != nil {
				pol = *tt.policy
			}
			all := gcPods(tt.containers)
			d := Decide(all, now, pol, tt.mode)
			removed := map[string]bool{}
			for _, r := range d.Containers {
				removed[r.Instance.ID] = true
			}
			remain := []int{}
			for i, c := range tt.containers {
				if !removed[c.id()] {
					remain = append(remain, i)
				}
			}
			assert.Equal(t, tt.remain, remain)
			assert.Equal(t, d, Decide(all, now, pol, tt.mode), "pure")
		})
	}
}

// gcSandbox is kubelet's makeGCSandbox: a sandbox of pod (its UID) made
// created seconds after an hour before now, ready or not, with a
// container in it or not.
type gcSandbox struct {
	pod      string
	attempt  uint32
	ready    bool
	used     bool
	created  int
	orphaned bool
	// runs: its container runs (kubelet's row collects sandboxes alone;
	// here the collection removes a gone pod's dead containers first).
	runs bool
	// evicted: the pod was evicted (Failed); finished: it Succeeded.
	evicted, finished bool
}

// The behaviour of kubelet's TestSandboxGC, and the agent's scope: only a
// static pod's sandboxes are removed.
func TestDecideSandboxes(t *testing.T) {
	tests := []struct {
		name      string
		sandboxes []gcSandbox
		theirs    bool
		mode      Mode
		remain    []int
	}{
		{
			name:      "notready sandboxes without containers for deleted pods should be garbage collected",
			sandboxes: []gcSandbox{{pod: "deleted", orphaned: true}},
			remain:    []int{},
		},
		{
			name:      "ready sandboxes without containers for deleted pods should not be garbage collected",
			sandboxes: []gcSandbox{{pod: "deleted", orphaned: true, ready: true}},
			remain:    []int{0},
		},
		{
			name:      "sandboxes for existing pods should not be garbage collected",
			sandboxes: []gcSandbox{{pod: "foo", ready: true}, {pod: "foo1"}},
			remain:    []int{0, 1},
		},
		{
			name:      "older exited sandboxes without containers for existing pods should be garbage collected if there are more than one exited sandboxes",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1}, {pod: "foo", attempt: 0, created: 0}},
			remain:    []int{0},
		},
		{
			name:      "older exited sandboxes with containers for existing pods should not be garbage collected even if there are more than one exited sandboxes",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1}, {pod: "foo", attempt: 0, created: 0, used: true}},
			remain:    []int{0, 1},
		},
		{
			name:      "sandbox with containers should not be garbage collected",
			sandboxes: []gcSandbox{{pod: "deleted", orphaned: true, used: true, runs: true}},
			remain:    []int{0},
		},
		{
			name: "multiple sandboxes should be handled properly",
			sandboxes: []gcSandbox{
				{pod: "foo", attempt: 1, created: 1, ready: true}, {pod: "foo", attempt: 0, created: 0},
				{pod: "foo1", attempt: 1, created: 1, used: true}, {pod: "foo1", attempt: 0, created: 0},
				{pod: "deleted", orphaned: true},
			},
			remain: []int{0, 2},
		},
		{
			name: "a sandbox whose containers this collection removes is removed with them (kubelet lists the containers again)",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 2, created: 2, ready: true}, {pod: "foo", attempt: 1, created: 1, used: true},
				{pod: "foo", attempt: 0, created: 0, used: true}},
			remain: []int{0, 1},
		},
		{
			name:      "every dead sandbox of an evicted pod is removed, the newest too (its content may be removed)",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1, evicted: true}, {pod: "foo", attempt: 0, created: 0, evicted: true}},
			remain:    []int{},
		},
		{
			name:      "a terminated pod keeps its newest dead sandbox at the periodic collection",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1, finished: true}, {pod: "foo", attempt: 0, created: 0, finished: true}},
			remain:    []int{0},
		},
		{
			name:      "under disk pressure a terminated static pod keeps its newest sandbox (with its manifest, the runtime is its only record)",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1, finished: true}, {pod: "foo", attempt: 0, created: 0, finished: true}},
			mode:      AllUnused,
			remain:    []int{0},
		},
		{
			name:      "under disk pressure a pod not terminated keeps its newest",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1}, {pod: "foo", attempt: 0, created: 0}},
			mode:      AllUnused,
			remain:    []int{0},
		},
		{
			name:      "someone else's pod: its sandboxes are never removed",
			sandboxes: []gcSandbox{{pod: "foo", attempt: 1, created: 1}, {pod: "foo", attempt: 0, created: 0}},
			theirs:    true,
			remain:    []int{0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var all []*pods.Pod
			byName := map[string]*pods.Pod{}
			for i, s := range tt.sandboxes {
				p, ok := byName[s.pod]
				if !ok {
					p = &pods.Pod{Key: s.pod, UID: s.pod, Namespace: "ns", Name: s.pod, Static: !tt.theirs, Orphaned: s.orphaned,
						Evicted: s.evicted, Phase: corev1.PodRunning}
					switch {
					case s.evicted:
						p.Phase = corev1.PodFailed
					case s.finished:
						p.Phase = corev1.PodSucceeded
					}
					byName[s.pod] = p
					all = append(all, p)
				}
				state := cri.SandboxNotReady
				if s.ready {
					state = cri.SandboxReady
				}
				sb := &cri.Sandbox{ID: sandboxID(i), UID: s.pod, Attempt: s.attempt, State: state, CreatedAt: now.Add(-time.Hour + time.Duration(s.created)*time.Second)}
				p.Sandboxes = append(p.Sandboxes, sb)
				if s.used { // one container c across the pod's sandboxes, one dead instance in each
					if len(p.Containers) == 0 {
						p.Containers = []*pods.Container{{Name: "c"}}
					}
					c := p.Containers[0]
					state := cri.StateExited
					if s.runs {
						state = cri.StateRunning
					}
					c.Instances = append(c.Instances, &cri.Container{ID: "c" + sb.ID, SandboxID: sb.ID, State: state, CreatedAt: sb.CreatedAt})
					slices.SortStableFunc(c.Instances, newestFirst)
				}
			}
			d := Decide(all, now, DefaultPolicy, tt.mode)
			removed := map[string]bool{}
			for _, r := range d.Sandboxes {
				removed[r.Sandbox.ID] = true
			}
			remain := []int{}
			for i := range tt.sandboxes {
				if !removed[sandboxID(i)] {
					remain = append(remain, i)
				}
			}
			assert.Equal(t, tt.remain, remain)
		})
	}
}

func sandboxID(i int) string { return "sb" + string(rune('0'+i)) }

// Which pods' volumes and cgroup are torn down: static pods that finished,
// nothing of them running, their manifest still there, once.
func TestTerminated(t *testing.T) {
	pod := func(uid string, phase corev1.PodPhase, mutate ...func(*pods.Pod)) *pods.Pod {
		p := &pods.Pod{Key: uid, UID: uid, Namespace: "ns", Name: uid, Static: true, Phase: phase,
			Sandboxes:  []*cri.Sandbox{{ID: uid + "-sb", State: cri.SandboxNotReady}},
			Containers: []*pods.Container{{Name: "app", Instances: []*cri.Container{{ID: uid + "-app", State: cri.StateExited}}}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	all := []*pods.Pod{
		pod("succeeded", corev1.PodSucceeded),
		pod("failed", corev1.PodFailed),
		pod("running", corev1.PodRunning),
		pod("done-already", corev1.PodSucceeded),
		pod("orphan", corev1.PodSucceeded, func(p *pods.Pod) { p.Orphaned = true }),
		pod("theirs", corev1.PodSucceeded, func(p *pods.Pod) { p.Static = false }),
		pod("sandbox-ready", corev1.PodFailed, func(p *pods.Pod) { p.Sandboxes[0].State = cri.SandboxReady }),
		pod("sidecar-running", corev1.PodSucceeded, func(p *pods.Pod) {
			p.Containers = append(p.Containers, &pods.Container{Name: "proxy", Instances: []*cri.Container{{ID: "proxy", State: cri.StateRunning}}})
		}),
	}
	var got []string
	for _, p := range Terminated(all, map[string]bool{"done-already": true}) {
		got = append(got, p.UID)
	}
	assert.Equal(t, []string{"succeeded", "failed"}, got)
}

// The behaviour of kubelet's pod container deletor
// (TestGetContainersToDeleteInPod, pod_container_deletor_test.go): at a
// container's exit its exited instances beyond the newest keep go at
// once; running and unknown ones are never candidates, at least one dead
// instance is kept whatever the policy, and what someone else made or an
// orphan's stays for others (pod sync tears an orphan down).
func TestDeletions(t *testing.T) {
	exited, running, unknown := cri.StateExited, cri.StateRunning, cri.StateUnknown
	tests := []struct {
		name       string
		containers []gcContainer
		policy     Policy
		removed    []string
	}{
		{
			name: "the exited instances beyond the newest",
			containers: []gcContainer{makeGCContainer("foo", "bar", 3, 3, running), makeGCContainer("foo", "bar", 2, 2, exited),
				makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, exited), makeGCContainer("foo", "baz", 0, 0, exited)},
			policy:  DefaultPolicy,
			removed: []string{"foo/bar#1", "foo/bar#0"},
		},
		{
			name:       "one exited instance: nothing",
			containers: []gcContainer{makeGCContainer("foo", "bar", 1, 1, running), makeGCContainer("foo", "bar", 0, 0, exited)},
			policy:     DefaultPolicy,
		},
		{
			name:       "unknown and running instances are not candidates",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, unknown), makeGCContainer("foo", "bar", 1, 1, exited), makeGCContainer("foo", "bar", 0, 0, running)},
			policy:     DefaultPolicy,
		},
		{
			name: "at least one kept, whatever the policy (minDeadContainerInPod)",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo", "bar", 0, 0, exited)},
			policy:  Policy{MaxPerPodContainer: -1, MaxContainers: -1},
			removed: []string{"foo/bar#1", "foo/bar#0"},
		},
		{
			name: "MaxPerPodContainer above one keeps as many",
			containers: []gcContainer{makeGCContainer("foo", "bar", 2, 2, exited), makeGCContainer("foo", "bar", 1, 1, exited),
				makeGCContainer("foo", "bar", 0, 0, exited)},
			policy:  Policy{MaxPerPodContainer: 2, MaxContainers: -1},
			removed: []string{"foo/bar#0"},
		},
		{
			name: "an evicted pod's: every exited instance of every container (kubelet's removeAll)",
			containers: []gcContainer{makeGCContainer("evicted", "bar", 2, 2, exited), makeGCContainer("evicted", "bar", 1, 1, exited),
				makeGCContainer("evicted", "bar", 0, 0, exited), makeGCContainer("evicted", "baz", 0, 0, exited), makeGCContainer("evicted", "qux", 0, 0, unknown)},
			policy:  DefaultPolicy,
			removed: []string{"evicted/bar#2", "evicted/bar#1", "evicted/bar#0", "evicted/baz#0"},
		},
		{
			name:       "an orphan's are pod sync's",
			containers: []gcContainer{makeGCContainer("deleted", "bar", 1, 1, exited), makeGCContainer("deleted", "bar", 0, 0, exited)},
			policy:     DefaultPolicy,
		},
		{
			name: "someone else's container the agent restarted: its creator's instance too",
			containers: []gcContainer{{pod: "theirs", name: "bar", attempt: 2, created: 2, state: exited, theirs: true},
				{pod: "theirs", name: "bar", attempt: 1, created: 1, state: exited, theirs: true}, {pod: "theirs", name: "bar", attempt: 0, created: 0, state: exited, theirs: true}},
			policy:  DefaultPolicy,
			removed: []string{"theirs/bar#1", "theirs/bar#0"},
		},
		{
			name: "someone else's container the agent never restarted: its creator's",
			containers: []gcContainer{{pod: "theirs", name: "bar", attempt: 2, created: 2, state: exited, theirs: true, byCreator: true},
				{pod: "theirs", name: "bar", attempt: 1, created: 1, state: exited, theirs: true, byCreator: true},
				{pod: "theirs", name: "bar", attempt: 0, created: 0, state: exited, theirs: true}},
			policy: DefaultPolicy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var removed []string
			for _, r := range Deletions(gcPods(tt.containers), tt.policy) {
				removed = append(removed, r.Instance.ID)
			}
			assert.Equal(t, tt.removed, removed)
		})
	}
}

// The pod log directory goes at the collection for an evicted pod only
// (kubelet's evictPodLogsDirectories for a pod whose content may be
// removed); an orphan's goes with its teardown by pod sync.
func TestDecidePodLogs(t *testing.T) {
	all := gcPods([]gcContainer{makeGCContainer("foo", "bar", 0, 0, cri.StateExited), makeGCContainer("evicted", "bar", 0, 0, cri.StateExited),
		makeGCContainer("deleted", "bar", 0, 0, cri.StateExited), makeGCContainer("done", "bar", 0, 0, cri.StateExited)})
	for _, mode := range []Mode{Periodic, AllUnused} {
		var got []string
		for _, p := range Decide(all, now, DefaultPolicy, mode).PodLogs {
			got = append(got, p.UID)
		}
		assert.Equal(t, []string{"evicted"}, got)
	}
}
