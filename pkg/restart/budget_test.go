package restart

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// budgetAt is a budget snapshot at planNow: kills of pods at the given
// seconds before it ("uid" is the planned pod).
func budgetAt(cfg killbudget.Config, paused bool, kills map[string][]int) killbudget.Snapshot {
	s := killbudget.Snapshot{Config: cfg, Paused: paused}
	for pod, agos := range kills {
		for _, ago := range agos {
			s.Kills = append(s.Kills, killbudget.Kill{Pod: pod, At: planNow.Add(-time.Duration(ago) * time.Second)})
		}
	}
	// oldest first, as the budget keeps them
	for i := range s.Kills {
		for j := i + 1; j < len(s.Kills); j++ {
			if s.Kills[j].At.Before(s.Kills[i].At) {
				s.Kills[i], s.Kills[j] = s.Kills[j], s.Kills[i]
			}
		}
	}
	return s
}

// deferredSummary renders a plan's deferred kills for comparison.
func deferredSummary(pl plan) []string {
	var out []string
	for _, d := range pl.deferred {
		s := d.instance.ID + ": " + string(d.cause) + " " + d.reason
		if !d.until.IsZero() {
			s += " until +" + d.until.Sub(planNow).String()
		}
		out = append(out, s)
	}
	return out
}

