package restart

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// heldStatus over one held pod (app's instance "old" running and ready,
// as the sync that kills it found it) and what the newest view shows of
// it meanwhile: kubelet's status manager keeps the sync's starting status
// (old running and ready until the sync ends); --not-ready-on-exit shows
// old's exit as it happens. The replacement shows in neither before the
// sync's outcome is listed.
func TestHeldStatus(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	appSpec := &spec.Container{Name: "app", Readiness: &corev1.Probe{}}
	inst := func(id string, state cri.ContainerState, attempt uint32, at time.Duration) *cri.Container {
		c := &cri.Container{ID: id, Name: "app", Attempt: attempt, State: state, StartedAt: t0.Add(at)}
		if state == cri.StateExited {
			c.FinishedAt, c.ExitCode = t0.Add(at+10*time.Second), 137
		}
		return c
	}
	pod := func(instances ...*cri.Container) *pods.Pod {
		c := &pods.Container{Name: "app", Kind: spec.Regular, Spec: appSpec, Managed: true, Instances: instances}
		if len(instances) > 0 {
			c.Current = instances[0]
		}
		return &pods.Pod{Key: "uid-web", Namespace: "ns", Name: "web", UID: "uid-web", Containers: []*pods.Container{c},
			Sandbox: &cri.Sandbox{ID: "sb", State: cri.SandboxReady}, Phase: corev1.PodRunning}
	}
	held := pod(inst("old", cri.StateRunning, 0, 0))
	store := results.NewStore()
	for _, id := range []string{"old", "new"} {
		store.Set(results.Key{ContainerID: id, Type: results.Readiness}, results.Success, "uid-web")
	}
	for _, tt := range []struct {
		name           string
		latest         *pods.Pod
		notReadyOnExit bool
		// what the status shows of app: its current instance, its state,
		// and the pod's Ready condition.
		wantID    string
		wantState cri.ContainerState
		wantReady bool
	}{
		{"kubelet's: old still runs", pod(inst("old", cri.StateRunning, 0, 0)), false, "old", cri.StateRunning, true},
		{"kubelet's: old exited", pod(inst("old", cri.StateExited, 0, 0)), false, "old", cri.StateRunning, true},
		{"kubelet's: old exited, the replacement runs its postStart", pod(inst("new", cri.StateRunning, 1, 11*time.Second), inst("old", cri.StateExited, 0, 0)), false, "old", cri.StateRunning, true},
		{"kubelet's: the pod not listed", nil, false, "old", cri.StateRunning, true},
		{"not ready on exit: old still runs", pod(inst("old", cri.StateRunning, 0, 0)), true, "old", cri.StateRunning, true},
		{"not ready on exit: old exited", pod(inst("old", cri.StateExited, 0, 0)), true, "old", cri.StateExited, false},
		{"not ready on exit: old exited, the replacement runs its postStart", pod(inst("new", cri.StateRunning, 1, 11*time.Second), inst("old", cri.StateExited, 0, 0)), true, "old", cri.StateExited, false},
		{"not ready on exit: old's fate unknown", pod(inst("old", cri.StateUnknown, 0, 0)), true, "old", cri.StateRunning, true},
		{"not ready on exit: the pod not listed", nil, true, "old", cri.StateRunning, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			shown := heldStatus(held, tt.latest, tt.notReadyOnExit)
			c, ok := shown.Container("app")
			if assert.True(t, ok) && assert.NotNil(t, c.Current) {
				assert.Equal(t, tt.wantID, c.Current.ID)
				assert.Equal(t, tt.wantState, c.Current.State)
				assert.Equal(t, []string{"old"}, instanceIDs(c), "what the sync made shows only once listed after it")
			}
			assert.Equal(t, tt.wantReady, pods.ReportPod(shown, pods.PodStatus{}, store, pods.GateSet{}).Ready)
			assert.Equal(t, cri.StateRunning, held.Containers[0].Current.State, "the held pod is never changed")
		})
	}
}

func instanceIDs(c *pods.Container) []string {
	var out []string
	for _, i := range c.Instances {
		out = append(out, i.ID)
	}
	return out
}

