package restart

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// planMemory is what a pod's plans remember of the syncs before: the
// plan reads it, the executor writes it as the plan's outputs say.
type planMemory struct {
	// killed are the instances the agent killed, by ID: their exit is not
	// one of their own (no settle time before the restart).
	killed map[string]bool
	// reported are the exits whose back-off was reported (one BackOff
	// event per exit, not one per sync).
	reported map[string]bool
	// deferTold are the kills whose deferral was told, with the reason
	// told (once per reason).
	deferTold map[string]string
}

// podState is what a pod's worker remembers between its syncs: the plan's
// memory, and the executor's bookkeeping, which no plan reads. Owned by
// the worker's goroutine.
type podState struct {
	memory planMemory
	// told are the actions --restart=none told (once each).
	told map[string]bool
	// pending are the ledger entries of kills whose restart waits, by the
	// killed instance's ID: recorded when the replacement starts.
	pending map[string]ledger.Entry
	// failed says why the last attempt to start a container failed, by
	// name (kubelet's reasonCache: ErrImagePull, CreateContainerConfigError
	// …), until it starts.
	failed map[string]pods.Waiting
	// lastActed is the number of relists started when the last sync that
	// acted on the runtime ended: the next plan needs a view of a later
	// listing (kubelet's pod cache GetNewerThan), so that it never acts
	// twice on one state of the runtime.
	lastActed uint64
}

func newPodState() *podState {
	return &podState{memory: newPlanMemory(), told: map[string]bool{}, pending: map[string]ledger.Entry{}, failed: map[string]pods.Waiting{}}
}

func newPlanMemory() planMemory {
	return planMemory{killed: map[string]bool{}, reported: map[string]bool{}, deferTold: map[string]string{}}
}

// prune drops what the state keeps about instances the pod no longer has
// and failures of containers it no longer lists.
func (s *podState) prune(p *pods.Pod) {
	live := map[string]bool{}
	for _, sb := range p.Sandboxes {
		live[sb.ID] = true
	}
	names := map[string]bool{}
	for _, c := range p.Containers {
		names[c.Name] = true
		for _, i := range c.Instances {
			live[i.ID] = true
		}
	}
	for _, m := range []map[string]bool{s.memory.killed, s.memory.reported, s.told} {
		for id := range m {
			if !live[id] {
				delete(m, id)
			}
		}
	}
	for id := range s.pending {
		if !live[id] {
			delete(s.pending, id)
		}
	}
	for id := range s.memory.deferTold {
		if !live[id] {
			delete(s.memory.deferTold, id)
		}
	}
	for name := range s.failed {
		if !names[name] {
			delete(s.failed, name)
		}
	}
}

// planInput is everything one sync of a pod decides from: values, read
// once, so that the same input always gives the same plan.
type planInput struct {
	pod *pods.Pod
	// viewTime is when the relist the pod comes from started.
	viewTime time.Time
	// results are the probes' results of the pod's current instances.
	results podResults
	// backoff is the restart back-off of the pod's containers.
	backoff backoffSnapshot
	memory  planMemory
	now     time.Time
	mode    Mode
	// syncFrequency caps the wait before the retry after a back-off, and
	// jitter, in [0, 1), places that retry in kubelet's window (its pod
	// worker's requeue, jittered by up to half).
	syncFrequency time.Duration
	jitter        float64
	// budget is the node's restart budget and pause, as the sync found
	// them: probe-triggered kills past it wait (deferred).
	budget killbudget.Snapshot
}

