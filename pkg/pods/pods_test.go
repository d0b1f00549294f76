package pods

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

var t0 = time.Unix(1_000_000, 0)

func sandbox(id, name, uid string, ready bool, created int) *cri.Sandbox {
	state := cri.SandboxNotReady
	if ready {
		state = cri.SandboxReady
	}
	return &cri.Sandbox{ID: id, Namespace: "ns", Name: name, UID: uid, State: state, CreatedAt: t0.Add(time.Duration(created) * time.Second),
		IPs: []string{"10.0.0." + id[len(id)-1:]}}
}

// agents makes sb one the agent made: it carries the annotations the agent
// writes into every sandbox config it makes (TestAgentsSandboxesAreItsOwn).
func agents(sb *cri.Sandbox) *cri.Sandbox {
	sb.Annotations = map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: sb.UID}
	return sb
}

func ctr(id, sandbox, name string, attempt uint32, state cri.ContainerState, created int) *cri.Container {
	return &cri.Container{ID: id, SandboxID: sandbox, Name: name, Attempt: attempt, State: state, CreatedAt: t0.Add(time.Duration(created) * time.Second)}
}

func mustPod(t *testing.T, v *View, key string) *Pod {
	t.Helper()
	p, ok := v.Pod(key)
	require.True(t, ok, "pod %s", key)
	return p
}

func mustContainer(t *testing.T, p *Pod, name string) *Container {
	t.Helper()
	c, ok := p.Container(name)
	require.True(t, ok, "container %s", name)
	return c
}

// One rule for "current", read by every part of the agent: the current
// sandbox is a ready one, else the newest; the current instance of a
// container is the newest by creation (kubelet's order), then attempt.
func TestOneRuleForCurrent(t *testing.T) {
	tests := []struct {
		name        string
		sandboxes   []*cri.Sandbox
		containers  []*cri.Container
		wantSandbox string
		wantCurrent string
	}{
		{
			name:        "a newer, stopped sandbox does not beat a ready one",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0), sandbox("sb2", "web", "u", false, 10)},
			wantSandbox: "sb1",
		},
		{
			name:        "the newest of two ready sandboxes",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0), sandbox("sb2", "web", "u", true, 10)},
			wantSandbox: "sb2",
		},
		{
			name:        "no sandbox ready: the newest",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", false, 0), sandbox("sb2", "web", "u", false, 10)},
			wantSandbox: "sb2",
		},
		{
			name:        "the newest instance by creation, whatever its attempt",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0)},
			containers:  []*cri.Container{ctr("a2", "sb1", "app", 2, cri.StateExited, 5), ctr("a0", "sb1", "app", 0, cri.StateRunning, 9)},
			wantSandbox: "sb1", wantCurrent: "a0",
		},
		{
			name:        "created at the same time: the higher attempt",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0)},
			containers:  []*cri.Container{ctr("a1", "sb1", "app", 1, cri.StateRunning, 5), ctr("a0", "sb1", "app", 0, cri.StateExited, 5)},
			wantSandbox: "sb1", wantCurrent: "a1",
		},
		{
			name:        "instances across the pod's sandboxes",
			sandboxes:   []*cri.Sandbox{sandbox("sb1", "web", "u", false, 0), sandbox("sb2", "web", "u", true, 10)},
			containers:  []*cri.Container{ctr("old", "sb1", "app", 0, cri.StateExited, 1), ctr("new", "sb2", "app", 0, cri.StateRunning, 11)},
			wantSandbox: "sb2", wantCurrent: "new",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Resolve(cri.NewSnapshot(t0, tt.sandboxes, tt.containers), Inputs{})
			p := mustPod(t, v, "u")
			assert.Equal(t, tt.wantSandbox, p.Sandbox.ID)
			assert.Equal(t, tt.wantSandbox, p.Sandboxes[0].ID, "the current sandbox first")
			if tt.wantCurrent != "" {
				assert.Equal(t, tt.wantCurrent, mustContainer(t, p, "app").Current.ID)
			}
		})
	}
}

