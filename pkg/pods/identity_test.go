package pods

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A pod is a UID and a namespace/name: the sandboxes of one pod are one
// pod whatever their number; a sandbox that reuses another pod's UID is
// kept apart under a key of its own, with a problem on both pods, and
// gets nothing of the other pod's (its manifest, probes, hooks, restarts;
// for a pod the agent makes, its stops and removal). The first sandbox of
// a UID holds it, unless the agent claims it (a pod it makes or made):
// then only the sandboxes it made are that pod's.
func TestPodIdentity(t *testing.T) {
	app := []spec.Container{{Name: "app", Readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}}}}
	web := &spec.Pod{Source: "web.yaml:1", Namespace: "ns", Name: "web", RestartPolicy: corev1.RestartPolicyAlways, Containers: app}
	pinned := &spec.Pod{Source: "pinned.yaml:1", Namespace: "ns", Name: "web", UID: "u", RestartPolicy: corev1.RestartPolicyAlways, Containers: app}
	owned := &spec.Pod{Source: "static.yaml:1", Namespace: "ns", Name: "web-node", UID: "hash1", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: app, Object: &corev1.Pod{}}
	made := map[string]Record{"hash1": {Namespace: "ns", Name: "web-node", Created: t0}}

	type want struct {
		name            string   // namespace/name
		sandboxes       []string // IDs, the current one first
		owned, orphaned bool
		source          string            // where its specs come from
		current         map[string]string // container → current instance
		managed         bool              // the agent may stop and restart some container
		conflicts       []string          // the problems, in full or in part
	}
	tests := []struct {
		name       string
		sandboxes  []*cri.Sandbox
		containers []*cri.Container
		in         Inputs
		want       map[string]want   // every pod, by key
		byName     map[string]string // namespace/name → the key it stands for
	}{
		{
			name:      "one UID, one name: one pod across its sandboxes",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "u", false, 0), sandbox("sb2", "web", "u", true, 10)},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateExited, 1),
				ctr("a2", "sb2", "app", 0, cri.StateRunning, 11)},
			in: Inputs{Manifests: []*spec.Pod{web}},
			want: map[string]want{
				"u": {name: "ns/web", sandboxes: []string{"sb2", "sb1"}, source: "web.yaml:1", current: map[string]string{"app": "a2"}, managed: true},
			},
		},
		{
			name: "one UID, another name: kept apart, a conflict on both",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0),
				sandbox("sb2", "evil", "u", false, 5), sandbox("sb3", "evil", "u", true, 10)},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateRunning, 1),
				ctr("a3", "sb3", "app", 0, cri.StateRunning, 11)},
			in: Inputs{Manifests: []*spec.Pod{web}},
			want: map[string]want{
				"u": {name: "ns/web", sandboxes: []string{"sb1"}, source: "web.yaml:1", current: map[string]string{"app": "a1"}, managed: true,
					conflicts: []string{`sandbox sb2: pod ns/web: metadata.uid: pod ns/evil (sandboxes sb2 sb3) has this pod's UID "u" too: two pods cannot share a UID, so that pod is kept apart and gets nothing of this pod's manifest, probes, hooks or restarts; remove that pod (crictl rmp -f sb2 sb3) or create it with a UID of its own`}},
				"sandbox:sb2": {name: "ns/evil", sandboxes: []string{"sb3", "sb2"}, current: map[string]string{"app": "a3"},
					conflicts: []string{`sandbox sb2: pod ns/evil: metadata.uid: UID "u" is that of pod ns/web (sandbox sb1): two pods cannot share a UID, so this pod is kept apart and gets nothing of ns/web's manifest, probes, hooks or restarts; remove this pod (crictl rmp -f sb2 sb3) or create it with a UID of its own`}},
			},
			byName: map[string]string{"ns/web": "u", "ns/evil": "sandbox:sb2"},
		},
		{
			name:      "the first sandbox of a UID holds it, whatever its name; the manifest still goes by name",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "evil", "u", true, 0), sandbox("sb2", "web", "u", true, 10)},
			in:        Inputs{Manifests: []*spec.Pod{web}},
			want: map[string]want{
				"u":           {name: "ns/evil", sandboxes: []string{"sb1"}, conflicts: []string{`pod ns/web (sandbox sb2) has this pod's UID "u" too`}},
				"sandbox:sb2": {name: "ns/web", sandboxes: []string{"sb2"}, source: "web.yaml:1", managed: true, conflicts: []string{`UID "u" is that of pod ns/evil (sandbox sb1)`}},
			},
		},
		{
			name:      "a manifest with a UID: its pod",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0)},
			in:        Inputs{Manifests: []*spec.Pod{pinned}},
			want:      map[string]want{"u": {name: "ns/web", sandboxes: []string{"sb1"}, source: "pinned.yaml:1", managed: true}},
		},
		{
			name:      "a manifest with a UID: not a sandbox of its name with another UID",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "other", true, 0)},
			in:        Inputs{Manifests: []*spec.Pod{pinned}},
			want:      map[string]want{"other": {name: "ns/web", sandboxes: []string{"sb1"}}},
		},
		{
			name:      "a manifest with a UID: not a sandbox with its UID and another name beside its pod",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "u", true, 0), sandbox("sb2", "evil", "u", true, 10)},
			in:        Inputs{Manifests: []*spec.Pod{pinned}},
			want: map[string]want{
				"u":           {name: "ns/web", sandboxes: []string{"sb1"}, source: "pinned.yaml:1", managed: true, conflicts: []string{`pod ns/evil (sandbox sb2)`}},
				"sandbox:sb2": {name: "ns/evil", sandboxes: []string{"sb2"}, conflicts: []string{`UID "u" is that of pod ns/web (sandbox sb1)`}},
			},
		},
		{
			name:      "a manifest with a UID: nor such a sandbox while its pod is absent",
			sandboxes: []*cri.Sandbox{sandbox("sb2", "evil", "u", true, 10)},
			in:        Inputs{Manifests: []*spec.Pod{pinned}},
			want:      map[string]want{"u": {name: "ns/evil", sandboxes: []string{"sb2"}}},
		},
		{
			name:       "a pod the agent makes: its sandbox, after an agent restart too",
			sandboxes:  []*cri.Sandbox{agents(sandbox("sb1", "web-node", "hash1", true, 0))},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateRunning, 1)},
			in:         Inputs{StaticPods: []*spec.Pod{owned}, Records: made},
			want: map[string]want{
				"hash1": {name: "ns/web-node", sandboxes: []string{"sb1"}, owned: true, source: "static.yaml:1", current: map[string]string{"app": "a1"}, managed: true},
			},
		},
		{
			name:       "a pod the agent makes: its UID and name on a sandbox it did not make",
			sandboxes:  []*cri.Sandbox{sandbox("sb1", "web-node", "hash1", true, 0)},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateRunning, 1)},
			in:         Inputs{StaticPods: []*spec.Pod{owned}, Records: made},
			want: map[string]want{
				"hash1": {name: "ns/web-node", owned: true, source: "static.yaml:1", current: map[string]string{"app": ""}, managed: true,
					conflicts: []string{`sandbox sb1: pod ns/web-node: metadata.uid: pod ns/web-node (sandbox sb1) has this pod's UID "hash1", but cri-prober did not make it: that pod is kept apart, gets none of this pod's probes or hooks, and cri-prober never stops or removes it; remove that pod (crictl rmp -f sb1) or create it with a UID of its own; until then the runtime may refuse this pod's sandbox of the same name and attempt`}},
				"sandbox:sb1": {name: "ns/web-node", sandboxes: []string{"sb1"}, current: map[string]string{"app": "a1"},
					conflicts: []string{`sandbox sb1: pod ns/web-node: metadata.uid: UID "hash1" is that of pod ns/web-node (no sandbox yet), which cri-prober makes, and cri-prober did not make this pod's sandbox (the sandboxes it makes carry the pod's namespace and name and kubelet's kubernetes.io/config.source and kubernetes.io/config.hash annotations): this pod is kept apart, gets none of ns/web-node's probes or hooks, and cri-prober never stops or removes it; remove this pod (crictl rmp -f sb1) or create it with a UID of its own; until then the runtime may refuse ns/web-node's sandbox of the same name and attempt`}},
			},
			byName: map[string]string{"ns/web-node": "hash1"},
		},
		{
			name: "a pod the agent makes: its UID on another name beside its sandbox",
			sandboxes: []*cri.Sandbox{agents(sandbox("sb1", "web-node", "hash1", true, 0)),
				sandbox("sb2", "evil", "hash1", true, 10)},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateRunning, 1), ctr("a2", "sb2", "app", 0, cri.StateRunning, 11)},
			in:         Inputs{StaticPods: []*spec.Pod{owned}, Records: made},
			want: map[string]want{
				"hash1": {name: "ns/web-node", sandboxes: []string{"sb1"}, owned: true, source: "static.yaml:1", current: map[string]string{"app": "a1"}, managed: true,
					conflicts: []string{`pod ns/evil (sandbox sb2) has this pod's UID "hash1", but cri-prober did not make it`}},
				"sandbox:sb2": {name: "ns/evil", sandboxes: []string{"sb2"}, current: map[string]string{"app": "a2"},
					conflicts: []string{`UID "hash1" is that of pod ns/web-node (sandbox sb1), which cri-prober makes`}},
			},
		},
		{
			name:       "a pod the agent made (its manifest gone): its UID on a sandbox it did not make is never torn down",
			sandboxes:  []*cri.Sandbox{sandbox("sb1", "web-node", "hash1", true, 0)},
			containers: []*cri.Container{ctr("a1", "sb1", "app", 0, cri.StateRunning, 1)},
			in:         Inputs{Records: made},
			want: map[string]want{
				"hash1":       {name: "ns/web-node", owned: true, orphaned: true, source: "(manifest removed)", conflicts: []string{`but cri-prober did not make it`}},
				"sandbox:sb1": {name: "ns/web-node", sandboxes: []string{"sb1"}, current: map[string]string{"app": "a1"}, conflicts: []string{`which cri-prober makes`}},
			},
			byName: map[string]string{"ns/web-node": "hash1"},
		},
		{
			name:      "keys never collide: a UID written like another sandbox's key",
			sandboxes: []*cri.Sandbox{sandbox("sb1", "web", "", true, 0), sandbox("sb2", "db", "sandbox:sb1", true, 0)},
			want: map[string]want{
				"sandbox:sb1": {name: "ns/web", sandboxes: []string{"sb1"}},
				"sandbox:sb2": {name: "ns/db", sandboxes: []string{"sb2"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Resolve(cri.NewSnapshot(t0, tt.sandboxes, tt.containers), tt.in)
			var keys []string
			for _, p := range v.Pods() {
				keys = append(keys, p.Key)
			}
			assert.ElementsMatch(t, slices.Collect(maps.Keys(tt.want)), keys, "the pods")
			for key, w := range tt.want {
				p, ok := v.Pod(key)
				if !assert.True(t, ok, key) {
					continue
				}
				var sandboxes []string
				for _, sb := range p.Sandboxes {
					sandboxes = append(sandboxes, sb.ID)
				}
				assert.Equal(t, w.name, p.Namespace+"/"+p.Name, key)
				assert.Equal(t, w.sandboxes, sandboxes, "%s: sandboxes", key)
				if len(w.sandboxes) > 0 {
					assert.Equal(t, w.sandboxes[0], p.Sandbox.ID, "%s: the current sandbox", key)
				}
				assert.Equal(t, w.owned, p.Static, "%s: owned", key)
				assert.Equal(t, w.orphaned, p.Orphaned, "%s: orphaned", key)
				assert.Equal(t, w.source, p.Source, "%s: source", key)
				assert.Equal(t, w.managed, p.Managed(), "%s: managed", key)
				for name, id := range w.current {
					c := mustContainer(t, p, name)
					if id == "" {
						assert.Nil(t, c.Current, "%s: %s has no instance", key, name)
					} else if assert.NotNil(t, c.Current, "%s: %s", key, name) {
						assert.Equal(t, id, c.Current.ID, "%s: %s", key, name)
					}
				}
				require.Len(t, p.Conflicts, len(w.conflicts), "%s: %v", key, p.Conflicts)
				for i, c := range w.conflicts {
					assert.Contains(t, p.Conflicts[i].Error(), c, key)
				}
				assert.Equal(t, len(w.conflicts) > 0 && key != p.UID, p.KeptApart(), "%s: kept apart", key)
				report := ReportPod(p, PodStatus{}, results.NewStore(), GateSet{})
				for _, c := range p.Conflicts {
					assert.Contains(t, report.Problems, c.Error(), "%s: shown with the pod's problems", key)
				}
			}
			for name, key := range tt.byName {
				ns, n, _ := cutName(name)
				p, ok := v.ByName(ns, n)
				require.True(t, ok, name)
				assert.Equal(t, key, p.Key, "%s stands for", name)
			}
		})
	}
}