// plan is what one sync of a pod does: kubelet's podActions, and every
// decision kubelet's SyncPod takes while carrying them out (back-off,
// which instance each start comes from and with what attempt), so that
// the executor only calls the runtime.
type plan struct {
	podActions
	// why says why the pod is killed (with killPod).
	why killReason
	// teardown: after the pod is killed, its sandboxes, containers, files
	// and logs are removed (an orphan: its manifest is gone).
	teardown bool
	// starts are the containers to start now, in order: init containers,
	// then regular ones. A regular init container that cannot start ends
	// the list (the next ones wait for it).
	starts []startAction
	// remove are instances no longer needed, removed with their logs
	// before the sandbox is made and anything started: the dead instances
	// of each init container but the newest (kubelet keeps it, for its
	// logs and exit: pruneInitContainersBeforeStart), or with a new
	// sandbox every init container's (purgeInitContainers: the new sandbox
	// runs them again). A regular container's dead instances are left to
	// the container garbage collection (pkg/gc), as kubelet leaves them.
	remove []*cri.Container
	// initialized: a regular container of the pod has an instance, so the
	// pod initialized (its init containers done) before it was made; its
	// status then keeps kubelet's Initialized condition.
	initialized bool
	// abandon are replacements created by an interrupted restart of a
	// container that runs again: removed, never started beside it.
	abandon []*cri.Container
	// waiting says why a container that is to start does not start now;
	// nil when the plan decides no starts (the pod is killed, done or
	// reset), which leaves the reasons shown as they were: kubelet's
	// reasonCache changes only with the starts a sync tries, so a pod
	// killed at its deadline still shows CrashLoopBackOff.
	waiting map[string]pods.Waiting
	// backoffEvents are the back-offs to report (once per exit).
	backoffEvents []*pods.Container
	// retry is when to sync again although nothing changes (0: never).
	retry time.Duration
	// needView: the decision waits for a view of the runtime listed at or
	// after this time (an exit's settle time).
	needView time.Time
	// deferred are the probe-triggered kills that wait for the restart
	// budget or a pause: their containers run on, their probes go on, and
	// the plan is made again at the retry (when the budget frees) or on
	// resume; a kill then goes ahead if its probe still fails.
	deferred []deferredKill
	// budgetVersion is the version of the budget the plan was made from:
	// its kills are spent only if it is unchanged (else a new plan).
	budgetVersion uint64
}

// deferredKill is a kill the plan defers, and why.
type deferredKill struct {
	containerToKill
	killDecision
	// tell: the deferral is told (a KillDeferred event), once per reason
	// (podState.deferTold).
	tell bool
}

// killReason is why a whole pod is killed.
type killReason int

const (
	// killNothingLeft: no container is left running or to be restarted.
	killNothingLeft killReason = iota
	// killSandboxChanged: its sandbox is gone or changed; a new one is made.
	killSandboxChanged
	// killRemoved: its manifest is gone.
	killRemoved
	// killDeadline: it was active longer than its activeDeadlineSeconds.
	killDeadline
	// killCompleted: it completed and something of it still runs.
	killCompleted
	// killEvicted: it was evicted (past its local storage limits).
	killEvicted
)

// empty reports whether the plan does nothing to the runtime.
func (pl *plan) empty() bool {
	return !pl.killPod && !pl.createSandbox && len(pl.reset) == 0 && len(pl.kill) == 0 && len(pl.starts) == 0 &&
		len(pl.remove) == 0 && len(pl.abandon) == 0 && !pl.teardown
}

// startAction is one container to start, and how.
type startAction struct {
	container *pods.Container
	// cause is why it starts (a first start of a static pod: CauseFirstStart).
	cause Cause
	// resume is an instance created but not started (the agent's, after an
	// interruption): it is started, nothing is created.
	resume *cri.Container
	// from is the instance whose CRI config a container someone else made
	// is re-created from; nil for a static pod (made from its spec).
	from *cri.Container
	// replaces is the instance the new one replaces (the ledger's), nil
	// for a first start.
	replaces *cri.Container
	// attempt is the new instance's (kubelet's restart count for a static
	// pod); -1: not known from the view, found from the log directory.
	attempt int64
	// backoffFrom is the exit the back-off is measured from (zero: none):
	// the executor counts the restart against it.
	backoffFrom time.Time
}