// The restart budget and the pause in the pod sync's plan: past the
// budget (node or pod) or while paused, probe-triggered kills wait, with
// the retry when the window frees; exits keep kubelet's behaviour.
func TestMakePlanUnderKillBudget(t *testing.T) {
	always, never := corev1.RestartPolicyAlways, corev1.RestartPolicyNever
	ready := cri.SandboxReady
	node3 := killbudget.Config{Node: 3, Interval: 20 * time.Second}
	pod1 := killbudget.Config{Pod: 1, Interval: 20 * time.Second}
	live := func(name string) *pods.Container {
		return planContainer(name, spec.Regular, &spec.Container{Liveness: &corev1.Probe{}}, inst(name+"-0", "sb0", cri.StateRunning, 0, 0))
	}
	failing := func(ids ...string) fakeResults {
		r := fakeResults{}
		for _, id := range ids {
			r[results.Key{ContainerID: id, Type: results.Liveness}] = results.Failure
		}
		return r
	}
	tests := []struct {
		name     string
		pod      *pods.Pod
		results  fakeResults
		budget   killbudget.Snapshot
		mode     Mode
		want     planSummary
		deferred []string
	}{
		{
			name:    "no budget: the liveness kill and restart, as kubelet",
			pod:     planPod(true, always, sandboxes(ready), live("app")),
			results: failing("app-0"),
			want:    planSummary{kill: []string{"app-0: liveness"}, starts: []string{"app (spec, attempt 1, cause liveness)"}},
		},
		{
			name:    "node budget with room: killed, counted",
			pod:     planPod(true, always, sandboxes(ready), live("app")),
			results: failing("app-0"),
			budget:  budgetAt(node3, false, map[string][]int{"other": {5, 3}}),
			want:    planSummary{kill: []string{"app-0: liveness"}, starts: []string{"app (spec, attempt 1, cause liveness)"}},
		},
		{
			name:     "node budget spent: deferred, the retry when the oldest kill leaves the window",
			pod:      planPod(true, always, sandboxes(ready), live("app")),
			results:  failing("app-0"),
			budget:   budgetAt(node3, false, map[string][]int{"a": {5}, "b": {3}, "c": {1}}),
			want:     planSummary{retry: 15 * time.Second, waiting: []string{}},
			deferred: []string{"app-0: liveness node-budget until +15s"},
		},
		{
			name:     "one kill left, two fail: the first goes, the second waits",
			pod:      planPod(true, always, sandboxes(ready), live("a"), live("b")),
			results:  failing("a-0", "b-0"),
			budget:   budgetAt(node3, false, map[string][]int{"x": {12, 4}}),
			want:     planSummary{kill: []string{"a-0: liveness"}, starts: []string{"a (spec, attempt 1, cause liveness)"}, retry: 8 * time.Second},
			deferred: []string{"b-0: liveness node-budget until +8s"},
		},
		{
			name:    "kills older than the window do not count",
			pod:     planPod(true, always, sandboxes(ready), live("app")),
			results: failing("app-0"),
			budget:  budgetAt(node3, false, map[string][]int{"a": {40, 21, 20}}),
			want:    planSummary{kill: []string{"app-0: liveness"}, starts: []string{"app (spec, attempt 1, cause liveness)"}},
		},
		{
			name:     "pod budget spent by this pod: deferred",
			pod:      planPod(true, always, sandboxes(ready), live("app")),
			results:  failing("app-0"),
			budget:   budgetAt(pod1, false, map[string][]int{"uid": {2}}),
			want:     planSummary{retry: 18 * time.Second, waiting: []string{}},
			deferred: []string{"app-0: liveness pod-budget until +18s"},
		},
		{
			name:    "pod budget: other pods' kills do not count",
			pod:     planPod(true, always, sandboxes(ready), live("app")),
			results: failing("app-0"),
			budget:  budgetAt(pod1, false, map[string][]int{"other": {2, 1}}),
			want:    planSummary{kill: []string{"app-0: liveness"}, starts: []string{"app (spec, attempt 1, cause liveness)"}},
		},
		{
			name:     "both budgets: the node's is spent first",
			pod:      planPod(true, always, sandboxes(ready), live("app")),
			results:  failing("app-0"),
			budget:   budgetAt(killbudget.Config{Node: 2, Pod: 1, Interval: 20 * time.Second}, false, map[string][]int{"uid": {10}, "x": {4}}),
			want:     planSummary{retry: 10 * time.Second, waiting: []string{}},
			deferred: []string{"app-0: liveness node-budget until +10s"},
		},
		{
			name:     "paused: every probe kill waits, no retry (resume syncs the pod)",
			pod:      planPod(true, always, sandboxes(ready), live("app")),
			results:  failing("app-0"),
			budget:   budgetAt(killbudget.Config{}, true, nil),
			want:     planSummary{waiting: []string{}},
			deferred: []string{"app-0: liveness paused"},
		},
		{
			name: "paused: a startup failure waits too",
			pod: planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, &spec.Container{Startup: &corev1.Probe{}},
				inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			results:  fakeResults{{ContainerID: "app-0", Type: results.Startup}: results.Failure},
			budget:   budgetAt(killbudget.Config{}, true, nil),
			want:     planSummary{waiting: []string{}},
			deferred: []string{"app-0: startup paused"},
		},
		{
			name: "paused: a sidecar's liveness kill waits",
			pod: planPod(true, always, sandboxes(ready), planContainer("proxy", spec.Sidecar, &spec.Container{Liveness: &corev1.Probe{}},
				inst("proxy-0", "sb0", cri.StateRunning, 0, 0)), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			results:  failing("proxy-0"),
			budget:   budgetAt(killbudget.Config{}, true, nil),
			want:     planSummary{waiting: []string{}},
			deferred: []string{"proxy-0: liveness paused"},
		},
		{
			name: "paused and budget spent: an exit still restarts (kubelet's behaviour)",
			pod: planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil,
				inst("app-0", "sb0", cri.StateExited, 1, 10))),
			budget: budgetAt(node3, true, map[string][]int{"a": {3, 2, 1}}),
			want:   planSummary{starts: []string{"app (spec, attempt 1, cause exit)"}, waiting: []string{}},
		},
		{
			name:     "Never pod, its only container fails liveness under a spent budget: the pod runs on, not stopped",
			pod:      planPod(true, never, sandboxes(ready), live("app")),
			results:  failing("app-0"),
			budget:   budgetAt(node3, false, map[string][]int{"a": {3, 2, 1}}),
			want:     planSummary{retry: 17 * time.Second, waiting: []string{}},
			deferred: []string{"app-0: liveness node-budget until +17s"},
		},
		{
			name:    "--restart=none: told, never deferred",
			pod:     planPod(true, always, sandboxes(ready), live("app")),
			results: failing("app-0"),
			budget:  budgetAt(killbudget.Config{}, true, nil),
			mode:    Observe,
			want:    planSummary{kill: []string{"app-0: liveness"}, starts: []string{"app"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := rowInput(tt.pod, tt.results, tt.mode)
			in.budget = tt.budget
			mode := in.mode
			summary := func(pl plan) planSummary {
				got := summarizePlan(pl)
				if mode == Observe {
					got.starts = nil
					for _, c := range pl.start {
						got.starts = append(got.starts, c.Name)
					}
				}
				if got.waiting == nil && tt.want.waiting != nil {
					got.waiting = []string{}
				}
				return got
			}
			pl := makePlan(in)
			got := summary(pl)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.deferred, deferredSummary(pl))
			assert.Equal(t, len(got.kill), probeKills(&pl), "what the plan spends")
			assert.Equal(t, got, summary(makePlan(in)), "pure: the same input, the same plan")
		})
	}
}

