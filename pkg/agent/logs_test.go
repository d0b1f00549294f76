package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The log files kept are those of the agent's containers: every running
// instance of its static pods, and in others' pods only the instances it
// created; never another client's, nor one without a log or not running.
func TestLogTargets(t *testing.T) {
	at := time.Unix(1000, 0)
	sandboxes := []*cri.Sandbox{
		{ID: "s1", Namespace: "ns", Name: "static-node", UID: "u1", State: cri.SandboxReady, CreatedAt: at,
			Annotations: map[string]string{spec.ConfigSourceAnnotation: spec.ConfigSourceFile, spec.ConfigHashAnnotation: "u1"}},
		{ID: "s2", Namespace: "ns", Name: "theirs", UID: "u2", State: cri.SandboxReady, CreatedAt: at},
	}
	containers := []*cri.Container{
		{ID: "a", SandboxID: "s1", Name: "app", State: cri.StateRunning, CreatedAt: at, LogPath: "/logs/u1/app/0.log"},
		{ID: "b", SandboxID: "s1", Name: "done", State: cri.StateExited, CreatedAt: at, LogPath: "/logs/u1/done/0.log"},
		{ID: "c", SandboxID: "s2", Name: "web", State: cri.StateRunning, CreatedAt: at, LogPath: "/logs/u2/web/0.log"},
		{ID: "d", SandboxID: "s2", Name: "api", State: cri.StateRunning, CreatedAt: at.Add(time.Second), LogPath: "/logs/u2/api/1.log",
			Annotations: map[string]string{cri.AnnotationRestartOf: "old"}},
		{ID: "e", SandboxID: "s2", Name: "nolog", State: cri.StateRunning, CreatedAt: at, Annotations: map[string]string{cri.AnnotationRestartOf: "old"}},
	}
	static := &spec.Pod{Source: "static.yaml:1", Namespace: "ns", Name: "static-node", UID: "u1", RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []spec.Container{{Name: "app", Kind: spec.Regular}, {Name: "done", Kind: spec.Regular}}, Object: &corev1.Pod{}}
	v := pods.Resolve(cri.NewSnapshot(at, sandboxes, containers), pods.Inputs{StaticPods: []*spec.Pod{static}})
	var got []string
	for _, tg := range logTargets(v) {
		got = append(got, tg.Namespace+"/"+tg.Pod+"/"+tg.PodUID+" "+tg.Container.ID)
	}
	assert.ElementsMatch(t, []string{"ns/static-node/u1 a", "ns/theirs/u2 d"}, got)
	assert.Empty(t, logTargets(nil))
}