// The same namespace/name twice (a pod re-created with a new UID while
// the old sandbox lingers): two pods, and one rule for which one the name
// stands for — the one with a ready sandbox, then the newest.
func TestSameNameTwice(t *testing.T) {
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "old", false, 0), sandbox("sb2", "web", "new", true, 10)}, nil)
	v := Resolve(snap, Inputs{})
	require.Len(t, v.Pods(), 2)
	p, ok := v.ByName("ns", "web")
	require.True(t, ok)
	assert.Equal(t, "new", p.UID)

	snap = cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "old", true, 0), sandbox("sb2", "web", "new", true, 10)}, nil)
	p, _ = Resolve(snap, Inputs{}).ByName("ns", "web")
	assert.Equal(t, "new", p.UID, "both ready: the newest")

	snap = cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "old", true, 0), sandbox("sb2", "web", "new", false, 10)}, nil)
	p, _ = Resolve(snap, Inputs{}).ByName("ns", "web")
	assert.Equal(t, "old", p.UID, "a ready sandbox wins over a newer stopped one")
}

// A static pod is in the view from its manifest alone, before any sandbox
// exists, under its UID; sandboxes join it by UID, and an attach-mode
// manifest of the same name does not apply to it.
func TestStaticPods(t *testing.T) {
	owned := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web-node", UID: "hash1", RestartPolicy: corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: 30, Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}}
	attach := &spec.Pod{Source: "attach.yaml:1", Namespace: "ns", Name: "web-node", RestartPolicy: corev1.RestartPolicyNever}

	v := Resolve(cri.NewSnapshot(t0, nil, nil), Inputs{StaticPods: []*spec.Pod{owned}, Manifests: []*spec.Pod{attach}})
	p := mustPod(t, v, "hash1")
	assert.True(t, p.Static)
	assert.Nil(t, p.Sandbox, "no sandbox yet")
	assert.False(t, p.SandboxReady())
	assert.Equal(t, corev1.PodPending, p.Phase)
	assert.Same(t, owned, p.Manifest)
	c := mustContainer(t, p, "app")
	assert.True(t, c.Managed)
	assert.Nil(t, c.Current)
	byName, ok := v.ByName("ns", "web-node")
	require.True(t, ok)
	assert.Same(t, p, byName)

	snap := cri.NewSnapshot(t0, []*cri.Sandbox{agents(sandbox("sb1", "web-node", "hash1", true, 0))},
		[]*cri.Container{ctr("a0", "sb1", "app", 0, cri.StateRunning, 1), ctr("x0", "sb1", "extra", 0, cri.StateRunning, 1)})
	p = mustPod(t, Resolve(snap, Inputs{StaticPods: []*spec.Pod{owned}, Manifests: []*spec.Pod{attach}}), "hash1")
	assert.Equal(t, "sb1", p.Sandbox.ID)
	assert.Equal(t, corev1.RestartPolicyAlways, p.Policy.RestartPolicy, "the owned manifest, not the attach one")
	assert.Equal(t, "a0", mustContainer(t, p, "app").Current.ID)
	assert.False(t, mustContainer(t, p, "extra").Managed, "a container the manifest does not list is never touched")
	assert.Equal(t, corev1.PodRunning, p.Phase)
}

