package restart

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

var planNow = time.Unix(2_000_000, 0)

// planSummary renders a plan for comparison.
type planSummary struct {
	killPod       bool
	why           killReason
	teardown      bool
	createSandbox string // "attempt N"
	reset         []string
	kill          []string // instance: cause
	starts        []string // name (how, attempt, cause)
	remove        []string
	abandon       []string
	waiting       []string // name: reason
	backoffEvents []string
	retry         time.Duration
	needView      time.Duration // after planNow
}

func summarizePlan(pl plan) planSummary {
	s := planSummary{killPod: pl.killPod, why: pl.why, teardown: pl.teardown, retry: pl.retry}
	if pl.createSandbox {
		s.createSandbox = "attempt " + itoa(int64(pl.sandboxAttempt))
	}
	for _, i := range pl.reset {
		s.reset = append(s.reset, i.ID)
	}
	for _, k := range pl.kill {
		s.kill = append(s.kill, k.instance.ID+": "+string(k.cause))
	}
	for _, st := range pl.starts {
		how := "spec"
		switch {
		case st.resume != nil:
			how = "resume " + st.resume.ID
		case st.from != nil:
			how = "from " + st.from.ID
		}
		s.starts = append(s.starts, st.container.Name+" ("+how+", attempt "+itoa(st.attempt)+", cause "+string(st.cause)+")")
	}
	for _, i := range pl.remove {
		s.remove = append(s.remove, i.ID)
	}
	for _, i := range pl.abandon {
		s.abandon = append(s.abandon, i.ID)
	}
	for name, w := range pl.waiting {
		s.waiting = append(s.waiting, name+": "+w.Reason)
	}
	for _, c := range pl.backoffEvents {
		s.backoffEvents = append(s.backoffEvents, c.Name)
	}
	if !pl.needView.IsZero() {
		s.needView = pl.needView.Sub(planNow)
	}
	return s
}