// cutName splits "namespace/name".
func cutName(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// The agent's sandboxes are its own: what podconfig writes into the
// config of a sandbox of a pod the agent makes (spec.StaticPod's
// identity) is what tells its sandboxes from others', so that after an
// agent restart they are its pod's again.
func TestAgentsSandboxesAreItsOwn(t *testing.T) {
	r := spec.Combine(spec.DecodeNamedFile("web.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ns}\nspec:\n  containers:\n  - {name: app, image: app:1}\n"),
		&spec.Static{NodeName: "node"}))
	require.Empty(t, r.Errors)
	require.Len(t, r.Pods, 1)
	m := r.Pods[0]
	cfg, err := podconfig.Sandbox(m.Object, 0, podconfig.Node{Name: "node"})
	require.NoError(t, err)
	sb := &cri.Sandbox{ID: "sb1", Namespace: cfg.GetMetadata().GetNamespace(), Name: cfg.GetMetadata().GetName(), UID: cfg.GetMetadata().GetUid(),
		State: cri.SandboxReady, CreatedAt: t0, Annotations: cfg.GetAnnotations()}

	v := Resolve(cri.NewSnapshot(t0, []*cri.Sandbox{sb}, nil), Inputs{StaticPods: []*spec.Pod{m}})
	p := mustPod(t, v, m.UID)
	require.NotNil(t, p.Sandbox, "the agent's sandbox is its pod's")
	assert.Equal(t, "sb1", p.Sandbox.ID)
	assert.Empty(t, p.Conflicts)
	assert.Len(t, v.Pods(), 1)
}