// A sandbox of a pod the agent made whose manifest is gone is an orphan:
// owned, terminating, stopped with its last manifest when the agent saw
// it, else with what kubelet's annotations on its containers record.
func TestOrphans(t *testing.T) {
	sb := agents(sandbox("sb1", "web-node", "hash1", true, 0))
	app := ctr("a0", "sb1", "app", 0, cri.StateRunning, 1)
	app.Annotations = map[string]string{"io.kubernetes.pod.terminationGracePeriod": "7",
		"io.kubernetes.container.preStopHandler": `{"exec":{"command":["drain"]}}`}
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sb}, []*cri.Container{app})

	p := mustPod(t, Resolve(snap, Inputs{}), "hash1")
	assert.False(t, p.Static, "without the agent's records it is someone else's pod")

	p = mustPod(t, Resolve(snap, Inputs{Records: map[string]Record{"hash1": {Namespace: "ns", Name: "web-node", Created: t0}}}), "hash1")
	assert.True(t, p.Static)
	assert.True(t, p.Orphaned)
	assert.True(t, p.Terminating)
	assert.Equal(t, int64(7), p.Policy.TerminationGracePeriodSeconds)
	c := mustContainer(t, p, "app")
	assert.True(t, c.Managed)
	require.NotNil(t, c.Spec.PreStop())
	assert.Equal(t, []string{"drain"}, c.Spec.PreStop().Exec.Command)

	last := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web-node", UID: "hash1", TerminationGracePeriodSeconds: 3,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}}
	p = mustPod(t, Resolve(snap, Inputs{Records: map[string]Record{"hash1": {Namespace: "ns", Name: "web-node", Created: t0}}, Removed: map[string]*spec.Pod{"hash1": last}}), "hash1")
	assert.True(t, p.Orphaned)
	assert.Equal(t, int64(3), p.Policy.TerminationGracePeriodSeconds, "its last manifest")
	assert.Equal(t, "web.yaml:1 (removed)", p.Source)
}

// kubelet's active deadline: past spec.activeDeadlineSeconds from its
// start (when the agent first made it, else its oldest sandbox), the pod
// is Failed with reason DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	deadline := int64(60)
	m := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}},
		Object:     &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}}
	sbs := []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0)}
	ctrs := []*cri.Container{ctr("a0", "sb1", "app", 0, cri.StateRunning, 1)}

	p := mustPod(t, Resolve(cri.NewSnapshot(t0.Add(59*time.Second), sbs, ctrs), Inputs{Manifests: []*spec.Pod{m}}), "u")
	assert.Equal(t, corev1.PodRunning, p.Phase)
	assert.Equal(t, t0, p.StartTime, "the oldest sandbox's creation")
	assert.Empty(t, p.Reason)

	p = mustPod(t, Resolve(cri.NewSnapshot(t0.Add(60*time.Second), sbs, ctrs), Inputs{Manifests: []*spec.Pod{m}}), "u")
	assert.Equal(t, corev1.PodFailed, p.Phase)
	assert.Equal(t, "DeadlineExceeded", p.Reason)
	assert.Equal(t, "Pod was active on the node longer than the specified deadline", p.Message)

	owned := *m
	owned.UID = "u"
	p = mustPod(t, Resolve(cri.NewSnapshot(t0.Add(60*time.Second), []*cri.Sandbox{agents(sandbox("sb1", "web", "u", true, 0))}, ctrs), Inputs{StaticPods: []*spec.Pod{&owned},
		Records: map[string]Record{"u": {Created: t0.Add(30 * time.Second)}}}), "u")
	assert.Equal(t, t0.Add(30*time.Second), p.StartTime, "an owned pod started when the agent first made it")
	assert.Empty(t, p.Reason)
}

// An evicted static pod is Failed with reason Evicted and kubelet's
// message, for as long as the eviction is known (until its manifest
// changes: another UID); a pod others made is never marked.
func TestEvicted(t *testing.T) {
	m := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web", UID: "u", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}}}
	sbs := []*cri.Sandbox{agents(sandbox("sb1", "web", "u", true, 0))}
	ctrs := []*cri.Container{ctr("a0", "sb1", "app", 0, cri.StateRunning, 1)}
	const msg = `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `
	snap := cri.NewSnapshot(t0, sbs, ctrs)

	p := mustPod(t, Resolve(snap, Inputs{StaticPods: []*spec.Pod{m}}), "u")
	assert.Equal(t, corev1.PodRunning, p.Phase)
	assert.False(t, p.Evicted)

	p = mustPod(t, Resolve(snap, Inputs{StaticPods: []*spec.Pod{m}, Evicted: map[string]string{"u": msg}}), "u")
	assert.Equal(t, corev1.PodFailed, p.Phase)
	assert.Equal(t, ReasonEvicted, p.Reason)
	assert.Equal(t, msg, p.Message)
	assert.True(t, p.Evicted, "its content may be removed (kubelet's ShouldPodContentBeRemoved)")

	other := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0)}, ctrs)
	p = mustPod(t, Resolve(other, Inputs{Evicted: map[string]string{"u": msg}}), "u")
	assert.Empty(t, p.Reason, "a pod others made: never evicted by the agent")
	assert.False(t, p.Evicted)
}