// exitSettle is how long after an exit the agent waits before restarting
// the container, and then checks that its sandbox is still ready: someone
// stopping the pod (crictl stopp) kills its containers first and its
// sandbox a moment later, and must not find them restarted into it (a pod
// the agent makes gets a new sandbox instead, with no back-off counted
// against a start that could not work). kubelet sees exits only at its
// 1 s relist, so this is still sooner.
const exitSettle = 250 * time.Millisecond

// DefaultSyncFrequency is kubelet's syncFrequency, its pod workers'
// resync interval: a pod waiting out a back-off is synced again at the
// back-off's expiry but never more than this ahead, then jittered by up
// to half (completeWork), so a long back-off ends within half of this of
// its expiry, not half of the back-off.
const DefaultSyncFrequency = time.Minute

// makePlan decides one sync of a pod. It is pure: the same input always
// gives the same plan.
func makePlan(in planInput) plan {
	p := in.pod
	pl := plan{initialized: regularMade(p)}
	switch {
	case !p.Managed() && !p.Static, p.ManifestInvalid:
		return pl
	case p.Orphaned:
		pl.killPod, pl.teardown, pl.why = anythingRunning(p), true, killRemoved
		return pl
	case p.Reason == pods.ReasonDeadlineExceeded:
		// kubelet's active deadline: the pod is killed and never started
		// again.
		pl.killPod, pl.why = anythingRunning(p), killDeadline
		return pl
	case p.Reason == pods.ReasonEvicted:
		// kubelet's eviction: the pod is killed with the eviction's grace
		// period and never started again (a static pod stays Failed until
		// its manifest changes, which makes it another pod).
		pl.killPod, pl.why = anythingRunning(p), killEvicted
		return pl
	case p.Static && terminal(p):
		// kubelet's pod worker stops syncing a pod that completed: what
		// runs is stopped and nothing starts again.
		pl.killPod, pl.why = anythingRunning(p), killCompleted
		return pl
	case !p.Static && !p.SandboxReady():
		// Nothing is started into a stopped pod someone else made: its
		// containers show how they ended, not why they would wait.
		pl.waiting = map[string]pods.Waiting{}
		return pl
	}
	pl.podActions = computePodActions(p, in.results)
	pl.budgetVersion = in.budget.Version
	if in.mode != Observe {
		deferBudgeted(in, &pl)
	}
	if pl.createSandbox {
		pl.why = killSandboxChanged
	}
	if pl.killPod && !pl.createSandbox && !anythingRunning(p) {
		pl.killPod = false // already stopped
	}
	if in.mode == Observe {
		return pl
	}
	if pl.killPod && !pl.createSandbox {
		pl.startInit, pl.start = nil, nil
		return pl
	}
	if in.mode == StopOnly {
		pl.startInit, pl.start, pl.createSandbox = nil, nil, false
		for i := range pl.kill {
			pl.kill[i].restarts = false
		}
		return pl
	}
	if len(pl.reset) > 0 {
		return pl
	}
	pl.waiting = map[string]pods.Waiting{}
	killedNow := map[string]bool{}
	for _, k := range pl.kill {
		killedNow[k.instance.ID] = true
	}
	for i, c := range append(slices.Clip(pl.startInit), pl.start...) {
		s, ok := decideStart(in, &pl, c, killedNow)
		if ok {
			pl.starts = append(pl.starts, s)
			continue
		}
		if i < len(pl.startInit) && c.Kind == spec.Init {
			break // the next init containers wait for this one
		}
	}
	if pl.createSandbox {
		pl.remove = initInstances(p)
	} else {
		pl.remove = oldInitInstances(p)
	}
	return pl
}

// initInstances are every instance of the pod's init containers: a new
// sandbox runs them again (kubelet's purgeInitContainers).
func initInstances(p *pods.Pod) []*cri.Container {
	var out []*cri.Container
	for _, c := range p.Containers {
		if c.Kind.IsInit() {
			out = append(out, c.Instances...)
		}
	}
	return out
}

// regularMade reports whether a regular container of p has an instance:
// the pod initialized (its init containers done) before it was made.
func regularMade(p *pods.Pod) bool {
	for _, c := range p.Containers {
		if c.Kind == spec.Regular && len(c.Instances) > 0 {
			return true
		}
	}
	return false
}

