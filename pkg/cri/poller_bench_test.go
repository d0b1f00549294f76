package cri_test

import (
	"fmt"
	"testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// benchNode returns a fake runtime holding containers running containers,
// ten a sandbox, and a poller that has listed them once (with a subscriber,
// as the agent always has one, so that the snapshot diff is measured).
// cached makes the fake encode its listings once (CacheListings): the
// benchmark then measures the client, not the fake's building and encoding
// of the answer, which a real runtime does in its own process.
func benchNode(b *testing.B, containers int, cached bool) (*fakeruntime.Runtime, *cri.Poller, []string) {
	rt := fakeruntime.NewForTest(b)
	if cached {
		rt.CacheListings()
	}
	var ids []string
	for i := range containers / 10 {
		sb := rt.AddSandbox("bench", fmt.Sprintf("pod-%05d", i), fmt.Sprintf("uid-%05d", i))
		for j := range 10 {
			ids = append(ids, rt.AddContainer(sb, fmt.Sprintf("c%d", j), running))
		}
	}
	p := newPoller(b, rt)
	sub := p.Subscribe()
	b.Cleanup(sub.Close)
	relist(b, p)
	sub.Next()
	rt.ResetCalls()
	return rt, p, ids
}

// BenchmarkRelistSteadyState measures one relist when nothing changed: two
// list calls over a unix socket and the snapshot diff, at node scale.
func BenchmarkRelistSteadyState(b *testing.B) { benchSteadyState(b, true) }

// BenchmarkRelistSteadyStateUncachedRuntime is BenchmarkRelistSteadyState
// plus the fake's cost of building and encoding its answers.
func BenchmarkRelistSteadyStateUncachedRuntime(b *testing.B) { benchSteadyState(b, false) }

func benchSteadyState(b *testing.B, cached bool) {
	for _, containers := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("containers=%d", containers), func(b *testing.B) {
			rt, p, _ := benchNode(b, containers, cached)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				relist(b, p)
			}
			b.StopTimer()
			if got := rt.Calls("ContainerStatus") + rt.Calls("PodSandboxStatus"); got != 0 {
				b.Fatalf("steady state made %d status calls", got)
			}
			b.ReportMetric(float64(rt.Calls("ListContainers")+rt.Calls("ListPodSandbox"))/float64(b.N), "cri-calls/relist")
		})
	}
}

// BenchmarkRelistOneExit measures a relist that finds one container exited
// (the relist a containerd exit event triggers): one ContainerStatus, a new
// snapshot and its diff.
func BenchmarkRelistOneExit(b *testing.B) {
	for _, containers := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("containers=%d", containers), func(b *testing.B) {
			rt, p, ids := benchNode(b, containers, true)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				b.StopTimer()
				// Alternate one container between exited and running (a
				// restart in place, as far as the listing can tell).
				state := exited
				if i/len(ids)%2 == 1 {
					state = running
				}
				if err := rt.SetContainerState(ids[i%len(ids)], state, 1); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
				relist(b, p)
			}
		})
	}
}
