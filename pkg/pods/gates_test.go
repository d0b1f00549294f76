package pods

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// kubelet 1.36's GeneratePodReadyCondition over the conditions set with
// `cri-prober gate set`, row by row: "pod shape, declared gates, conditions
// set → Ready, with kubelet's reason and message".
func TestReadinessGates(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	const lb, warm = corev1.PodConditionType("example.com/lb"), corev1.PodConditionType("example.com/warm")
	running := func() *Container { return pcont("app", spec.Regular, inst("a1", cri.StateRunning, 10, 0)) }
	exited := func() *Container { return pcont("app", spec.Regular, inst("a1", cri.StateExited, 10, 0)) }
	gated := func(policy corev1.RestartPolicy, c *Container, gates ...corev1.PodConditionType) *Pod {
		p := podOf(policy, c)
		p.Manifest = &spec.Pod{Containers: []spec.Container{{Name: "app"}}, Object: &corev1.Pod{}}
		for _, g := range gates {
			p.Manifest.Object.Spec.ReadinessGates = append(p.Manifest.Object.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
		}
		return p
	}
	tests := []struct {
		name  string
		pod   *Pod
		set   map[corev1.PodConditionType]corev1.ConditionStatus
		ready cond
		// first are the condition types before kubelet's, in order.
		first []corev1.PodConditionType
	}{
		{name: "no gates, nothing set → ready", pod: gated("", running()), ready: cond{Status: T}},
		{name: "a gate whose condition is not set → not ready, kubelet's 'does not exist'", pod: gated("", running(), lb),
			ready: cond{F, ReasonReadinessGatesNotReady, `corresponding condition of pod readiness gate "example.com/lb" does not exist.`}},
		{name: "a gate set False → not ready, kubelet's 'is not True'", pod: gated("", running(), lb), set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: F},
			ready: cond{F, ReasonReadinessGatesNotReady, `the status of pod readiness gate "example.com/lb" is not "True", but False`}, first: []corev1.PodConditionType{lb}},
		{name: "a gate set True → ready", pod: gated("", running(), lb), set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: T},
			ready: cond{Status: T}, first: []corev1.PodConditionType{lb}},
		{name: "two gates, one True, one missing → the missing one's message", pod: gated("", running(), lb, warm),
			set:   map[corev1.PodConditionType]corev1.ConditionStatus{lb: T},
			ready: cond{F, ReasonReadinessGatesNotReady, `corresponding condition of pod readiness gate "example.com/warm" does not exist.`}, first: []corev1.PodConditionType{lb}},
		{name: "two gates unmet → both messages, in the spec's order, joined as kubelet joins them", pod: gated("", running(), warm, lb),
			set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: F},
			ready: cond{F, ReasonReadinessGatesNotReady,
				`corresponding condition of pod readiness gate "example.com/warm" does not exist., the status of pod readiness gate "example.com/lb" is not "True", but False`},
			first: []corev1.PodConditionType{lb}},
		{name: "two gates True → ready; the conditions come first, by type", pod: gated("", running(), warm, lb),
			set: map[corev1.PodConditionType]corev1.ConditionStatus{warm: T, lb: T}, ready: cond{Status: T}, first: []corev1.PodConditionType{lb, warm}},
		{name: "a condition set that no gate names → shown, readiness unchanged", pod: gated("", running()),
			set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: F}, ready: cond{Status: T}, first: []corev1.PodConditionType{lb}},
		{name: "gates True do not mask containers not ready", pod: gated("", exited(), lb), set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: T},
			ready: cond{F, ReasonContainersNotReady, "containers with unready status: [app]"}, first: []corev1.PodConditionType{lb}},
		{name: "a completed pod is not ready whatever its gates", pod: gated(corev1.RestartPolicyNever, exited(), lb),
			set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: T}, ready: cond{F, ReasonPodCompleted, ""}, first: []corev1.PodConditionType{lb}},
		{name: "a pod with no manifest has no gates; a condition set on it is shown", pod: podOf("", running()),
			set: map[corev1.PodConditionType]corev1.ConditionStatus{lb: F}, ready: cond{Status: T}, first: []corev1.PodConditionType{lb}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewGateStore(clocktesting.NewFakePassiveClock(at(100)))
			for typ, status := range tt.set {
				_, err := store.Set(Gate{PodKey: tt.pod.Key, Namespace: tt.pod.Namespace, Pod: tt.pod.Name, Type: typ, Status: status})
				require.NoError(t, err)
			}
			r := ReportPod(tt.pod, PodStatus{}, results.NewStore(), store.Gates())
			var types []corev1.PodConditionType
			got := map[corev1.PodConditionType]Condition{}
			for _, c := range r.Conditions {
				types = append(types, c.Type)
				got[c.Type] = c
			}
			kubelets := []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled}
			assert.Equal(t, append(append([]corev1.PodConditionType{}, tt.first...), kubelets...), types, "the conditions set, then kubelet's in its order")
			ready := got[corev1.PodReady]
			assert.Equal(t, tt.ready, cond{ready.Status, ready.Reason, ready.Message})
			assert.Equal(t, tt.ready.Status == T, r.Ready, "Ready is the Ready condition")
			for _, typ := range tt.first {
				assert.Equal(t, tt.set[typ], got[typ].Status)
				assert.Equal(t, at(100), got[typ].LastTransitionTime, "set at the store's time")
			}
		})
	}
}