// decideStart decides how container c starts now, or why it does not (in
// pl.waiting, with when to look again): kubelet's start() in SyncPod with
// its doBackOff, and for a pod someone else made, what is left to its
// creator.
func decideStart(in planInput, pl *plan, c *pods.Container, killedNow map[string]bool) (startAction, bool) {
	p := in.pod
	cur := c.Current
	s := startAction{container: c, cause: CauseFirstStart}
	if cur != nil {
		s.replaces, s.cause = cur, CauseExit
		if killedNow[cur.ID] {
			s.cause = killCause(pl.kill, cur.ID)
		} else if cur.State == cri.StateUnknown {
			s.cause = CauseUnknown
		}
	}
	if cur != nil && cur.State == cri.StateCreated && !pl.createSandbox {
		// Created, never started. A static pod's is the agent's (it was
		// stopped between the create and the start): started, never
		// doubled. Someone else's is theirs unless the agent made it to
		// replace another.
		switch {
		case !p.MadeByAgent(cur):
			return s, false // its creator will start it
		case !p.Static && slices.ContainsFunc(c.Instances, func(i *cri.Container) bool { return i.State == cri.StateRunning }):
			pl.abandon = append(pl.abandon, cur)
			return s, false
		}
		s.resume, s.replaces, s.attempt = cur, nil, int64(cur.Attempt)
		if cause := cur.Annotations[cri.AnnotationRestartCause]; cause != "" {
			s.cause = causeFromAnnotation(cause)
		}
		return s, true
	}
	if p.Static {
		s.attempt = nextAttempt(c)
	} else {
		if cur == nil {
			return s, false // never created: its creator makes it
		}
		s.from = cur
		s.attempt = int64(maxAttempt(c, p.Sandbox.ID) + 1)
	}
	last := lastExit(c)
	if last == nil {
		return s, true
	}
	finished := last.FinishedAt
	if finished.IsZero() {
		finished = in.viewTime // the runtime did not say: from when it was seen
	}
	if last == cur && !in.memory.killed[last.ID] && !pl.createSandbox {
		if settled := finished.Add(exitSettle); in.viewTime.Before(settled) {
			pl.needView = later(pl.needView, settled)
			pl.retry = sooner(pl.retry, max(settled.Sub(in.now), time.Millisecond))
			return s, false
		}
	}
	if wait, delay := in.backoff.wait(c.Name, finished, in.now); wait > 0 {
		pl.waiting[c.Name] = pods.Waiting{Reason: WaitingCrashLoop, Until: finished.Add(delay),
			Message: "back-off " + delay.String() + " restarting failed container=" + c.Name + " pod=" + p.Name + "_" + p.Namespace + "(" + p.UID + ")"}
		if !in.memory.reported[last.ID] {
			pl.backoffEvents = append(pl.backoffEvents, c)
		}
		pl.retry = sooner(pl.retry, time.Duration(float64(min(wait, in.syncFrequency))*(1+backoffRetryJitter*in.jitter)))
		return s, false
	}
	s.backoffFrom = finished
	return s, true
}

// deferBudgeted defers the plan's probe-triggered kills that the budget
// or a pause holds back: the pod's actions are decided again as if their
// probes had not failed (the container runs on, keeps its pod alive and
// is not started again), and the plan is made again when the budget
// frees.
func deferBudgeted(in planInput, pl *plan) {
	decisions := deferKills(in.budget, in.pod.Key, in.now, pl.kill)
	ids := map[string]bool{}
	var deferred []deferredKill
	for i, d := range decisions {
		if d == nil {
			continue
		}
		id := pl.kill[i].instance.ID
		ids[id] = true
		deferred = append(deferred, deferredKill{containerToKill: pl.kill[i], killDecision: *d, tell: in.memory.deferTold[id] != d.reason})
		if !d.until.IsZero() {
			pl.retry = sooner(pl.retry, max(d.until.Sub(in.now), time.Millisecond))
		}
	}
	if len(deferred) == 0 {
		return
	}
	pl.podActions = computePodActions(in.pod, withheld(in.results, ids))
	pl.deferred = deferred
}

