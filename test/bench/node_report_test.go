//go:build bench

package bench

import (
	"fmt"
	"image/color"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// caseRuns returns the runs of a case, in run order.
func caseRuns(all []NodeResult, name, mode string, probes int) []NodeResult {
	var out []NodeResult
	for _, r := range all {
		if r.Case == name && (mode == "" || r.ProbeMetrics == mode) && (probes < 0 || r.Probes == probes) {
			out = append(out, r)
		}
	}
	return out
}

// collect maps runs to values, leaving out negative ones (no samples).
func collect(rs []NodeResult, f func(NodeResult) float64) []float64 {
	var out []float64
	for _, r := range rs {
		if v := f(r); v >= 0 {
			out = append(out, v)
		}
	}
	return out
}

// spread formats the median and, with more than one run, the range.
func spread(vals []float64, format func(float64) string) string {
	if len(vals) == 0 {
		return "none"
	}
	med, lo, hi := medianMinMax(vals)
	if len(vals) == 1 {
		return format(med)
	}
	return fmt.Sprintf("%s (%s–%s)", format(med), format(lo), format(hi))
}

func median(vals []float64) float64 {
	if len(vals) == 0 {
		return -1
	}
	m, _, _ := medianMinMax(vals)
	return m
}

func fmtF(prec int, unit string) func(float64) string {
	return func(v float64) string { return fmt.Sprintf("%.*f%s", prec, v, unit) }
}

// verdict judges the median of vals.
func verdict(vals []float64, ok func(float64) bool) string {
	if len(vals) == 0 {
		return "not measured"
	}
	if ok(median(vals)) {
		return "met"
	}
	return "**not met**"
}

func percentileOf(vals []float64, p float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	return percentile(s, p)
}

// victimStat is a per-run statistic of the kills of victims with one
// failure threshold (0: all).
func victimStat(rs []NodeResult, ft int, field func(VictimResult) float64, p float64) []float64 {
	var out []float64
	for _, r := range rs {
		var v []float64
		for _, vr := range r.Victims {
			if (ft == 0 || vr.FailureThreshold == ft) && field(vr) >= 0 {
				v = append(v, field(vr))
			}
		}
		if len(v) > 0 {
			out = append(out, percentileOf(v, p))
		}
	}
	return out
}

func threshStop(v VictimResult) float64 { return v.ThresholdStopMs }
func firstStop(v VictimResult) float64  { return v.FirstFailStopMs }

func rate(r NodeResult) float64 { return r.Agent.Probes / r.Agent.Seconds }

// overloadRatio is the agent's probe rate against what it could have
// reached: the bare loop's rate, or the offered rate when that is lower.
func overloadRatio(r NodeResult) float64 {
	br := bareRate(r)
	if br <= 0 {
		return -1
	}
	return rate(r) / min(br, float64(r.Probes)/float64(r.Period))
}

func cpuPerProbeUs(r NodeResult) float64 {
	if r.Agent.Probes == 0 {
		return -1
	}
	return 1e6 * r.Agent.CPUSeconds / r.Agent.Probes
}

func bareRate(r NodeResult) float64 {
	if r.Bare == nil {
		return -1
	}
	return sumOps(r.Bare) / r.Bare.Seconds
}

func bareCPUPerOpUs(r NodeResult) float64 {
	if r.Bare == nil || sumOps(r.Bare) == 0 {
		return -1
	}
	return 1e6 * r.Bare.CPUSeconds / sumOps(r.Bare)
}

// criPerRelist is the relist's CRI calls (lists and statuses) per second:
// per relist period at the default 1 s.
func criPerRelist(r NodeResult) float64 {
	c := r.CRICallsPerSecond
	return c["ListContainers"] + c["ListPodSandbox"] + c["ContainerStatus"] + c["PodSandboxStatus"]
}

func relists(r NodeResult) float64 { return r.CRICallsPerSecond["ListContainers"] }

// fairness formats the per-probe runs over the window: min / median / max
// of each run's probes, medians over the runs.
func fairness(rs []NodeResult, runs func(NodeResult) []float64) string {
	var lo, med, hi []float64
	for _, r := range rs {
		v := runs(r)
		if len(v) == 0 {
			continue
		}
		m, l, h := medianMinMax(v)
		lo, med, hi = append(lo, l), append(med, m), append(hi, h)
	}
	if len(med) == 0 {
		return "not measured (the window is longer than a probe's history)"
	}
	f := fmtF(0, "")
	return fmt.Sprintf("%s / %s / %s", spread(lo, f), spread(med, f), spread(hi, f))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// nodeMarkdown is the node section of docs/performance.md.
func nodeMarkdown(s nodeSettings, all []NodeResult, plotFile string) string {
	var b strings.Builder
	host, _ := os.Hostname()
	procs := 0
	if len(all) > 0 {
		procs = all[0].Agent.Procs
	}
	fmt.Fprintf(&b, "Measured by `make bench` (`TestNode`) on %s (%s, %d cores, %s; agent GOMAXPROCS %d as `cri-prober run` sets it), %s,\n"+
		"%d run(s) of each case: a cell is the median over the runs, with the smallest and largest run in brackets; a goal\n"+
		"is judged on the median. The machine is shared: load average %s when the figures were written.\n\n",
		host, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), procs, time.Now().UTC().Format("2006-01-02"), s.Runs, loadAvg())
	b.WriteString("The agent (the engine as `cri-prober run` wires it: poller, resolver, probe manager, restarter) runs alone in a\n" +
		"child process; its CPU (getrusage) and memory (RSS sampled every 100 ms; live heap after a GC at the window's end)\n" +
		"are its own. The HTTP, TCP and gRPC targets and the fake CRI runtime run in the test's process at nice 10, as a\n" +
		"node's workloads under the CPU reserved for its daemons. Each probe opens a new connection, as kubelet's do\n" +
		"(SO_LINGER 1 s). Victims are extra containers whose HTTP liveness probe starts failing mid-window; each is killed\n" +
		"once (StopContainer, then re-created healthy). A bare loop is plain Go doing the same work against the same\n" +
		"targets in a child process of its own at the same priority and GOMAXPROCS: a TCP connect and close with\n" +
		"SO_LINGER 1 s, or one HTTP/1.1 GET on a new connection (`http.ReadResponse` on the raw connection).\n\n")
	if plotFile != "" {
		fmt.Fprintf(&b, "![density, overload, cost per probe and memory](%s)\n\n", plotFile)
	}

	sizes := slices.Clone(s.DensitySizes)
	slices.Sort(sizes)
	for _, mode := range s.ProbeMetrics {
		if len(caseRuns(all, "density", mode, -1)) == 0 || len(sizes) == 0 {
			continue
		}
		n := sizes[len(sizes)-1]
		rs := caseRuns(all, "density", mode, n)
		if len(rs) == 0 || n == 0 {
			continue
		}
		fmt.Fprintf(&b, "### Density (target 2): %d probes at period %d s, probe metrics %s\n\n", n, s.DensityPeriod, mode)
		fmt.Fprintf(&b, "%d probes (4 in 10 HTTP, 3 TCP, 2 gRPC, 1 exec answered by the fake runtime) and %d victims (HTTP liveness,\n"+
			"failureThreshold 1, same period); warm-up %s (the workers start within one period), window %s.\n"+
			"Memory per probe compares with a run of the agent with no container at all (0 probes).\n\n",
			n, s.Victims, s.DensityWarmup, s.DensityWindow)
		b.WriteString("| figure | goal | measured | |\n|---|---|---|---|\n")
		row := func(name, goal, value, v string) { fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, goal, value, v) }
		row("probes run per second", fmt.Sprintf("%d offered", n/s.DensityPeriod), spread(collect(rs, rate), fmtF(0, "")), "")
		p99 := collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP99Ms })
		row("scheduling lateness p50 / p99 / max", "p99 ≤ 10 ms",
			spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP50Ms }), ms)+" / "+spread(p99, ms)+" / "+
				spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessMaxMs }), ms),
			verdict(p99, func(v float64) bool { return v <= 10 }))
		stop99 := victimStat(rs, 0, threshStop, 0.99)
		row("threshold → StopContainer p50 / p99 (over the victims)", "p99 ≤ 20 ms",
			spread(victimStat(rs, 0, threshStop, 0.5), ms)+" / "+spread(stop99, ms), verdict(stop99, func(v float64) bool { return v <= 20 }))
		row("first failing answer → StopContainer p50 / max", "(failureThreshold 1: the same run as the threshold)",
			spread(victimStat(rs, 0, firstStop, 0.5), ms)+" / "+spread(victimStat(rs, 0, firstStop, 1), ms), "")
		cri := collect(rs, criPerRelist)
		row("CRI calls per relist period (lists and statuses; relist 1 s)", "≤ 3", spread(cri, fmtF(2, "")),
			verdict(cri, func(v float64) bool { return v <= 3 }))
		row("relists per second", "1 (configured)", spread(collect(rs, relists), fmtF(2, "")), "")
		peak := collect(rs, func(r NodeResult) float64 { return r.Agent.RSSPeakMiB })
		row("agent RSS mean / peak", "peak ≤ 40 MiB",
			spread(collect(rs, func(r NodeResult) float64 { return r.Agent.RSSMeanMiB }), fmtF(1, " MiB"))+" / "+spread(peak, fmtF(1, " MiB")),
			verdict(peak, func(v float64) bool { return v <= 40 }))
		row("agent Go heap: peak / live after GC", "", spread(collect(rs, func(r NodeResult) float64 { return r.Agent.HeapPeakMiB }), fmtF(1, " MiB"))+
			" / "+spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LiveHeapMiB }), fmtF(1, " MiB")), "")
		base := caseRuns(all, "density", "", 0)
		if len(base) > 0 {
			perProbe := func(f func(AgentRun) float64) []float64 {
				var out []float64
				for i, r := range rs {
					bl := base[min(i, len(base)-1)]
					out = append(out, (f(r.Agent)-f(bl.Agent))*1024/float64(n+s.Victims))
				}
				return out
			}
			rssPer := perProbe(func(a AgentRun) float64 { return a.RSSMeanMiB })
			row("memory per configured probe: RSS (mean) / live heap, against 0 probes", "≤ 2 KiB",
				spread(rssPer, fmtF(2, " KiB"))+" / "+spread(perProbe(func(a AgentRun) float64 { return a.LiveHeapMiB }), fmtF(2, " KiB")),
				verdict(rssPer, func(v float64) bool { return v <= 2 }))
			row("agent with 0 probes: RSS mean / live heap", "", spread(collect(base, func(r NodeResult) float64 { return r.Agent.RSSMeanMiB }), fmtF(1, " MiB"))+
				" / "+spread(collect(base, func(r NodeResult) float64 { return r.Agent.LiveHeapMiB }), fmtF(1, " MiB")), "")
		}
		if len(sizes) > 2 && sizes[len(sizes)-2] > 0 {
			m := sizes[len(sizes)-2]
			small := caseRuns(all, "density", mode, m)
			var slope []float64
			for i, r := range rs {
				if i < len(small) {
					slope = append(slope, (r.Agent.RSSMeanMiB-small[i].Agent.RSSMeanMiB)*1024/float64(n-m))
				}
			}
			row(fmt.Sprintf("memory per probe: RSS slope from %d to %d probes", m, n), "≤ 2 KiB", spread(slope, fmtF(2, " KiB")),
				verdict(slope, func(v float64) bool { return v <= 2 }))
		}
		row("agent CPU per probe (share of one core)", "", spread(collect(rs, cpuPerProbeUs), fmtF(0, " µs"))+" ("+
			spread(collect(rs, func(r NodeResult) float64 { return 100 * r.Agent.CPUSeconds / r.Agent.Seconds }), fmtF(1, " %"))+")", "")
		row("goroutines", "", spread(collect(rs, func(r NodeResult) float64 { return float64(r.Agent.Goroutines) }), fmtF(0, "")), "")
		row("runs per probe over the window: min / median / max (agent's history)",
			fmt.Sprintf("about %.0f each", s.DensityWindow.Seconds()/float64(s.DensityPeriod)), fairness(rs, func(r NodeResult) []float64 { return r.Agent.Runs }), "")
		row("kills: missed / before failing (spurious)", "0 / 0", fmt.Sprintf("%d / %d", sumInt(rs, func(r NodeResult) int { return r.Missed }),
			sumInt(rs, func(r NodeResult) int { return r.Spurious })), "")
		b.WriteString("\n")
	}
	if len(s.ProbeMetrics) > 1 {
		b.WriteString("The density case runs once per `--probe-metrics` mode (BENCH_PROBE_METRICS): per-probe keeps kubelet's\n" +
			"`prober_probe_total` and `prober_probe_duration_seconds` series for each probe, aggregate by probe type only; the\n" +
			"difference in memory per probe is what the per-probe series cost.\n\n")
	}

	if rs := caseRuns(all, "overload", "", -1); len(rs) > 0 {
		period := 1
		fmt.Fprintf(&b, "### Overload (target 3): %d probes at period %d s (TCP and HTTP, half each)\n\n", s.OverProbes, period)
		fmt.Fprintf(&b, "Offered %d probes/s. First, in the same run, a bare loop of the same mix with %d goroutines (BENCH_BARE_WORKERS)\n"+
			"for %s finds the machine's ceiling against the same targets; then the agent, warm-up %s, window %s, with %d victims\n"+
			"(HTTP liveness, period 1 s, failureThreshold 1 and 3 alternately) failing from mid-window. Lateness is then\n"+
			"the backlog.\n\n", s.OverProbes, s.BareWorkers, s.OverWindow, s.OverWarmup, s.OverWindow, s.Victims)
		b.WriteString("| figure | goal | measured | |\n|---|---|---|---|\n")
		row := func(name, goal, value, v string) { fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, goal, value, v) }
		bare := collect(rs, bareRate)
		row("bare loop: operations per second (the ceiling)", "", spread(bare, fmtF(0, ""))+bareErrors(rs), "")
		row("agent: probes run per second", fmt.Sprintf("%d offered", s.OverProbes), spread(collect(rs, rate), fmtF(0, "")), "")
		ratio := collect(rs, func(r NodeResult) float64 { return overloadRatio(r) })
		row("agent's rate / the bare loop's (or the offered rate, if lower)", "≥ 0.7×", spread(ratio, fmtF(2, "×")),
			verdict(ratio, func(v float64) bool { return v >= 0.7 }))
		peak := collect(rs, func(r NodeResult) float64 { return r.Agent.RSSPeakMiB })
		row("agent RSS mean / peak", "peak ≤ 60 MiB", spread(collect(rs, func(r NodeResult) float64 { return r.Agent.RSSMeanMiB }), fmtF(1, " MiB"))+
			" / "+spread(peak, fmtF(1, " MiB")), verdict(peak, func(v float64) bool { return v <= 60 }))
		rl := collect(rs, relists)
		row("relists per second (first half of the window)", "1 (configured): ≥ 0.9", spread(rl, fmtF(2, "")),
			verdict(rl, func(v float64) bool { return v >= 0.9 }))
		row("CRI calls per relist period (lists and statuses)", "≤ 3", spread(collect(rs, criPerRelist), fmtF(2, "")), "")
		row("lateness (the backlog) p50 / p99 / max", "",
			spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP50Ms }), ms)+" / "+
				spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP99Ms }), ms)+" / "+
				spread(collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessMaxMs }), ms), "")
		expected := s.OverWindow.Seconds() / float64(period)
		row("runs per probe over the window: min / median / max (agent's history)", fmt.Sprintf("%.0f each", expected),
			fairness(rs, func(r NodeResult) []float64 { return r.Agent.Runs }), "")
		for _, ft := range []int{1, 3} {
			th := victimStat(rs, ft, threshStop, 1)
			ff := victimStat(rs, ft, firstStop, 1)
			limit := float64(1000 * 2 * period)
			row(fmt.Sprintf("failureThreshold %d: threshold → StopContainer, worst victim", ft), fmt.Sprintf("≤ 2 periods (%s)", ms(limit)),
				spread(th, ms), verdict(th, func(v float64) bool { return v <= limit }))
			ffLimit := float64(1000 * (ft - 1 + 2) * period)
			row(fmt.Sprintf("failureThreshold %d: first failing answer → StopContainer, worst victim", ft),
				fmt.Sprintf("≤ %d periods (%s): %d to reach the threshold, then 2", ft-1+2, ms(ffLimit), ft-1),
				spread(ff, ms), verdict(ff, func(v float64) bool { return v <= ffLimit }))
		}
		row("kills: missed / before failing (spurious)", "0 / 0", fmt.Sprintf("%d / %d", sumInt(rs, func(r NodeResult) int { return r.Missed }),
			sumInt(rs, func(r NodeResult) int { return r.Spurious })), "")
		row("CPU per probe: agent / bare loop (as fast as it can: see the next table for equal rates)", "", spread(collect(rs, cpuPerProbeUs), fmtF(0, " µs"))+" / "+spread(collect(rs, bareCPUPerOpUs), fmtF(0, " µs")), "")
		row("agent goroutines at the window's end", "", spread(collect(rs, func(r NodeResult) float64 { return float64(r.Agent.Goroutines) }), fmtF(0, "")), "")
		b.WriteString("\n")
	}

	floorTCP, floorHTTP := caseRuns(all, "floor-tcp", "", -1), caseRuns(all, "floor-http", "", -1)
	exBare, exRunner := benchMean(benchOutput(), "BenchmarkExecProbe", "bare-ns/op"), benchMean(benchOutput(), "BenchmarkExecProbe", "runner-ns/op")
	if len(floorTCP)+len(floorHTTP) > 0 || exBare > 0 {
		fmt.Fprintf(&b, "### Cost per probe against the floor (target 4)\n\n"+
			"The agent probes %d containers of one kind at period 1 s (%d probes/s) for %s after %s; the bare loop does the\n"+
			"same operation at the same rate (paced, %d goroutines) for %s just before, against the same targets. CPU is each\n"+
			"process's own (getrusage), divided by the probes (operations) run.\n\n",
			s.FloorRate, s.FloorRate, s.FloorWindow, s.FloorWarmup, floorWorkers, s.FloorWindow)
		b.WriteString("| probe | bare loop CPU per op | agent CPU per probe | ratio | goal | |\n|---|---|---|---|---|---|\n")
		for _, fc := range []struct {
			name string
			rs   []NodeResult
		}{{"TCP connect and close", floorTCP}, {"HTTP GET, new connection", floorHTTP}} {
			if len(fc.rs) == 0 {
				continue
			}
			ratio := collect(fc.rs, func(r NodeResult) float64 {
				if b := bareCPUPerOpUs(r); b > 0 && cpuPerProbeUs(r) > 0 {
					return cpuPerProbeUs(r) / b
				}
				return -1
			})
			fmt.Fprintf(&b, "| %s | %s | %s | %s | ≤ 1.5× | %s |\n", fc.name, spread(collect(fc.rs, bareCPUPerOpUs), fmtF(0, " µs"))+bareErrors(fc.rs),
				spread(collect(fc.rs, cpuPerProbeUs), fmtF(0, " µs")), spread(ratio, fmtF(2, "×")), verdict(ratio, func(v float64) bool { return v <= 1.5 }))
		}
		if exBare > 0 && exRunner > 0 {
			ratio := exRunner / exBare
			fmt.Fprintf(&b, "| exec (`BenchmarkExecProbe`: real containerd, `true` in a busybox container; wall time) | %.1f ms | %.1f ms | %.3f× | ≤ 1.05× wall | %s |\n",
				exBare/1e6, exRunner/1e6, ratio, verdict([]float64{ratio}, func(v float64) bool { return v <= 1.05 }))
		} else {
			b.WriteString("| exec | not measured in this run: `BenchmarkExecProbe` needs root and a private containerd (`hack/bench.sh` runs it as root) | | | ≤ 1.05× wall | |\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("Reproduce (each figure above; the BENCH_* settings shown are `make bench`'s):\n\n```sh\n" +
		"make bench                                   # everything, BENCH_RUNS=3 (about 10 minutes here)\n" +
		"BENCH_RUNS=3 BENCH_NODE_CASES=density BENCH_DENSITY_SIZES=0,10000 BENCH_DENSITY_PERIOD=10 BENCH_PROBE_METRICS=per-probe,aggregate \\\n" +
		"  go test -tags bench -count=1 -timeout 30m -run '^TestNode$' -v ./test/bench -args -node-report $PWD/docs/performance.md\n" +
		"BENCH_NODE_CASES=overload BENCH_OVERLOAD_PROBES=10000 BENCH_BARE_WORKERS=512 go test -tags bench -count=1 -timeout 30m -run '^TestNode$' -v ./test/bench -args -node-report $PWD/docs/performance.md\n" +
		"BENCH_NODE_CASES=floor BENCH_FLOOR_RATE=1000 go test -tags bench -count=1 -timeout 30m -run '^TestNode$' -v ./test/bench -args -node-report $PWD/docs/performance.md\n" +
		"```\n\nA run of some cases rewrites this whole section and its plot with those cases only; `-node-json FILE` keeps the raw figures.\n")
	return b.String()
}

// bareErrors tells how many of the bare loops' operations failed (a dial
// or request timing out: their CPU per operation is then lower than a
// successful one's), if any did.
func bareErrors(rs []NodeResult) string {
	var errs, ops float64
	for _, r := range rs {
		if r.Bare != nil {
			errs += r.Bare.Errors
			ops += sumOps(r.Bare) + r.Bare.Errors
		}
	}
	if errs == 0 {
		return ""
	}
	return fmt.Sprintf("; %.0f of %.0f operations failed", errs, ops)
}

func sumInt(rs []NodeResult, f func(NodeResult) int) int {
	n := 0
	for _, r := range rs {
		n += f(r)
	}
	return n
}

// benchOutput is the go test -bench output given with -benchmarks, if any.
func benchOutput() string {
	if *benchFile == "" {
		return ""
	}
	b, _ := os.ReadFile(*benchFile)
	return string(b)
}

// writeNodePlot draws the node cases: density lateness, overload rates,
// cost per probe and agent memory, each with its runs' spread.
func writeNodePlot(path string, s nodeSettings, all []NodeResult) error {
	var panels []*plot.Plot
	sizes := slices.Clone(s.DensitySizes)
	slices.Sort(sizes)
	colors := []colorName{{blue, "per-probe"}, {purple, "aggregate"}}
	if len(sizes) > 0 && sizes[len(sizes)-1] > 0 {
		n := sizes[len(sizes)-1]
		var series []dotSeries
		for i, mode := range s.ProbeMetrics {
			rs := caseRuns(all, "density", mode, n)
			if len(rs) == 0 {
				continue
			}
			series = append(series, dotSeries{"probe metrics " + mode, colors[i%len(colors)].c, [][]float64{
				collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP50Ms }),
				collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessP99Ms }),
				collect(rs, func(r NodeResult) float64 { return r.Agent.LatenessMaxMs }),
				victimStat(rs, 0, threshStop, 0.99),
			}})
		}
		if len(series) > 0 {
			p, err := dotPanel(fmt.Sprintf("density: %d probes, period %d s", n, s.DensityPeriod), "ms (log scale)",
				[]string{"lateness p50", "lateness p99", "lateness max", "kill p99"}, series,
				[]goalLine{{"goal: lateness p99 ≤ 10 ms", 10, red}, {"goal: kill p99 ≤ 20 ms", 20, orange}}, true)
			if err != nil {
				return err
			}
			panels = append(panels, p)
		}
	}
	if rs := caseRuns(all, "overload", "", -1); len(rs) > 0 {
		bare := collect(rs, bareRate)
		var goals []goalLine
		if len(bare) > 0 {
			goals = append(goals, goalLine{"goal: 0.7× the bare loop (or offered)", 0.7 * min(median(bare), float64(s.OverProbes)), red})
		}
		goals = append(goals, goalLine{"offered", float64(s.OverProbes), grey})
		p, err := dotPanel(fmt.Sprintf("overload: %d probes at period 1 s", s.OverProbes), "probes (operations) per second",
			[]string{"bare loop", "agent"}, []dotSeries{{"runs", blue, [][]float64{bare, collect(rs, rate)}}}, goals, false)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	floorTCP, floorHTTP := caseRuns(all, "floor-tcp", "", -1), caseRuns(all, "floor-http", "", -1)
	if len(floorTCP)+len(floorHTTP) > 0 {
		p, err := dotPanel(fmt.Sprintf("CPU per probe at %d/s", s.FloorRate), "µs of CPU", []string{"TCP", "HTTP"}, []dotSeries{
			{"bare loop", grey, [][]float64{collect(floorTCP, bareCPUPerOpUs), collect(floorHTTP, bareCPUPerOpUs)}},
			{"agent", blue, [][]float64{collect(floorTCP, cpuPerProbeUs), collect(floorHTTP, cpuPerProbeUs)}},
			{"goal: 1.5× bare (median)", red, [][]float64{scaled(collect(floorTCP, bareCPUPerOpUs), 1.5), scaled(collect(floorHTTP, bareCPUPerOpUs), 1.5)}},
		}, nil, false)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	{
		var cats []string
		var rssPeak, live [][]float64
		for _, n := range sizes {
			mode := s.ProbeMetrics[0]
			if n == 0 {
				mode = ""
			}
			rs := caseRuns(all, "density", mode, n)
			if len(rs) == 0 {
				continue
			}
			cats = append(cats, fmt.Sprintf("%d probes\n/ %d s", n, s.DensityPeriod))
			rssPeak = append(rssPeak, collect(rs, func(r NodeResult) float64 { return r.Agent.RSSPeakMiB }))
			live = append(live, collect(rs, func(r NodeResult) float64 { return r.Agent.LiveHeapMiB }))
		}
		if rs := caseRuns(all, "overload", "", -1); len(rs) > 0 {
			cats = append(cats, fmt.Sprintf("%d probes\n/ 1 s", s.OverProbes))
			rssPeak = append(rssPeak, collect(rs, func(r NodeResult) float64 { return r.Agent.RSSPeakMiB }))
			live = append(live, collect(rs, func(r NodeResult) float64 { return r.Agent.LiveHeapMiB }))
		}
		if len(cats) > 0 {
			p, err := dotPanel("agent memory", "MiB", cats, []dotSeries{{"RSS peak", blue, rssPeak}, {"live heap", green, live}},
				[]goalLine{{"goal: density 40 MiB", 40, orange}, {"goal: overload 60 MiB", 60, red}}, false)
			if err != nil {
				return err
			}
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return nil
	}
	for len(panels)%2 != 0 {
		blank := plot.New()
		blank.HideAxes()
		panels = append(panels, blank)
	}
	var rows [][]*plot.Plot
	for i := 0; i < len(panels); i += 2 {
		rows = append(rows, panels[i:i+2])
	}
	return savePanels(path, rows, vg.Points(820), vg.Points(330*float64(len(rows))))
}

type colorName struct {
	c    color.Color
	name string
}

func scaled(vals []float64, f float64) []float64 {
	if len(vals) == 0 {
		return nil
	}
	return []float64{f * median(vals)}
}