// A status shows held pods in place of the view's, by key, and keeps the
// name index right; what the pods' syncs add is kept beside them, by key.
func TestStatusHoldsPods(t *testing.T) {
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "u1", true, 0), sandbox("sb2", "db", "u2", true, 0)}, nil)
	v := Resolve(snap, Inputs{})
	frozen := &Pod{Key: "u1", Namespace: "ns", Name: "web", UID: "u1", Sandbox: sandbox("sb1", "web", "u1", true, 0)}
	st := NewStatus(v, map[string]*Pod{"u1": frozen, "gone": {Key: "gone"}}, map[string]PodStatus{"u2": {Initialized: true}})
	w := st.View
	assert.Same(t, frozen, mustPod(t, w, "u1"))
	byName, _ := w.ByName("ns", "web")
	assert.Same(t, frozen, byName)
	assert.Same(t, mustPod(t, v, "u2"), mustPod(t, w, "u2"))
	_, ok := w.Pod("gone")
	assert.False(t, ok)
	assert.NotSame(t, frozen, mustPod(t, v, "u1"), "v itself is unchanged")
	assert.Same(t, v, NewStatus(v, nil, nil).View)
	assert.True(t, st.For("u2").Initialized)
	assert.Equal(t, PodStatus{}, st.For("u1"), "nothing added")
}

// Specs: a manifest lists every container (init containers first) and
// makes them managed; an annotated container outside it keeps its own
// spec; a sandbox restart-policy annotation manages all of an
// annotation-only pod's containers.
func TestResolveSpecs(t *testing.T) {
	manifest := &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: 60,
		Containers: []spec.Container{{Name: "setup", Kind: spec.Init}, {Name: "proxy", Kind: spec.Sidecar}, {Name: "app"}}}
	job := sandbox("sb2", "job", "uid-job", true, 0)
	job.Annotations = map[string]string{spec.RestartPolicyAnnotation: "OnFailure", spec.GracePeriodAnnotation: "7"}
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", true, 0), job},
		[]*cri.Container{ctr("s", "sb1", "setup", 0, cri.StateExited, 1), ctr("a", "sb1", "app", 0, cri.StateRunning, 2), ctr("x", "sb1", "extra", 0, cri.StateRunning, 2),
			ctr("m", "sb2", "main", 0, cri.StateRunning, 1)})
	v := Resolve(snap, Inputs{Manifests: []*spec.Pod{manifest}})

	web := mustPod(t, v, "uid-web")
	assert.Equal(t, "pods.yaml:1", web.Source)
	assert.Equal(t, spec.PodPolicy{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: 60}, web.Policy)
	var names []string
	for _, c := range web.Containers {
		names = append(names, c.Name+"/"+c.Kind.String())
	}
	assert.Equal(t, []string{"setup/init", "proxy/sidecar", "app/regular", "extra/regular"}, names, "the spec's order, then the others")
	assert.True(t, mustContainer(t, web, "proxy").Managed, "listed, not created yet")
	assert.Nil(t, mustContainer(t, web, "proxy").Current)
	assert.False(t, mustContainer(t, web, "extra").Managed, "not in the manifest: only observed")

	jobPod := mustPod(t, v, "uid-job")
	assert.Equal(t, spec.PodPolicy{RestartPolicy: corev1.RestartPolicyOnFailure, TerminationGracePeriodSeconds: 7}, jobPod.Policy)
	assert.True(t, mustContainer(t, jobPod, "main").Managed)
}

