//go:build soak

package soak

import (
	"fmt"
	"strings"
	"time"

	"github.com/cri-prober/cri-prober/test/harness"
)

// summary is one soak run.
type summary struct {
	Pods             int
	Duration         time.Duration
	Probes           int
	ExpectedRestarts int
	Restarts         int
	Kills, SeenKills int
	FlapPods         int
	Flapped          int // flapping pods seen failing
	BlipPods         int
	Blipped          int
	Problems         []string
	Samples          []sample
	Peak             sample
	Failed           bool
	Procs, CPUs      int
}

func (s summary) markdown() string {
	var b strings.Builder
	verdict := "passed"
	if s.Failed {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "Last `make soak`: %s, %s on the fake CRI runtime, %d pods (one container each, a liveness and a readiness probe every second: HTTP, gRPC, exec, TCP), %d CPUs, GOMAXPROCS %d; %s.\n\n",
		time.Now().UTC().Format("2006-01-02"), s.Duration, s.Pods, s.CPUs, s.Procs, verdict)
	fmt.Fprintf(&b, "| | planned | seen |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| probes run | | %d (%.0f/s) |\n", s.Probes, float64(s.Probes)/(s.Duration+settle).Seconds())
	fmt.Fprintf(&b, "| readiness flaps (%s not ready every %s) | %d pods | %d pods seen failing |\n", flapLength, flapEvery, s.FlapPods, s.Flapped)
	fmt.Fprintf(&b, "| liveness blips below the threshold (%s every %s) | %d pods | %d pods seen failing |\n", blipLength, blipEvery, s.BlipPods, s.Blipped)
	fmt.Fprintf(&b, "| liveness failing until restarted | %d kills | %d kills |\n", s.Kills, s.SeenKills)
	fmt.Fprintf(&b, "| restarts (kills and exits) | %d | %d |\n", s.ExpectedRestarts, s.Restarts)
	fmt.Fprintf(&b, "| pods not as planned at the end | 0 | %d |\n\n", len(s.Problems))
	fmt.Fprintf(&b, "| time | goroutines | fds | RSS MiB | heap MiB |\n|---|---|---|---|---|\n")
	for _, x := range s.Samples {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.1f |\n", x.At.Round(time.Second), x.Goroutines, x.FDs, x.RSSMiB, x.HeapMiB)
	}
	fmt.Fprintf(&b, "| highest | %d | %d | %.1f | %.1f |\n", s.Peak.Goroutines, s.Peak.FDs, s.Peak.RSSMiB, s.Peak.HeapMiB)
	b.WriteString("\nEach row is the floor of ten samples over two seconds (probes in flight come and go; a leak raises the floor); the last one is taken after the flapping stopped and the last restarts were done. Only the planned restarts happened: every restart beyond them, and every StopContainer of a container that was not failing, fails the run.\n")
	return b.String()
}

// write replaces the soak section of the markdown file at path.
func (s summary) write(path string) error {
	return harness.WriteSection(path, "soak", s.markdown())
}