func itoa(n int64) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// inst is an instance for plan rows: id, sandbox, state, exit code, the
// time it finished (seconds before planNow, for exited ones).
func inst(id, sandbox string, state cri.ContainerState, exit int32, finishedAgo int, annotations ...string) *cri.Container {
	c := &cri.Container{ID: id, SandboxID: sandbox, Name: strings.SplitN(id, "-", 2)[0], State: state, ExitCode: exit,
		Attempt: uint32(id[len(id)-1] - '0'), CreatedAt: planNow.Add(-time.Hour)}
	if state == cri.StateExited {
		c.FinishedAt = planNow.Add(-time.Duration(finishedAgo) * time.Second)
	}
	if len(annotations) > 0 {
		c.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			c.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return c
}

// planContainer is a managed container with instances, newest first.
func planContainer(name string, kind spec.Kind, sc *spec.Container, instances ...*cri.Container) *pods.Container {
	if sc == nil {
		sc = &spec.Container{}
	}
	sc.Name, sc.Kind = name, kind
	c := &pods.Container{Name: name, Kind: kind, Spec: sc, Managed: true, Instances: instances}
	if len(instances) > 0 {
		c.Current = instances[0]
	}
	return c
}

func sandboxes(states ...cri.SandboxState) []*cri.Sandbox {
	var out []*cri.Sandbox
	for i, st := range states {
		out = append(out, &cri.Sandbox{ID: "sb" + itoa(int64(i)), State: st, Attempt: uint32(i), IPs: []string{"10.0.0.1"},
			CreatedAt: planNow.Add(-time.Hour + time.Duration(i)*time.Minute)})
	}
	return out
}

func planPod(owned bool, policy corev1.RestartPolicy, sbs []*cri.Sandbox, containers ...*pods.Container) *pods.Pod {
	p := &pods.Pod{Key: "uid", Namespace: "ns", Name: "web", UID: "uid", Static: owned, Sandboxes: sbs,
		Policy: spec.PodPolicy{RestartPolicy: policy, TerminationGracePeriodSeconds: 30}, Containers: containers,
		Manifest: &spec.Pod{Object: &corev1.Pod{}}}
	for _, sb := range sbs {
		if p.Sandbox == nil || sb.State == cri.SandboxReady {
			p.Sandbox = sb
		}
	}
	return p
}

// rowInput is the plan input of a table row at planNow: mode Recreate
// unless given, no results unless given, an empty memory and back-off,
// kubelet's syncFrequency.
func rowInput(pod *pods.Pod, res fakeResults, mode Mode) planInput {
	if mode == "" {
		mode = Recreate
	}
	if res == nil {
		res = fakeResults{}
	}
	return planInput{pod: pod, viewTime: planNow, results: res, memory: newPlanMemory(), now: planNow, mode: mode,
		syncFrequency: DefaultSyncFrequency}
}

// Every decision of a sync, from the pod's view, the probes' results, the
// back-off state and the time: kubelet's computePodActions and what its
// SyncPod decides while carrying them out (new sandbox, RestartAll,
// back-off, attempts), and what is left to a pod's creator.
func TestMakePlan(t *testing.T) {
	ready, notReady := cri.SandboxReady, cri.SandboxNotReady
	always, never, onFailure := corev1.RestartPolicyAlways, corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure
	restartAll := &spec.Container{RestartPolicy: ptrTo(corev1.ContainerRestartPolicyNever), RestartPolicyRules: []corev1.ContainerRestartRule{{
		Action: corev1.ContainerRestartRuleActionRestartAllContainers, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}
	tests := []struct {
		name    string
		pod     *pods.Pod
		results fakeResults
		// backoff is the restart back-off of the pod's containers, by
		// name (expiring as kubelet's, 600 s after the last update).
		backoff map[string]backoffEntry
		memory  func(*planMemory)
		mode    Mode
		// jitter and syncFrequency place the retry after a back-off
		// (default: none, and kubelet's minute).
		jitter        float64
		syncFrequency time.Duration
		want          planSummary
		// keepsWaiting: the plan decides no starts, so the reasons shown
		// stay as the sync before left them (kubelet's reasonCache).
		keepsWaiting bool
	}{
		{
			name: "owned, no sandbox yet: one is made (attempt 0), then the first init container",
			pod: planPod(true, always, nil, planContainer("setup", spec.Init, nil), planContainer("proxy", spec.Sidecar, nil),
				planContainer("app", spec.Regular, nil)),
			want: planSummary{killPod: true, why: killSandboxChanged, createSandbox: "attempt 0", starts: []string{"setup (spec, attempt -1, cause )"}},
		},
		{
			name: "owned, no sandbox, no init containers: every container",
			pod:  planPod(true, always, nil, planContainer("app", spec.Regular, nil), planContainer("log", spec.Regular, nil)),
			want: planSummary{killPod: true, why: killSandboxChanged, createSandbox: "attempt 0",
				starts: []string{"app (spec, attempt -1, cause )", "log (spec, attempt -1, cause )"}},
		},
		{
			name: "owned, its sandbox died: a new one (attempt+1), every container again, its restart count kept",
			pod: planPod(true, always, sandboxes(notReady), planContainer("app", spec.Regular, nil,
				inst("app-0", "sb0", cri.StateExited, 137, 100, "io.kubernetes.container.restartCount", "4"))),
			want: planSummary{killPod: true, why: killSandboxChanged, createSandbox: "attempt 1", starts: []string{"app (spec, attempt 5, cause exit)"}},
		},
		{
			name: "owned Never pod whose sandbox died after it ran: no new sandbox",
			pod:  planPod(true, never, sandboxes(notReady), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 1, 100))),
			want: planSummary{},
		},
		{
			name: "owned OnFailure pod whose containers succeeded: no new sandbox",
			pod:  planPod(true, onFailure, sandboxes(notReady), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 0, 100))),
			want: planSummary{},
		},
		{
			name: "owned, two ready sandboxes: killed and made anew",
			pod:  planPod(true, always, sandboxes(ready, ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb1", cri.StateRunning, 0, 0))),
			want: planSummary{killPod: true, why: killSandboxChanged, createSandbox: "attempt 2", starts: []string{"app (spec, attempt 1, cause exit)"}},
		},
		{
			name: "owned, an instance created before the agent was stopped: started, never doubled",
			pod:  planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateCreated, 0, 0))),
			want: planSummary{starts: []string{"app (resume app-0, attempt 0, cause exit)"}},
		},
		{
			name: "owned, the next init container after one completed",
			pod: planPod(true, always, sandboxes(ready), planContainer("a", spec.Init, nil, inst("a-0", "sb0", cri.StateExited, 0, 1)),
				planContainer("b", spec.Init, nil), planContainer("app", spec.Regular, nil)),
			want: planSummary{starts: []string{"b (spec, attempt -1, cause )"}},
		},
		{
			name: "owned, a sidecar started but not past its startup probe: nothing after it starts",
			pod: planPod(true, always, sandboxes(ready), planContainer("proxy", spec.Sidecar, &spec.Container{Startup: &corev1.Probe{}},
				inst("proxy-0", "sb0", cri.StateRunning, 0, 0)), planContainer("app", spec.Regular, nil)),
			results: fakeResults{{ContainerID: "proxy-0", Type: results.Startup}: results.Failure + 1}, // neither: unknown
			want:    planSummary{},
		},
		{
			name: "owned, the sidecar started: the app container",
			pod: planPod(true, always, sandboxes(ready), planContainer("proxy", spec.Sidecar, &spec.Container{Startup: &corev1.Probe{}},
				inst("proxy-0", "sb0", cri.StateRunning, 0, 0)), planContainer("app", spec.Regular, nil)),
			results: fakeResults{{ContainerID: "proxy-0", Type: results.Startup}: results.Success},
			want:    planSummary{starts: []string{"app (spec, attempt -1, cause )"}},
		},
		{
			name: "owned, a RestartAllContainers exit: every instance removed, sources last",
			pod: planPod(true, never, sandboxes(ready), planContainer("setup", spec.Init, nil, inst("setup-0", "sb0", cri.StateExited, 0, 50)),
				planContainer("app", spec.Regular, restartAll, inst("app-0", "sb0", cri.StateExited, 42, 1)),
				planContainer("log", spec.Regular, nil, inst("log-0", "sb0", cri.StateRunning, 0, 0))),
			want:         planSummary{reset: []string{"log-0", "setup-0", "app-0"}},
			keepsWaiting: true,
		},
		{
			name: "a pod someone else made: RestartAllContainers restarts the container alone",
			pod: planPod(false, never, sandboxes(ready), planContainer("app", spec.Regular, restartAll, inst("app-0", "sb0", cri.StateExited, 42, 1)),
				planContainer("log", spec.Regular, nil, inst("log-0", "sb0", cri.StateRunning, 0, 0))),
			want: planSummary{starts: []string{"app (from app-0, attempt 1, cause exit)"}},
		},
		{
			name: "an orphan (its manifest removed): killed and torn down",
			pod: func() *pods.Pod {
				p := planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateRunning, 0, 0)))
				p.Orphaned = true
				return p
			}(),
			want:         planSummary{killPod: true, why: killRemoved, teardown: true},
			keepsWaiting: true,
		},
		{
			name: "an orphan whose sandboxes are gone: what it left on the host removed",
			pod: func() *pods.Pod {
				p := planPod(true, always, nil)
				p.Orphaned = true
				return p
			}(),
			want:         planSummary{why: killRemoved, teardown: true},
			keepsWaiting: true,
		},
		{
			name: "past its active deadline: killed, nothing restarted",
			pod: func() *pods.Pod {
				p := planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 1, 100)))
				p.Reason, p.Phase = pods.ReasonDeadlineExceeded, corev1.PodFailed
				return p
			}(),
			want:         planSummary{killPod: true, why: killDeadline},
			keepsWaiting: true,
		},
		{
			name: "evicted: killed with the eviction's grace period, nothing restarted",
			pod: func() *pods.Pod {
				p := planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateRunning, 0, 0)))
				p.Reason, p.Phase = pods.ReasonEvicted, corev1.PodFailed
				return p
			}(),
			want:         planSummary{killPod: true, why: killEvicted},
			keepsWaiting: true,
		},
		{
			name: "evicted and stopped already: nothing",
			pod: func() *pods.Pod {
				p := planPod(true, always, sandboxes(notReady), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 137, 100)))
				p.Reason, p.Phase = pods.ReasonEvicted, corev1.PodFailed
				return p
			}(),
			want:         planSummary{why: killEvicted},
			keepsWaiting: true,
		},
		{
			name: "owned and completed, stopped already: nothing",
			pod: func() *pods.Pod {
				p := planPod(true, never, sandboxes(notReady), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 0, 100)))
				p.Phase = corev1.PodSucceeded
				return p
			}(),
			want:         planSummary{why: killCompleted},
			keepsWaiting: true,
		},
		{
			name: "someone else's pod, a container never created: left to its creator",
			pod:  planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil)),
			want: planSummary{},
		},
		{
			name: "someone else's pod, a container its creator created: left to it",
			pod:  planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-1", "sb0", cri.StateCreated, 0, 0))),
			want: planSummary{},
		},
		{
			name: "someone else's pod, a replacement the agent created while the old instance runs again: removed",
			pod: planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil,
				inst("app-1", "sb0", cri.StateCreated, 0, 0, cri.AnnotationRestartOf, "app-0"), inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			want: planSummary{abandon: []string{"app-1"}},
		},
		{
			name: "someone else's pod, a replacement the agent created before it was stopped: started",
			pod: planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil,
				inst("app-1", "sb0", cri.StateCreated, 0, 0, cri.AnnotationRestartOf, "app-0", cri.AnnotationRestartCause, "liveness"),
				inst("app-0", "sb0", cri.StateExited, 137, 5))),
			want: planSummary{starts: []string{"app (resume app-1, attempt 1, cause liveness)"}},
		},
		{
			// Anyone who creates containers can write the annotation: a
			// cause the agent does not write is unknown, not a 200 KB
			// metrics label and ledger entry.
			name: "someone else's pod, a replacement whose cause is not one the agent writes: started, cause unknown",
			pod: planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil,
				inst("app-1", "sb0", cri.StateCreated, 0, 0, cri.AnnotationRestartOf, "app-0", cri.AnnotationRestartCause, strings.Repeat("x", 200<<10)),
				inst("app-0", "sb0", cri.StateExited, 137, 5))),
			want: planSummary{starts: []string{"app (resume app-1, attempt 1, cause unknown)"}},
		},
		{
			name: "someone else's pod, an exit seen at once: waits for a listing after the settle time",
			pod:  planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 1, 0))),
			want: planSummary{retry: exitSettle, needView: exitSettle, waiting: nil},
		},
		{
			// Someone stopping its sandbox kills its containers first: not
			// restarted into the sandbox that is going (e2e: a pod stopped
			// behind the agent's back got a start that failed, counted for
			// its back-off, before its new sandbox).
			name: "an owned pod, an exit seen at once: waits for a listing after the settle time too",
			pod:  planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 1, 0))),
			want: planSummary{retry: exitSettle, needView: exitSettle, waiting: nil},
		},
		{
			name: "an exit the agent caused (its kill): no settle time",
			pod:  planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 137, 0))),
			memory: func(m *planMemory) {
				m.killed["app-0"] = true
			},
			want: planSummary{starts: []string{"app (from app-0, attempt 1, cause exit)"}},
		},
		{
			name: "a liveness failure: killed and restarted at once, the dead instances left to the garbage collection",
			pod: planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, &spec.Container{Liveness: &corev1.Probe{}},
				inst("app-2", "sb0", cri.StateRunning, 0, 0), inst("app-1", "sb0", cri.StateExited, 1, 300), inst("app-0", "sb0", cri.StateExited, 1, 400))),
			results: fakeResults{{ContainerID: "app-2", Type: results.Liveness}: results.Failure},
			want:    planSummary{kill: []string{"app-2: liveness"}, starts: []string{"app (from app-2, attempt 3, cause liveness)"}},
		},
		{
			name:    "in CrashLoopBackOff: waits, reported once, looked at again after the back-off (at most a minute ahead)",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-3", "sb0", cri.StateExited, 1, 10))),
			backoff: map[string]backoffEntry{"app": {delay: 160 * time.Second, lastUpdate: planNow.Add(-10 * time.Second)}},
			want:    planSummary{waiting: []string{"app: CrashLoopBackOff"}, backoffEvents: []string{"app"}, retry: time.Minute},
		},
		{
			// kubelet's completeWork: min(expiry, resync interval), jittered
			// ×[1, 1.5]. A 300 s back-off with 290 s left is looked at again
			// within 90 s, not up to 435 s later; the back-off's last minute
			// is looked at once more at its expiry, jittered by half of
			// what is left.
			name:    "in a 300 s back-off with the worst jitter: looked at again within 1.5 minutes, not 1.5× the wait",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-7", "sb0", cri.StateExited, 1, 10))),
			backoff: map[string]backoffEntry{"app": {delay: 300 * time.Second, lastUpdate: planNow.Add(-10 * time.Second)}},
			memory:  func(m *planMemory) { m.reported["app-7"] = true },
			jitter:  1,
			want:    planSummary{waiting: []string{"app: CrashLoopBackOff"}, retry: 90 * time.Second},
		},
		{
			name:    "the back-off's last 20 s with the worst jitter: looked at again 30 s later, within 10 s of its expiry",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-7", "sb0", cri.StateExited, 1, 280))),
			backoff: map[string]backoffEntry{"app": {delay: 300 * time.Second, lastUpdate: planNow.Add(-280 * time.Second)}},
			memory:  func(m *planMemory) { m.reported["app-7"] = true },
			jitter:  1,
			want:    planSummary{waiting: []string{"app: CrashLoopBackOff"}, retry: 30 * time.Second},
		},
		{
			name:          "kubelet's syncFrequency set shorter (4 s): a 20 s back-off is looked at again within 6 s",
			pod:           planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-5", "sb0", cri.StateExited, 1, 1))),
			backoff:       map[string]backoffEntry{"app": {delay: 20 * time.Second, lastUpdate: planNow.Add(-time.Second)}},
			memory:        func(m *planMemory) { m.reported["app-5"] = true },
			jitter:        1,
			syncFrequency: 4 * time.Second,
			want:          planSummary{waiting: []string{"app: CrashLoopBackOff"}, retry: 6 * time.Second},
		},
		{
			name:    "in CrashLoopBackOff, already reported: no second event",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, nil, inst("app-3", "sb0", cri.StateExited, 1, 2))),
			backoff: map[string]backoffEntry{"app": {delay: 10 * time.Second, lastUpdate: planNow.Add(-20 * time.Second)}},
			memory:  func(m *planMemory) { m.reported["app-3"] = true },
			want:    planSummary{waiting: []string{"app: CrashLoopBackOff"}, retry: 8 * time.Second},
		},
		{
			name: "--restart=stop: kills, starts nothing",
			pod: planPod(false, always, sandboxes(ready), planContainer("app", spec.Regular, &spec.Container{Liveness: &corev1.Probe{}},
				inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			results:      fakeResults{{ContainerID: "app-0", Type: results.Liveness}: results.Failure},
			mode:         StopOnly,
			want:         planSummary{kill: []string{"app-0: liveness"}},
			keepsWaiting: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memory := newPlanMemory()
			if tt.memory != nil {
				tt.memory(&memory)
			}
			in := rowInput(tt.pod, tt.results, tt.mode)
			in.backoff, in.memory, in.jitter = backoffSnapshot{expiry: crashLoopExpiry, entries: tt.backoff}, memory, tt.jitter
			if tt.syncFrequency != 0 {
				in.syncFrequency = tt.syncFrequency
			}
			pl := makePlan(in)
			got := summarizePlan(pl)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.keepsWaiting, pl.waiting == nil, "a plan that decides no starts leaves the waiting reasons as they were")
			assert.Equal(t, got, summarizePlan(makePlan(in)), "pure: the same input, the same plan")
		})
	}
}