// podResults are the probes' results of a pod's current instances, read
// once for a plan: a result landing meanwhile waits for the next plan.
type podResults map[results.Key]results.Result

func (r podResults) Get(k results.Key) (results.Result, bool) {
	v, ok := r[k]
	return v, ok
}

// readResults reads the results of p's current instances from store.
func readResults(store resultReader, p *pods.Pod) podResults {
	out := podResults{}
	for _, c := range p.Containers {
		if c.Current == nil {
			continue
		}
		for _, t := range []results.ProbeType{results.Liveness, results.Readiness, results.Startup} {
			k := results.Key{ContainerID: c.Current.ID, Type: t}
			if r, ok := store.Get(k); ok {
				out[k] = r
			}
		}
	}
	return out
}

// readBackoff reads the restart back-off of p's containers.
func readBackoff(b *Backoff[containerKey], p *pods.Pod) backoffSnapshot {
	keys := map[string]containerKey{}
	for _, c := range p.Containers {
		keys[c.Name] = containerKey{p.Key, c.Name}
	}
	return b.snapshot(keys)
}

// killCause is the cause of the kill of instance id in kills.
func killCause(kills []containerToKill, id string) Cause {
	for _, k := range kills {
		if k.instance.ID == id {
			return k.cause
		}
	}
	return CauseExit
}

// lastExit is the instance the back-off is measured from: the newest that
// has exited, as kubelet's doBackOff reads it from the status the sync
// began with (so not one this sync kills: the first probe kills restart
// at once, as on kubelet).
func lastExit(c *pods.Container) *cri.Container {
	for _, i := range c.Instances {
		if i.State == cri.StateExited {
			return i
		}
	}
	return nil
}

// nextAttempt is the attempt of a static pod's container's next instance:
// kubelet's restart count, one more than the newest instance's (the count
// its annotations carry, kept across sandboxes); -1 with no instance, for
// the executor to find from the log directory as kubelet does.
func nextAttempt(c *pods.Container) int64 {
	if c.Current == nil {
		return -1
	}
	return int64(c.RestartCount()) + 1
}

// maxAttempt is the highest attempt among the instances of c in sandbox
// (attempts name containers: the next one must be new).
func maxAttempt(c *pods.Container, sandbox string) uint32 {
	var n uint32
	for _, i := range c.Instances {
		if i.SandboxID == sandbox {
			n = max(n, i.Attempt)
		}
	}
	return n
}

// oldInitInstances are kubelet's pruneInitContainersBeforeStart, at
// every sync that goes on to start containers: of each init container
// (sidecars among them), every dead instance (exited, or in an unknown
// state) but the newest, which is kept for its logs and exit. Only
// instances the agent keeps are removed (Pod.Collectable).
func oldInitInstances(p *pods.Pod) []*cri.Container {
	var out []*cri.Container
	for _, c := range p.Containers {
		if !c.Kind.IsInit() {
			continue
		}
		kept := false
		for _, i := range c.Instances { // newest first
			if i.State != cri.StateExited && i.State != cri.StateUnknown {
				continue
			}
			if !kept {
				kept = true
				continue
			}
			if p.Collectable(c, i) {
				out = append(out, i)
			}
		}
	}
	return out
}

// terminal reports whether a static pod completed: kubelet stops syncing
// it then.
func terminal(p *pods.Pod) bool {
	return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
}

// anythingRunning reports whether some container of the pod runs or its
// sandbox is ready: a kill of the pod has something to do.
func anythingRunning(p *pods.Pod) bool {
	return p.SandboxReady() || slices.ContainsFunc(p.Containers, (*pods.Container).Running)
}

func sooner(a, b time.Duration) time.Duration {
	if a == 0 {
		return b
	}
	return min(a, b)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