// The plan says which deferrals to tell: a kill deferred for a reason is
// told once (planMemory.deferTold), and again when it waits for another.
func TestMakePlanTellsADeferralOncePerReason(t *testing.T) {
	node1 := killbudget.Config{Node: 1, Interval: 20 * time.Second}
	for _, tt := range []struct {
		name     string
		told     string // the reason already told for app-0 ("": none)
		budget   killbudget.Snapshot
		wantTell bool
	}{
		{"first deferral: told", "", budgetAt(node1, false, map[string][]int{"other": {5}}), true},
		{"the same reason again: not told", killbudget.DeferNode, budgetAt(node1, false, map[string][]int{"other": {5}}), false},
		{"another reason: told", killbudget.DeferNode, budgetAt(node1, true, nil), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := planContainer("app", spec.Regular, &spec.Container{Liveness: &corev1.Probe{}}, inst("app-0", "sb0", cri.StateRunning, 0, 0))
			memory := newPlanMemory()
			if tt.told != "" {
				memory.deferTold["app-0"] = tt.told
			}
			pl := makePlan(planInput{pod: planPod(true, corev1.RestartPolicyAlways, sandboxes(cri.SandboxReady), c),
				viewTime: planNow, results: fakeResults{{ContainerID: "app-0", Type: results.Liveness}: results.Failure},
				memory: memory, now: planNow, mode: Recreate, syncFrequency: DefaultSyncFrequency, budget: tt.budget})
			require.Len(t, pl.deferred, 1)
			assert.Equal(t, tt.wantTell, pl.deferred[0].tell)
		})
	}
}

// Ten pods fail their liveness at once under a node budget of three per
// 20 s: three kills are spent, seven wait until the window frees, and
// those then go (three more). Plans are made and committed as the
// executor does, on an injected clock.
func TestKillBudgetWindow(t *testing.T) {
	clk := clocktesting.NewFakeClock(planNow)
	budget, err := killbudget.New(killbudget.Config{Node: 3, Interval: 20 * time.Second}, "")
	require.NoError(t, err)
	round := func() (killed, deferred int, retry time.Duration) {
		for i := range 10 {
			c := planContainer("app", spec.Regular, &spec.Container{Liveness: &corev1.Probe{}},
				inst("app-"+itoa(int64(i)), "sb0", cri.StateRunning, 0, 0))
			p := planPod(true, corev1.RestartPolicyAlways, sandboxes(cri.SandboxReady), c)
			p.Key = "pod" + itoa(int64(i))
			res := fakeResults{{ContainerID: c.Current.ID, Type: results.Liveness}: results.Failure}
			for {
				pl := makePlan(planInput{pod: p, viewTime: clk.Now(), results: res, memory: newPlanMemory(), now: clk.Now(),
					mode: Recreate, syncFrequency: DefaultSyncFrequency, budget: budget.Snapshot()})
				if !budget.Commit(pl.budgetVersion, p.Key, probeKills(&pl), clk.Now()) {
					continue
				}
				killed += len(pl.kill)
				deferred += len(pl.deferred)
				if pl.retry > 0 {
					retry = pl.retry
				}
				break
			}
		}
		return killed, deferred, retry
	}
	killed, deferred, retry := round()
	assert.Equal(t, []int{3, 7}, []int{killed, deferred})
	assert.Equal(t, 20*time.Second, retry)
	assert.Equal(t, 3, budget.Status(clk.Now()).KillsInWindow)

	clk.Step(19 * time.Second)
	killed, deferred, retry = round()
	assert.Equal(t, []int{0, 10}, []int{killed, deferred}, "still within the window")
	assert.Equal(t, time.Second, retry)

	clk.Step(time.Second)
	killed, deferred, _ = round()
	assert.Equal(t, []int{3, 7}, []int{killed, deferred}, "the window passed: three more")
}