// What the plan decides for the executor beyond kubelet's podActions,
// which the executor only carries out: whether each kill's container
// starts again (its ledger entry waits for the replacement, or is a stop
// at once), the instances removed (with a new sandbox, every init
// container's: kubelet's purgeInitContainers), and whether the pod
// initialized (its status keeps the Initialized condition).
func TestMakePlanDecidesForTheExecutor(t *testing.T) {
	ready, notReady := cri.SandboxReady, cri.SandboxNotReady
	always, never := corev1.RestartPolicyAlways, corev1.RestartPolicyNever
	live := &spec.Container{Liveness: &corev1.Probe{}}
	type decided struct {
		restarts    []string // killed instances whose container starts again
		remove      []string
		initialized bool
	}
	tests := []struct {
		name    string
		pod     *pods.Pod
		results fakeResults
		mode    Mode
		want    decided
	}{
		{
			name:    "a liveness kill under Always: the container starts again",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, live, inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			results: fakeResults{{ContainerID: "app-0", Type: results.Liveness}: results.Failure},
			want:    decided{restarts: []string{"app-0"}, initialized: true},
		},
		{
			name: "a liveness kill under Never while another container runs: stopped for good",
			pod: planPod(true, never, sandboxes(ready), planContainer("app", spec.Regular, live, inst("app-0", "sb0", cri.StateRunning, 0, 0)),
				planContainer("log", spec.Regular, nil, inst("log-0", "sb0", cri.StateRunning, 0, 0))),
			results: fakeResults{{ContainerID: "app-0", Type: results.Liveness}: results.Failure},
			want:    decided{initialized: true},
		},
		{
			name:    "--restart=stop: a kill never restarts",
			pod:     planPod(true, always, sandboxes(ready), planContainer("app", spec.Regular, live, inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			results: fakeResults{{ContainerID: "app-0", Type: results.Liveness}: results.Failure},
			mode:    StopOnly,
			want:    decided{initialized: true},
		},
		{
			name: "a new sandbox: every init container's instances removed, to run again",
			pod: planPod(true, always, sandboxes(notReady), planContainer("setup", spec.Init, nil, inst("setup-1", "sb0", cri.StateExited, 0, 100),
				inst("setup-0", "sb0", cri.StateExited, 1, 200)), planContainer("proxy", spec.Sidecar, nil, inst("proxy-0", "sb0", cri.StateExited, 0, 100)),
				planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 137, 100))),
			want: decided{remove: []string{"setup-1", "setup-0", "proxy-0"}, initialized: true},
		},
		{
			// kubelet's TestPruneInitContainers: of each init container the
			// newest dead instance (exited or unknown) is kept.
			name: "init containers pruned at sync: the newest dead instance of each kept (pruneInitContainersBeforeStart)",
			pod: planPod(true, always, sandboxes(ready),
				planContainer("init1", spec.Init, nil, inst("init1-3", "sb0", cri.StateExited, 0, 30), inst("init1-2", "sb0", cri.StateExited, 0, 20),
					inst("init1-1", "sb0", cri.StateUnknown, 0, 0), inst("init1-0", "sb0", cri.StateExited, 0, 10)),
				planContainer("init2", spec.Init, nil, inst("init2-1", "sb0", cri.StateExited, 0, 30), inst("init2-0", "sb0", cri.StateExited, 0, 10)),
				planContainer("app", spec.Regular, nil, inst("app-1", "sb0", cri.StateRunning, 0, 0), inst("app-0", "sb0", cri.StateExited, 1, 100))),
			want: decided{remove: []string{"init1-2", "init1-1", "init1-0", "init2-0"}, initialized: true},
		},
		{
			name: "a running sidecar's dead instances: the newest kept, a regular container's left to the garbage collection",
			pod: planPod(true, always, sandboxes(ready),
				planContainer("proxy", spec.Sidecar, nil, inst("proxy-2", "sb0", cri.StateRunning, 0, 0), inst("proxy-1", "sb0", cri.StateExited, 1, 30),
					inst("proxy-0", "sb0", cri.StateExited, 1, 60)),
				planContainer("app", spec.Regular, nil, inst("app-2", "sb0", cri.StateRunning, 0, 0), inst("app-1", "sb0", cri.StateExited, 1, 100),
					inst("app-0", "sb0", cri.StateExited, 1, 200))),
			want: decided{remove: []string{"proxy-0"}, initialized: true},
		},
		{
			name: "someone else's pod whose init container the agent restarted: its dead instances are the agent's to prune",
			pod: planPod(false, always, sandboxes(ready),
				planContainer("setup", spec.Init, nil, inst("setup-2", "sb0", cri.StateExited, 0, 10, cri.AnnotationRestartOf, "setup-1"),
					inst("setup-1", "sb0", cri.StateExited, 1, 20, cri.AnnotationRestartOf, "setup-0"), inst("setup-0", "sb0", cri.StateExited, 1, 30)),
				planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			want: decided{remove: []string{"setup-1", "setup-0"}, initialized: true},
		},
		{
			name: "someone else's pod, an init container the agent never restarted: its creator's instances stay",
			pod: planPod(false, always, sandboxes(ready),
				planContainer("setup", spec.Init, nil, inst("setup-1", "sb0", cri.StateExited, 0, 20), inst("setup-0", "sb0", cri.StateExited, 1, 30)),
				planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateRunning, 0, 0))),
			want: decided{initialized: true},
		},
		{
			name: "--restart=stop and a dead sandbox: no new sandbox, nothing purged",
			pod: planPod(true, always, sandboxes(notReady), planContainer("setup", spec.Init, nil, inst("setup-0", "sb0", cri.StateExited, 0, 100)),
				planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 137, 100))),
			mode: StopOnly,
			want: decided{initialized: true},
		},
		{
			name: "its init containers still run, no regular container made: not initialized",
			pod: planPod(true, always, sandboxes(ready), planContainer("setup", spec.Init, nil, inst("setup-0", "sb0", cri.StateRunning, 0, 0)),
				planContainer("app", spec.Regular, nil)),
			want: decided{},
		},
		{
			name: "someone else's stopped pod, a regular container made: initialized though nothing is planned",
			pod: planPod(false, always, sandboxes(notReady), planContainer("setup", spec.Init, nil),
				planContainer("app", spec.Regular, nil, inst("app-0", "sb0", cri.StateExited, 0, 100))),
			want: decided{initialized: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := rowInput(tt.pod, tt.results, tt.mode)
			summary := func(pl plan) decided {
				d := decided{initialized: pl.initialized}
				for _, k := range pl.kill {
					if k.restarts {
						d.restarts = append(d.restarts, k.instance.ID)
					}
				}
				for _, i := range pl.remove {
					d.remove = append(d.remove, i.ID)
				}
				return d
			}
			got := summary(makePlan(in))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, summary(makePlan(in)), "pure: the same input, the same plan")
		})
	}
}
