package cri_test

import (
	"fmt"
	"testing"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// BenchmarkRelistSteadyState measures one relist when nothing changed: two
// list calls over a unix socket and the snapshot diff, at node scale.
func BenchmarkRelistSteadyState(b *testing.B) {
	for _, containers := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("containers=%d", containers), func(b *testing.B) {
			rt := fakeruntime.NewForTest(b)
			for i := range containers / 10 {
				sb := rt.AddSandbox("bench", fmt.Sprintf("pod-%05d", i), fmt.Sprintf("uid-%05d", i))
				for j := range 10 {
					rt.AddContainer(sb, fmt.Sprintf("c%d", j), running)
				}
			}
			p := newPoller(b, rt)
			relist(b, p)
			rt.ResetCalls()
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