// The executor under a pod budget of one kill per 20 s: the first
// liveness failure kills; the replacement's failure waits (one
// KillDeferred event however many syncs, the kill shown as waiting, its
// probe to go on); once the window passed, the kill goes ahead.
func TestSyncKillDeferredThenReleased(t *testing.T) {
	st := newSyncTest(t)
	budget, err := killbudget.New(killbudget.Config{Pod: 1, Interval: 20 * time.Second}, "", killbudget.WithClock(st.clock))
	require.NoError(t, err)
	st.r.budget = budget
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular, Liveness: &corev1.Probe{}})
	sb := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	first := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	st.store.Set(results.Key{ContainerID: first, Type: results.Liveness}, results.Failure, "uid")
	sync := func() time.Duration { return st.sync(t, st.view(t, m, true)) }
	sync()
	require.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb))
	second := st.rt.Containers(sb)[1].ID
	st.store.Set(results.Key{ContainerID: second, Type: results.Liveness}, results.Failure, "uid")

	st.clock.Step(5 * time.Second)
	retry := sync()
	assert.Equal(t, 15*time.Second, retry, "synced again when the window frees")
	sync()
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb), "not killed")
	deferred := st.events.messagesOf(ReasonKillDeferred)
	require.Len(t, deferred, 1, "told once")
	assert.Contains(t, deferred[0], "Container app failed liveness probe, will be restarted, kill deferred: the pod's restart budget of 1 kill per 20s (--pod-kill-budget) is spent; it frees at ")
	assert.True(t, st.r.budget.Waits(second), "its probe goes on")
	ks := st.r.budget.Kills()
	require.Len(t, ks.Deferred, 1)
	assert.Equal(t, killbudget.DeferredKill{Namespace: "ns", Pod: "web-node", Container: "app", ContainerID: second, Probe: "Liveness", Reason: killbudget.DeferPod,
		Since: planNow.Add(5 * time.Second), Until: planNow.Add(20 * time.Second)}, ks.Deferred[0])

	st.clock.Step(15 * time.Second)
	sync()
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_EXITED", "app#2:CONTAINER_RUNNING"}, st.states(sb), "released (the dead instances left to the garbage collection)")
	assert.False(t, st.r.budget.Waits(second))
	assert.Empty(t, st.r.budget.Kills().Deferred)
}

// The executor under a pause: a liveness kill waits (told once, shown
// paused, its probe to go on); resume signals the run loop with the pods
// whose kills wait, and their next sync kills.
func TestSyncKillPausedThenResumed(t *testing.T) {
	st := newSyncTest(t)
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular, Liveness: &corev1.Probe{}})
	sb := st.rt.AddSandbox("ns", "web-node", "uid", fakeruntime.WithSandboxAnnotations(agentsAnnotations("uid")))
	id := st.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	_, err := st.r.budget.PauseKills(context.Background(), "uid 0", "maintenance")
	require.NoError(t, err)
	st.store.Set(results.Key{ContainerID: id, Type: results.Liveness}, results.Failure, "uid")

	retry := st.sync(t, st.view(t, m, true))
	st.sync(t, st.view(t, m, true))
	assert.Zero(t, retry, "no timer: a pause ends by resume")
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, st.states(sb), "not killed")
	deferred := st.events.messagesOf(ReasonKillDeferred)
	require.Len(t, deferred, 1, "told once")
	assert.Contains(t, deferred[0], "kills are paused on this node (cri-prober pause)")
	assert.True(t, st.r.budget.Waits(id))
	require.Len(t, st.r.budget.Kills().Deferred, 1)
	assert.Equal(t, killbudget.DeferPaused, st.r.budget.Kills().Deferred[0].Reason)

	_, err = st.r.budget.ResumeKills(context.Background(), "uid 0")
	require.NoError(t, err)
	select {
	case <-st.r.budget.Resumed():
	default:
		t.Fatal("resume did not signal the run loop")
	}
	assert.Equal(t, []string{"uid"}, st.r.budget.DeferredPods(), "the pods the run loop syncs again")
	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb), "killed once resumed")
	assert.False(t, st.r.budget.Waits(id))
	assert.Empty(t, st.r.budget.Kills().Deferred)
}

// messagesOf returns the messages of the events with reason.
func (r *recorded) messagesOf(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.list {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}