func TestGateStoreSet(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(at(0))
	s := NewGateStore(clock)
	g := Gate{PodKey: "u", Namespace: "ns", Pod: "web", Type: "example.com/lb", Status: corev1.ConditionFalse, By: "uid 0"}
	c, err := s.Set(g)
	require.NoError(t, err)
	assert.True(t, c.Changed)
	assert.Equal(t, corev1.ConditionStatus(""), c.Previous)
	v := s.Version()

	clock.SetTime(at(5))
	c, err = s.Set(g)
	require.NoError(t, err)
	assert.False(t, c.Changed, "the same status again changes nothing")
	assert.Equal(t, at(0), c.Gate.LastTransitionTime, "nor its transition time")
	assert.Equal(t, v, s.Version())

	g.Status = corev1.ConditionTrue
	c, err = s.Set(g)
	require.NoError(t, err)
	assert.True(t, c.Changed)
	assert.Equal(t, corev1.ConditionFalse, c.Previous)
	assert.Equal(t, at(5), s.Gates().For("u")[0].LastTransitionTime)
	assert.Greater(t, s.Version(), v)

	c, err = s.Unset("u", "example.com/lb")
	require.NoError(t, err)
	assert.True(t, c.Changed)
	assert.Equal(t, corev1.ConditionTrue, c.Previous)
	assert.Empty(t, s.Gates().For("u"))
	assert.Empty(t, s.List())
	c, err = s.Unset("u", "example.com/lb")
	require.NoError(t, err)
	assert.False(t, c.Changed, "unsetting what is not set changes nothing")
}

