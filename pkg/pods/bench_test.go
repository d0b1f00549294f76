package pods

import (
	"fmt"
	"testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// BenchmarkResolve resolves a node of 5,000 pods of two containers each
// (10,000 containers), half of them under manifests, as every relist that
// changed something does.
func BenchmarkResolve(b *testing.B) {
	var sandboxes []*cri.Sandbox
	var containers []*cri.Container
	var manifests []*spec.Pod
	for i := range 5000 {
		sb := fmt.Sprintf("sb%d", i)
		sandboxes = append(sandboxes, &cri.Sandbox{ID: sb, Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), UID: fmt.Sprintf("uid-%d", i), State: cri.SandboxReady, CreatedAt: t0})
		for _, name := range []string{"app", "sidecar"} {
			containers = append(containers, &cri.Container{ID: sb + name, SandboxID: sb, Name: name, State: cri.StateRunning, CreatedAt: t0})
		}
		if i%2 == 0 {
			manifests = append(manifests, &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), RestartPolicy: "Always",
				Containers: []spec.Container{{Name: "sidecar", Kind: spec.Sidecar}, {Name: "app"}}})
		}
	}
	snap := cri.NewSnapshot(t0, sandboxes, containers)
	r := NewResolver(WithManifests(staticManifests(manifests)))
	r.snapshot = snap
	b.ReportAllocs()
	for b.Loop() {
		r.resolve()
	}
}

type staticManifests []*spec.Pod

func (s staticManifests) Pods() ([]*spec.Pod, []*spec.Error) { return s, nil }
func (staticManifests) Changed() <-chan struct{}             { return nil }

// BenchmarkReport1000Pods reports a node of 1,000 pods of two containers
// each (all under manifests), as /api/v1/pods and /metrics/kube-state do
// at every request (the former caches it until something changes).
func BenchmarkReport1000Pods(b *testing.B) {
	var sandboxes []*cri.Sandbox
	var containers []*cri.Container
	var manifests []*spec.Pod
	for i := range 1000 {
		sb := fmt.Sprintf("sb%d", i)
		sandboxes = append(sandboxes, &cri.Sandbox{ID: sb, Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), UID: fmt.Sprintf("uid-%d", i), State: cri.SandboxReady, CreatedAt: t0})
		for _, name := range []string{"app", "sidecar"} {
			containers = append(containers, &cri.Container{ID: sb + name, SandboxID: sb, Name: name, State: cri.StateRunning, CreatedAt: t0})
		}
		manifests = append(manifests, &spec.Pod{Source: "pods.yaml:1", Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), RestartPolicy: "Always",
			Containers: []spec.Container{{Name: "sidecar", Kind: spec.Sidecar}, {Name: "app"}}})
	}
	r := NewResolver(WithManifests(staticManifests(manifests)))
	r.snapshot = cri.NewSnapshot(t0, sandboxes, containers)
	v, store := r.resolve(), results.NewStore()
	b.ReportAllocs()
	for b.Loop() {
		if got := Report(NewStatus(v, nil, nil), store, GateSet{}); len(got) != 1000 {
			b.Fatalf("%d pods reported", len(got))
		}
	}
}
