//go:build bench

package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeReport writes the load harness's section of the markdown file at
// path (everything else in the file is kept): its table over the runs of
// each size, the issue-6 targets and the Go benchmarks.
func writeReport(path, plot, benchFile string, rs []Result) error {
	var b strings.Builder
	host, _ := os.Hostname()
	runs := 0
	for _, r := range rs {
		if r.Containers == rs[0].Containers {
			runs++
		}
	}
	fmt.Fprintf(&b, "Measured by `make bench` (`TestLoad`) on %s (%s, %d cores, %s, GOMAXPROCS %d as `cri-prober run` sets it), %s,\n"+
		"%d run(s) of each size (a row each; in the targets table the median, with the smallest and largest run in brackets).\n"+
		"The machine is shared: load average %s when the figures were written.\n\n",
		host, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), rs[0].Procs, time.Now().UTC().Format("2006-01-02"), runs, loadAvg())
	b.WriteString("The load harness runs the real poller, probe manager and restarter in one process with the\n" +
		"in-process fake CRI runtime: N containers with a readiness probe each at period 1 s (4 in 10 HTTP, 3 TCP,\n" +
		"2 gRPC to loopback targets, 1 exec answered by the fake), plus 20 containers whose liveness probe starts\n" +
		"failing mid-window. Each size runs in its own process after a warm-up. CPU and RSS are the whole process:\n" +
		"agent, fake runtime (gRPC server) and targets (the node cases above measure the agent alone).\n\n")
	if plot != "" {
		fmt.Fprintf(&b, "![lateness and CPU against probe count, with the spread over the runs](%s)\n\n", plotName(plot))
	}
	b.WriteString("| containers | probes/s | lateness p50 / p99 / max | CPU s per 1,000 probes | RSS MiB (KiB per probe) | goroutines (per probe) | CRI calls/s (list, status, exec) | threshold → StopContainer p50 / p99 / max |\n")
	b.WriteString("|---:|---:|---|---:|---|---|---|---|\n")
	for _, r := range rs {
		list := r.CRICallsPerSecond["ListContainers"] + r.CRICallsPerSecond["ListPodSandbox"]
		status := r.CRICallsPerSecond["ContainerStatus"] + r.CRICallsPerSecond["PodSandboxStatus"]
		fmt.Fprintf(&b, "| %d | %.0f | %s / %s / %s | %.3f | %.0f (%.1f) | %d (%.2f) | %.1f, %.2f, %.0f | %s / %s / %s |\n",
			r.Containers, r.ProbesPerSecond, ms(r.LatenessP50Ms), ms(r.LatenessP99Ms), ms(r.LatenessMaxMs), r.CPUPer1000Probes,
			r.RSSMiB, r.RSSKiBPerProbe, r.Goroutines, r.GoroutinesPerProbe, list, status, r.CRICallsPerSecond["ExecSync"],
			ms(r.StopP50Ms), ms(r.StopP99Ms), ms(r.StopMaxMs))
	}
	b.WriteString("\nProbes/s below the container count means the machine could not keep up with one probe per\n" +
		"container per second. CRI calls are counted in the first half of the window, before any restart.\n")
	b.WriteString("\n### Targets (issue 6)\n\n")
	var sizes []int
	for _, r := range rs {
		if !slices.Contains(sizes, r.Containers) {
			sizes = append(sizes, r.Containers)
		}
	}
	b.WriteString("| target |")
	for _, n := range sizes {
		fmt.Fprintf(&b, " %d containers |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(sizes)) + "\n")
	row := func(name string, value func(Result) float64, format func(float64) string, ok func(float64) bool) {
		b.WriteString("| " + name + " |")
		for _, n := range sizes {
			var vals []float64
			for _, r := range rs {
				if v := value(r); r.Containers == n && v >= 0 {
					vals = append(vals, v)
				}
			}
			b.WriteString(" " + spread(vals, format) + " (" + verdict(vals, ok) + ") |")
		}
		b.WriteString("\n")
	}
	row("scheduling lateness p99 ≤ 10 ms", func(r Result) float64 { return r.LatenessP99Ms }, ms, func(v float64) bool { return v <= 10 })
	row("≤ 3 CRI calls per relist period (plus exec; relist 1 s)", func(r Result) float64 {
		c := r.CRICallsPerSecond
		return c["ListContainers"] + c["ListPodSandbox"] + c["ContainerStatus"] + c["PodSandboxStatus"]
	}, fmtF(2, "/s"), func(v float64) bool { return v >= 1 && v <= 3 }) // fewer than one relist a second: starved
	row("RSS ≤ 60 MiB at 10,000 probes (scaled: 6 KiB per probe; whole process)", func(r Result) float64 { return r.RSSKiBPerProbe },
		fmtF(1, " KiB"), func(v float64) bool { return v <= 6.2 })
	row("threshold → StopContainer ≤ 20 ms p99", func(r Result) float64 { return r.StopP99Ms }, ms, func(v float64) bool { return v <= 20 })
	b.WriteString("\n")
	var benchOut string
	if benchFile != "" {
		data, err := os.ReadFile(benchFile)
		if err != nil {
			return err
		}
		benchOut = string(data)
	}
	if shared, perProbe := benchMean(benchOut, "BenchmarkHTTPProbe/shared-transport", "cpu-ns/op"), benchMean(benchOut, "BenchmarkHTTPProbe/transport-per-probe", "cpu-ns/op"); shared > 0 && perProbe > 0 {
		ratio := shared / perProbe
		fmt.Fprintf(&b, "- CPU per HTTP probe ≤ 0.5× a transport per probe (`BenchmarkHTTPProbe`, same run, same server): %.2f× — %s.\n",
			ratio, map[bool]string{true: "met", false: "**not met**"}[ratio <= 0.5])
	}
	if bare, runner := benchMean(benchOut, "BenchmarkExecProbe", "bare-ns/op"), benchMean(benchOut, "BenchmarkExecProbe", "runner-ns/op"); bare > 0 && runner > 0 {
		over := 100 * (runner/bare - 1)
		fmt.Fprintf(&b, "- Exec probe wall time within 5 %% of a bare ExecSync through the same socket (`BenchmarkExecProbe`, real\n"+
			"  containerd, `true` in a busybox container, the two alternating): bare %.1f ms, through the runner %.1f ms,\n"+
			"  %+.1f %% — %s.\n",
			bare/1e6, runner/1e6, over, map[bool]string{true: "met", false: "**not met**"}[over <= 5])
	} else {
		b.WriteString("- Exec probe wall time against a bare ExecSync: not measured in this run (needs root for a private containerd).\n")
	}
	if benchOut != "" {
		b.WriteString("\n### Go benchmarks\n\n```\n")
		for _, line := range strings.Split(benchOut, "\n") {
			if strings.HasPrefix(line, "Benchmark") {
				b.WriteString(line + "\n")
			}
		}
		b.WriteString("```\n")
	}
	b.WriteString("\nReproduce: `BENCH_RUNS=3 BENCH_SIZES=100,1000 make bench`, or this section alone:\n" +
		"`go test -tags bench -count=1 -run '^TestLoad$' -v ./test/bench -args -sizes 100,1000 -runs 3 -report $PWD/docs/performance.md -plot $PWD/docs/performance.png`.\n")
	return writeSection(path, "load", "## Load harness, everything in one process (issue 6)", b.String())
}

func plotName(path string) string {
	if i := strings.LastIndex(path, "/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// ms formats milliseconds; a negative value means there were no samples.
func ms(v float64) string {
	switch {
	case v < 0:
		return "none"
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.0f ms", v)
	}
}

// benchMean averages a metric (e.g. "ns/op") over the lines of a go test
// -bench output whose benchmark name starts with name; 0 if there are none.
func benchMean(out, name, unit string) float64 {
	var sum float64
	var n int
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], name) {
			continue
		}
		for i := 2; i+1 < len(fields); i += 2 {
			if fields[i+1] == unit {
				if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
					sum += v
					n++
				}
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