// With annotations switched off as a spec source (--spec-sources=manifests),
// nothing a pod's creator writes on its sandbox or containers opts it into
// probes or restarts: beside kubelet, Pod annotations land on the sandbox.
func TestResolveWithoutAnnotations(t *testing.T) {
	job := sandbox("sb2", "job", "uid-job", true, 0)
	job.Annotations = map[string]string{spec.RestartPolicyAnnotation: "OnFailure", spec.GracePeriodAnnotation: "7", spec.ProbeNetworkAnnotation: spec.ProbeNetworkPod}
	probed := ctr("p", "sb2", "probed", 0, cri.StateRunning, 1)
	probed.Annotations = map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["true"]}}`}
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{job}, []*cri.Container{ctr("m", "sb2", "main", 0, cri.StateRunning, 1), probed})

	on := mustPod(t, Resolve(snap, Inputs{}), "uid-job")
	require.True(t, mustContainer(t, on, "main").Managed, "annotations on: the restart-policy annotation manages the pod")
	require.NotNil(t, mustContainer(t, on, "probed").Spec)

	off := mustPod(t, Resolve(snap, Inputs{IgnoreAnnotations: true}), "uid-job")
	assert.Equal(t, spec.PodPolicy{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: spec.DefaultGracePeriodSecond}, off.Policy)
	assert.False(t, off.InPodNetwork)
	for _, name := range []string{"main", "probed"} {
		c := mustContainer(t, off, name)
		assert.False(t, c.Managed, "%s: never restarted", name)
		assert.Nil(t, c.Spec, "%s: never probed", name)
	}
	assert.Empty(t, off.Source)
}

// A container's annotation probe naming a host is a problem of that
// container (not probed, never ready) unless the operator lets annotations
// name hosts (--annotation-probe-hosts=any), in the resolver as in Resolve.
func TestAnnotationProbesArePinnedToTheirPod(t *testing.T) {
	app := ctr("a", "sb1", "app", 0, cri.StateRunning, 1)
	app.Annotations = map[string]string{spec.ReadinessAnnotation: `{"httpGet":{"host":"127.0.0.1","port":18080,"path":"/computeMetadata/v1/instance/service-accounts/default/token","httpHeaders":[{"name":"Metadata-Flavor","value":"Google"}]}}`}
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", true, 0)}, []*cri.Container{app})
	resolved := func(r *Resolver) *Container {
		r.snapshot = snap
		return mustContainer(t, mustPod(t, r.resolve(), "uid-web"), "app")
	}

	for name, c := range map[string]*Container{
		"Resolve":           mustContainer(t, mustPod(t, Resolve(snap, Inputs{}), "uid-web"), "app"),
		"the resolver":      resolved(NewResolver(ResolverConfig{})),
		"the resolver, pod": resolved(NewResolver(ResolverConfig{AnnotationProbeHosts: spec.AnnotationProbeHostsPod})),
	} {
		require.Len(t, c.Problems, 1, name)
		assert.Equal(t, "annotations: pod ns/web: container app: cri-prober.io/readiness-probe.httpGet.host: Forbidden: annotation probes go to their own pod (its IP, or 127.0.0.1 in its network namespace): remove the host, or let annotations name hosts with run --annotation-probe-hosts=any",
			c.Problems[0].Error(), name)
		assert.False(t, c.Probed(), name)
	}

	c := resolved(NewResolver(ResolverConfig{AnnotationProbeHosts: spec.AnnotationProbeHostsAny}))
	assert.Empty(t, c.Problems)
	require.True(t, c.Probed())
	assert.Equal(t, "127.0.0.1", c.Spec.Readiness.HTTPGet.Host)
	c = mustContainer(t, mustPod(t, Resolve(snap, Inputs{Annotations: ReadAnnotationsWith(spec.AnnotationProbeHostsAny)}), "uid-web"), "app")
	assert.True(t, c.Probed())
}

// kubelet 1.36's getPhase, with sidecars and init containers.
func TestPhase(t *testing.T) {
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	c := func(name string, kind spec.Kind, state cri.ContainerState, exit int32) *Container {
		pc := &Container{Name: name, Kind: kind, Spec: &spec.Container{Name: name, Kind: kind}, Managed: true}
		if state != "" {
			pc.Current = &cri.Container{ID: name, Name: name, State: state, ExitCode: exit}
			pc.Instances = []*cri.Container{pc.Current}
		}
		return pc
	}
	tests := []struct {
		name         string
		policy       corev1.RestartPolicy
		sandboxReady bool
		containers   []*Container
		want         corev1.PodPhase
	}{
		{name: "running", policy: always, sandboxReady: true, containers: []*Container{c("app", spec.Regular, cri.StateRunning, 0)}, want: corev1.PodRunning},
		{name: "created only", policy: always, sandboxReady: true, containers: []*Container{c("app", spec.Regular, cri.StateCreated, 0)}, want: corev1.PodPending},
		{name: "not created yet", policy: always, sandboxReady: true, containers: []*Container{c("app", spec.Regular, "", 0)}, want: corev1.PodPending},
		{name: "Always: exited containers restart", policy: always, sandboxReady: true, containers: []*Container{c("app", spec.Regular, cri.StateExited, 1)}, want: corev1.PodRunning},
		{name: "OnFailure: a failure restarts", policy: onFailure, sandboxReady: true, containers: []*Container{c("app", spec.Regular, cri.StateExited, 1)}, want: corev1.PodRunning},
		{name: "OnFailure: all succeeded", policy: onFailure, sandboxReady: true, containers: []*Container{c("a", spec.Regular, cri.StateExited, 0), c("b", spec.Regular, cri.StateExited, 0)}, want: corev1.PodSucceeded},
		{name: "Never: one still running", policy: never, sandboxReady: true, containers: []*Container{c("a", spec.Regular, cri.StateRunning, 0), c("b", spec.Regular, cri.StateExited, 1)}, want: corev1.PodRunning},
		{name: "Never: all exited, one failed", policy: never, sandboxReady: true, containers: []*Container{c("a", spec.Regular, cri.StateExited, 0), c("b", spec.Regular, cri.StateExited, 1)}, want: corev1.PodFailed},
		{name: "Never: all succeeded", policy: never, sandboxReady: true, containers: []*Container{c("a", spec.Regular, cri.StateExited, 0)}, want: corev1.PodSucceeded},
		{name: "sandbox stopped, nothing running, a failure", policy: always, sandboxReady: false, containers: []*Container{c("a", spec.Regular, cri.StateExited, 1)}, want: corev1.PodFailed},
		{name: "sandbox stopped, all succeeded", policy: always, sandboxReady: false, containers: []*Container{c("a", spec.Regular, cri.StateExited, 0)}, want: corev1.PodSucceeded},
		{name: "sandbox stopped, still running (terminating)", policy: always, sandboxReady: false, containers: []*Container{c("a", spec.Regular, cri.StateRunning, 0)}, want: corev1.PodRunning},
		{name: "init container running: pending", policy: always, sandboxReady: true, containers: []*Container{c("init", spec.Init, cri.StateRunning, 0), c("app", spec.Regular, "", 0)}, want: corev1.PodPending},
		{name: "init container done, app not created yet: pending, not over", policy: never, sandboxReady: true, containers: []*Container{c("init", spec.Init, cri.StateExited, 0), c("app", spec.Regular, "", 0)}, want: corev1.PodPending},
		{name: "init container done, app running", policy: never, sandboxReady: true, containers: []*Container{c("init", spec.Init, cri.StateExited, 0), c("app", spec.Regular, cri.StateRunning, 0)}, want: corev1.PodRunning},
		{name: "init container failed under Never: failed", policy: never, sandboxReady: true, containers: []*Container{c("init", spec.Init, cri.StateExited, 1), c("app", spec.Regular, "", 0)}, want: corev1.PodFailed},
		{name: "init container failed under Always: pending", policy: always, sandboxReady: true, containers: []*Container{c("init", spec.Init, cri.StateExited, 1), c("app", spec.Regular, "", 0)}, want: corev1.PodPending},
		{name: "a running sidecar keeps a finished Never pod running", policy: never, sandboxReady: true, containers: []*Container{c("proxy", spec.Sidecar, cri.StateRunning, 0), c("app", spec.Regular, cri.StateExited, 0)}, want: corev1.PodRunning},
		{name: "sidecar stopped with the pod: succeeded", policy: never, sandboxReady: false, containers: []*Container{c("proxy", spec.Sidecar, cri.StateExited, 137), c("app", spec.Regular, cri.StateExited, 0)}, want: corev1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := sandbox("sb1", "web", "u", tt.sandboxReady, 0)
			p := &Pod{Key: "u", Sandbox: sb, Sandboxes: []*cri.Sandbox{sb}, Policy: spec.PodPolicy{RestartPolicy: tt.policy}, Containers: tt.containers}
			assert.Equal(t, tt.want, phase(p, PodStatus{}, func(c *Container) bool { return c.Running() }))
			assert.Equal(t, terminal(tt.want), terminal(phase(p, PodStatus{}, func(*Container) bool { return false })),
				"no sidecar started: terminal in both or in neither")
		})
	}
}

// kubelet's ContainersReady: every regular container and sidecar is ready;
// regular init containers never count (a completed one shows ready, as in
// kubelet's status); a pod that completed is not ready.
func TestReportReadiness(t *testing.T) {
	manifest := &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "setup", Kind: spec.Init}, {Name: "proxy", Kind: spec.Sidecar}, {Name: "app"}}}
	snap := func(proxy cri.ContainerState) *cri.Snapshot {
		return cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", true, 0)}, []*cri.Container{
			ctr("s", "sb1", "setup", 0, cri.StateExited, 1), ctr("p", "sb1", "proxy", 0, proxy, 2), ctr("a", "sb1", "app", 0, cri.StateRunning, 3)})
	}
	store := results.NewStore()
	r := ReportPod(mustPod(t, Resolve(snap(cri.StateRunning), Inputs{Manifests: []*spec.Pod{manifest}}), "uid-web"), PodStatus{}, store, GateSet{})
	assert.True(t, r.Ready, "the completed init container does not hold readiness back")
	assert.Equal(t, corev1.PodRunning, r.Phase)
	assert.True(t, r.Containers[0].Ready, "a completed init container shows ready")
	assert.True(t, r.Containers[0].Completed())

	r = ReportPod(mustPod(t, Resolve(snap(cri.StateExited), Inputs{Manifests: []*spec.Pod{manifest}}), "uid-web"), PodStatus{}, store, GateSet{})
	assert.False(t, r.Ready, "a sidecar that is down does")
}

// What changed between two views: pods that appeared, went or changed in
// anything a reader acts on; nothing for an identical view.
func TestChangedPods(t *testing.T) {
	one := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "a", true, 0), sandbox("sb2", "db", "b", true, 0)},
		[]*cri.Container{ctr("c1", "sb1", "app", 0, cri.StateRunning, 1)})
	two := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "a", true, 0), sandbox("sb3", "cache", "c", true, 0)},
		[]*cri.Container{ctr("c1", "sb1", "app", 0, cri.StateExited, 1)})
	v1, v2 := Resolve(one, Inputs{}), Resolve(two, Inputs{})
	assert.ElementsMatch(t, []string{"a", "b"}, ChangedPods(nil, v1))
	assert.Empty(t, ChangedPods(v1, Resolve(one, Inputs{})))
	assert.ElementsMatch(t, []string{"a", "c", "b"}, ChangedPods(v1, v2), "a changed, c came, b went")
}

// A pod with no container yet is not ready (there is nothing to be ready),
// nor one whose manifest is invalid.
func TestReportNotReadyWithoutContainers(t *testing.T) {
	store := results.NewStore()
	v := Resolve(cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", true, 0)}, nil), Inputs{})
	assert.False(t, ReportPod(mustPod(t, v, "uid-web"), PodStatus{}, store, GateSet{}).Ready)
	invalid := []*spec.Error{{Source: "pods.yaml:7", Namespace: "ns", Pod: "web", Field: "spec.readinessGates", Detail: "Forbidden"}}
	v = Resolve(cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", true, 0)}, []*cri.Container{ctr("a", "sb1", "app", 0, cri.StateRunning, 1)}),
		Inputs{ManifestErrors: invalid})
	r := ReportPod(mustPod(t, v, "uid-web"), PodStatus{}, store, GateSet{})
	assert.False(t, r.Ready)
	assert.Equal(t, []string{"pods.yaml:7: pod ns/web: spec.readinessGates: Forbidden"}, r.Problems)
}

// kubelet's sortPodIPs: the first address of the node's family, else the
// first of the other; the runtime's order alone does not decide.
func TestPodIPPrefersTheNodesFamily(t *testing.T) {
	tests := []struct {
		name   string
		ips    []string
		nodeIP string
		want   string
	}{
		{"IPv4 node, IPv6 listed first", []string{"fd00::5", "10.0.0.5"}, "192.168.1.2", "10.0.0.5"},
		{"IPv6 node, IPv4 listed first", []string{"10.0.0.5", "fd00::5", "fd00::6"}, "2001:db8::1", "fd00::5"},
		{"unknown node address: IPv4 first", []string{"fd00::5", "10.0.0.5"}, "", "10.0.0.5"},
		{"single-stack of the other family", []string{"fd00::5"}, "192.168.1.2", "fd00::5"},
		{"garbage skipped", []string{"not-an-ip", "10.0.0.5"}, "192.168.1.2", "10.0.0.5"},
		{"IPv4-mapped node address is IPv4", []string{"fd00::5", "10.0.0.5"}, "::ffff:192.168.1.2", "10.0.0.5"},
		{"none", nil, "192.168.1.2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, (&cri.Sandbox{IPs: tt.ips}).IP(tt.nodeIP))
			host, inPod := ProbeAddress(&cri.Sandbox{IPs: tt.ips}, spec.ProbeNetworkNode, tt.nodeIP)
			assert.Equal(t, tt.want, host, "probes go to the pod IP kubelet reports")
			assert.False(t, inPod)
		})
	}
}

// The phase is one computation (phase): the report that status shows
// computes it with the startup probes' results, the view from the runtime
// and the specs alone, every running sidecar taken as started. In a pod
// made again (a new sandbox) whose regular container is not in it yet, a
// running sidecar whose startup probe has not succeeded keeps the report
// Pending (kubelet's getPhase: not initialized), and it is Running once
// the probe succeeds, with no new view. Only a phase that is not terminal
// depends on it, so the view's, on which the prober's workers stop and
// pod sync ends a pod, is terminal exactly when the report's is.
func TestViewAndReportShareOnePhase(t *testing.T) {
	startup := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"up"}}}}
	spec.DefaultProbe(startup)
	manifest := &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "proxy", Kind: spec.Sidecar, Startup: startup}, {Name: "app"}}}
	app := ctr("a", "sb1", "app", 0, cri.StateExited, 1)
	app.StartedAt, app.FinishedAt = t0.Add(2*time.Second), t0.Add(3*time.Second)
	snap := cri.NewSnapshot(t0, []*cri.Sandbox{sandbox("sb1", "web", "uid-web", false, 0), sandbox("sb2", "web", "uid-web", true, 5)},
		[]*cri.Container{app, ctr("p", "sb2", "proxy", 0, cri.StateRunning, 6)})
	store := results.NewStore()
	p := mustPod(t, Resolve(snap, Inputs{Manifests: []*spec.Pod{manifest}}), "uid-web")
	assert.Equal(t, corev1.PodRunning, p.Phase, "the view's phase: the runtime's and the specs'")
	key := results.Key{ContainerID: "p", Type: results.Startup}

	for _, step := range []struct {
		name   string
		result results.Result
		want   corev1.PodPhase
	}{
		{"sidecar not started yet", results.Unknown, corev1.PodPending},
		{"startup probe failing", results.Failure, corev1.PodPending},
		{"sidecar started", results.Success, corev1.PodRunning},
	} {
		store.Set(key, step.result, "uid-web")
		r := ReportPod(p, PodStatus{}, store, GateSet{})
		assert.Equal(t, step.want, r.Phase, "%s: the report's phase", step.name)
		assert.Equal(t, terminal(r.Phase), terminal(p.Phase), "%s: terminal in both or in neither", step.name)
	}
}

func terminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}