func TestGateStoreRefuses(t *testing.T) {
	tests := []struct {
		name string
		gate Gate
		want string
	}{
		{name: "kubelet's Ready", gate: Gate{Type: corev1.PodReady, Status: corev1.ConditionTrue}, want: `condition "Ready" is kubelet's own`},
		{name: "kubelet's ContainersReady", gate: Gate{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, want: `is kubelet's own`},
		{name: "not a qualified name", gate: Gate{Type: "bad name!", Status: corev1.ConditionTrue}, want: `condition type "bad name!": name part must consist of`},
		{name: "empty", gate: Gate{Type: "", Status: corev1.ConditionTrue}, want: `condition type "": name part must be non-empty`},
		{name: "Unknown status", gate: Gate{Type: "example.com/lb", Status: corev1.ConditionUnknown}, want: `status "Unknown": want True or False`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.gate.PodKey = "u"
			_, err := NewGateStore(nil).Set(tt.gate)
			require.ErrorIs(t, err, ErrInvalidGate)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err := ParseGateStatus("yes")
	assert.ErrorContains(t, err, `status "yes": want True or False`)
	st, err := ParseGateStatus("true")
	require.NoError(t, err)
	assert.Equal(t, corev1.ConditionTrue, st)

	s := NewGateStore(nil)
	for i := range MaxGatesPerPod {
		_, err := s.Set(Gate{PodKey: "u", Namespace: "ns", Pod: "web", Type: corev1.PodConditionType(fmt.Sprintf("example.com/g%d", i)), Status: corev1.ConditionTrue})
		require.NoError(t, err)
	}
	_, err = s.Set(Gate{PodKey: "u", Namespace: "ns", Pod: "web", Type: "example.com/one-more", Status: corev1.ConditionTrue})
	require.ErrorIs(t, err, ErrTooManyGates)
	assert.ErrorContains(t, err, "pod ns/web has 32 conditions set")
	_, err = s.Set(Gate{PodKey: "u", Namespace: "ns", Pod: "web", Type: "example.com/g0", Status: corev1.ConditionFalse})
	assert.NoError(t, err, "changing one it has is always allowed")
}

// With a state directory the gates survive the agent's restart: a new
// store over the directory has them, with their times and who set them.
func TestGateStoreKeptInStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := openWarned(t, dir, clocktesting.NewFakePassiveClock(at(3)))
	require.NoError(t, err)
	assert.True(t, s.Persistent())
	_, err = s.Set(Gate{PodKey: "u1", Namespace: "ns", Pod: "web", Type: "example.com/lb", Status: corev1.ConditionTrue, By: "uid 0 (pid 1) on the unix socket"})
	require.NoError(t, err)
	_, err = s.Set(Gate{PodKey: "u2", Namespace: "ns", Pod: "db", Type: "example.com/lb", Status: corev1.ConditionFalse})
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, gateFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, err := openWarned(t, dir)
	require.NoError(t, err)
	utc := func(list []Gate) []Gate {
		for i := range list {
			list[i].LastTransitionTime = list[i].LastTransitionTime.UTC()
		}
		return list
	}
	assert.Equal(t, utc(s.List()), utc(again.List()))
	got := again.Gates().For("u1")
	require.Len(t, got, 1)
	assert.Equal(t, Condition{Type: "example.com/lb", Status: corev1.ConditionTrue}, Condition{Type: got[0].Type, Status: got[0].Status})
	assert.True(t, at(3).Equal(got[0].LastTransitionTime), "its time kept")

	// Pods the runtime no longer has lose their gates, in the file too.
	dropped, err := again.Prune(func(key string) bool { return key == "u1" })
	require.NoError(t, err)
	require.Len(t, dropped, 1)
	assert.Equal(t, "u2", dropped[0].PodKey)
	third, err := openWarned(t, dir)
	require.NoError(t, err)
	assert.Len(t, third.List(), 1)

	assert.False(t, NewGateStore(nil).Persistent(), "without a directory: memory only")
}

// A file the agent cannot read as its own is set aside, and the agent
// starts with no gates; one of a newer format is kept for its agent.
func TestGateStoreBadFile(t *testing.T) {
	tests := []struct {
		name, content, aside, want string
	}{
		{name: "not JSON", content: "{", aside: "gates.json.bad", want: "are not valid"},
		{name: "an unknown field", content: `{"version":1,"gates":[],"extra":1}`, aside: "gates.json.bad", want: "unknown field"},
		{name: "kubelet's condition", content: `{"version":1,"gates":[{"podKey":"u","type":"Ready","status":"True"}]}`, aside: "gates.json.bad", want: "kubelet's own"},
		{name: "a newer format", content: `{"version":2}`, aside: "gates.json.v2", want: "newer than this agent's 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Chmod(dir, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, gateFile), []byte(tt.content), 0o600))
			s, err := openWarned(t, dir)
			require.NotNil(t, s, "usable")
			assert.ErrorContains(t, err, tt.want)
			assert.Empty(t, s.List())
			_, err = os.Stat(filepath.Join(dir, tt.aside))
			assert.NoError(t, err, "set aside")
		})
	}
	link := t.TempDir()
	require.NoError(t, os.Chmod(link, 0o700))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(link, gateFile)))
	s, err := openWarned(t, link)
	require.NotNil(t, s)
	assert.ErrorContains(t, err, "symbolic link")
}

// openWarned is OpenGateStore on a directory that can be used: its error
// is the warning, a *statefile.Warning (the file set aside).
func openWarned(t *testing.T, dir string, c ...clock.PassiveClock) (*GateStore, error) {
	t.Helper()
	var pc clock.PassiveClock
	if len(c) > 0 {
		pc = c[0]
	}
	s, warning, err := OpenGateStore(dir, pc)
	require.NoError(t, err, "the directory can be used")
	if warning != nil {
		var w *statefile.Warning
		require.ErrorAs(t, warning, &w)
	}
	return s, warning
}

// The gates written by today's agent load (testdata/gates-v1.json).
func TestGateStoreLoadsTodaysFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "gates-v1.json"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, gateFile), raw, 0o600))
	s, warning := openWarned(t, dir)
	require.NoError(t, warning)
	list := s.List()
	require.Len(t, list, 1)
	list[0].LastTransitionTime = list[0].LastTransitionTime.UTC()
	assert.Equal(t, Gate{PodKey: "uid-web", Namespace: "shop", Pod: "web", Type: "example.com/lb-ready", Status: corev1.ConditionTrue,
		LastTransitionTime: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), By: "uid 0"}, list[0])
}