// Contract (kubelet v1.36.3's SyncPod and status manager): a liveness kill,
// the replacement's start and its postStart (4 s here) run in one sync, and
// the status the prober, the API and /ready read is the one the sync began
// with: the killed instance running and ready from its exit until the
// replacement is listed after the sync, then the replacement not ready
// until its readiness probe passes. On the real kubelet, with the same
// pod: Ready in every sample from the exit to the end of the replacement's
// postStart. --not-ready-on-exit: not ready from the exit.
func TestReadinessThroughAProbeKillReplacement(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		// whether the pod is ready while the replacement's postStart runs,
		// and how the killed instance shows then.
		wantReady bool
		wantState cri.ContainerState
	}{
		{"kubelet's", nil, true, cri.StateRunning},
		{"not ready on exit", []Option{withConfig(Config{NotReadyOnExit: true})}, false, cri.StateExited},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newSyncTest(t, tt.opts...)
			st.r.relister = &syncRelister{st: st} // the sync's outcome shows from the test's next listing
			m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app",
				Readiness: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1},
				Lifecycle: &corev1.Lifecycle{PostStart: hook("postStart", "call")}})
			sb := st.theirSandbox()
			old := st.rt.AddContainer(sb, "app", running)
			st.sync(t, st.view(t, m, false))
			st.store.Set(results.Key{ContainerID: old, Type: results.Readiness}, results.Success, "uid")
			ready := func() bool {
				s := st.r.Status()
				p, ok := s.Pod("uid")
				return ok && pods.ReportPod(p, s.For(p.Key), st.store, pods.GateSet{}).Ready
			}
			require.True(t, ready(), "ready")

			var replacement string
			exit := st.clock.Now()
			st.hooks.during = func(target lifecycle.Target) {
				replacement = target.ContainerID
				// Sampled every second of the 4 s postStart, each time on a
				// listing that shows the exit and the replacement.
				for at := time.Duration(0); at < 4*time.Second; at += time.Second {
					v := st.list(t, pods.Inputs{Manifests: []*spec.Pod{m}})
					st.publish(v)
					require.Equal(t, v.Seq, st.r.Status().Seq, "the listing published")
					assert.Equal(t, tt.wantReady, ready(), "ready at exit+%s", st.clock.Since(exit))
					if c := currentOf(st.r, "uid", "app"); assert.NotNil(t, c) {
						assert.Equal(t, old, c.ID, "the killed instance shown until the sync's outcome is listed")
						assert.Equal(t, tt.wantState, c.State)
					}
					st.clock.Step(time.Second)
				}
			}
			st.fail(old, results.Liveness)
			st.sync(t, st.view(t, m, false)) // postStart over when it returns
			require.Len(t, st.hooks.called(), 1, "the replacement's postStart ran")
			if c := currentOf(st.r, "uid", "app"); assert.NotNil(t, c) {
				assert.Equal(t, old, c.ID, "the killed instance shown until a listing after the sync")
			}
			st.publish(st.list(t, pods.Inputs{Manifests: []*spec.Pod{m}}))
			if c := currentOf(st.r, "uid", "app"); assert.NotNil(t, c) {
				assert.Equal(t, replacement, c.ID, "the replacement shown once listed after the sync")
			}
			assert.False(t, ready(), "the replacement not ready before its readiness probe passes")
			st.store.Set(results.Key{ContainerID: replacement, Type: results.Readiness}, results.Success, "uid")
			assert.True(t, ready())
		})
	}
}

// syncRelister numbers the test's listings, as the poller numbers its
// relists; a sync's asking for one (Trigger) lists at once with onTrigger,
// else the listing comes when the test lists.
type syncRelister struct {
	st        *syncTest
	onTrigger func()
}

func (l *syncRelister) Trigger() {
	if l.onTrigger != nil {
		l.onTrigger()
	}
}

func (l *syncRelister) Relists() uint64 { return l.st.seq }

// A pod a sync acted on is released by the first listing after its
// actions even when that listing was handed on before the sync released
// the pod: the status shows the replacement without waiting for one more
// listing (with none coming, it showed the killed instance running).
func TestSyncReleaseAfterTheListingItWaitsFor(t *testing.T) {
	st := newSyncTest(t)
	m := theirPod(corev1.RestartPolicyAlways, spec.Container{Name: "app"})
	sb := st.theirSandbox()
	id := st.rt.AddContainer(sb, "app", running)
	// The listing the sync asks for is handed on before the sync goes on:
	// the order a worker preempted between asking and releasing sees.
	st.r.relister = &syncRelister{st: st, onTrigger: func() { st.publish(st.list(t, pods.Inputs{Manifests: []*spec.Pod{m}})) }}
	st.fail(id, results.Liveness)
	st.sync(t, st.view(t, m, false))
	require.Equal(t, []string{"app#0:CONTAINER_EXITED", "app#1:CONTAINER_RUNNING"}, st.states(sb))
	c := currentOf(st.r, "uid", "app")
	if assert.NotNil(t, c) {
		assert.Equal(t, uint32(1), c.Attempt, "the replacement shown, as the listing after the sync shows it")
		assert.Equal(t, cri.StateRunning, c.State)
	}
}

// withConfig applies cfg as New does, after the test harness's options.
func withConfig(cfg Config) Option { return func(r *Restarter) error { return r.configure(cfg) } }
