// Command benchkubelet is the measuring and reporting half of
// hack/bench-kubelet.sh (make bench-kubelet): the same pods probed by a real
// kubelet and then by cri-prober, on one machine, in one run.
//
//	benchkubelet wait -url http://127.0.0.1:10465/pods -format kubelet -pods 10 -timeout 3m
//	benchkubelet measure -label kubelet -pid PID -socket SOCK -metrics URL -settle 20s -window 60s -out k.json
//	benchkubelet report -dir DIR -runs 3 -md docs/performance.md -command 'make bench-kubelet'
//
// measure reads the process's CPU time (utime+stime of /proc/PID/stat, in
// clock ticks) at both ends of the window and samples its VmRSS every
// interval; it also reads the runtime's CPU over the same window
// (containerd and the shims of its socket, with their reaped children: the
// runc processes of exec probes) and the probes counted by
// prober_probe_total on /metrics/probes, which kubelet and the agent both
// serve, so that a report shows both did the same work.
//
// report rewrites docs/performance.md between the kubelet markers only.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ: 100 on every Linux architecture Go supports.
const clockTicks = 100

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchkubelet wait|measure|report|startup|startup-report [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "wait":
		err = wait(os.Args[2:])
	case "measure":
		err = measure(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	case "startup":
		err = startup(os.Args[2:])
	case "startup-report":
		err = startupReport(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchkubelet:", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- wait

// kubeletPods is what we read of kubelet's /pods (a v1.PodList).
type kubeletPods struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// agentPods is what we read of the agent's /api/v1/pods.
type agentPods struct {
	Pods []struct {
		Name  string `json:"name"`
		Ready bool   `json:"ready"`
	} `json:"pods"`
}

func readyCount(url, format string) (int, int, error) {
	names, total, err := readyPods(url, format)
	return len(names), total, err
}

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ExitOnError)
	url := fs.String("url", "", "kubelet's /pods or the agent's /api/v1/pods")
	format := fs.String("format", "kubelet", "kubelet or agent")
	n := fs.Int("pods", 10, "pods that must all be ready")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after")
	_ = fs.Parse(args)
	deadline := time.Now().Add(*timeout)
	var last string
	for {
		ready, total, err := readyCount(*url, *format)
		if err == nil && ready >= *n {
			fmt.Fprintf(os.Stderr, "benchkubelet: %d of %d pods ready (%s)\n", ready, total, *format)
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d of %d pods ready, want %d", ready, total, *n)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %s", *timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func get(url string) ([]byte, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// ---------------------------------------------------------------- measure

// Phase is one measured window of one prober (kubelet or the agent).
type Phase struct {
	Label      string    `json:"label"`
	PID        int       `json:"pid"`
	Start      time.Time `json:"start"`
	WindowS    float64   `json:"windowSeconds"`
	CPUS       float64   `json:"cpuSeconds"` // utime+stime over the window
	RSSMeanMiB float64   `json:"rssMeanMiB"`
	RSSMaxMiB  float64   `json:"rssMaxMiB"`
	// AnonMeanMiB is RssAnon's mean: the memory the process allocated
	// (heap, stacks), without the pages of its binary it has mapped.
	AnonMeanMiB float64 `json:"anonMeanMiB"`
	Samples     int     `json:"samples"`
	Threads     int     `json:"threads"`
	RuntimeCPUS float64 `json:"runtimeCpuSeconds"` // containerd + shims (+ their reaped children)
	Probes      float64 `json:"probes"`            // prober_probe_total over the window
	Failed      float64 `json:"probesNotSuccessful"`
	Load1       float64 `json:"load1"` // the machine's 1-minute load average at the window's end
}

// cpuTicks is utime+stime of a process and, with children, also the
// cutime+cstime of the children it reaped.
func cpuTicks(pid int, children bool) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := 2
	if children {
		n = 4
	}
	var t int64
	for _, v := range f[11 : 11+n] {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		t += x
	}
	return t, nil
}

// statusKB reads a "Key: N kB" line (or a bare number) of /proc/PID/status.
func statusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == key {
			fs := strings.Fields(v)
			if len(fs) == 0 {
				break
			}
			return strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}

// runtimePIDs are containerd and the shims whose -address is its socket.
func runtimePIDs(containerd int, socket string) []int {
	pids := []int{containerd}
	if socket == "" {
		return pids
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasSuffix(args[0], "containerd-shim-runc-v2") {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == socket {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// runtimeTicks sums the CPU of the runtime's processes that are alive.
func runtimeTicks(pids []int) map[int]int64 {
	m := map[int]int64{}
	for _, p := range pids {
		if t, err := cpuTicks(p, true); err == nil {
			m[p] = t
		}
	}
	return m
}

// probeCounts sums prober_probe_total, and the series whose result is not
// "successful", of a Prometheus text exposition.
func probeCounts(url string) (total, failed float64, err error) {
	body, err := get(url)
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "prober_probe_total{") {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		fs := strings.Fields(line[i+1:])
		if len(fs) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			continue
		}
		found = true
		total += v
		if !strings.Contains(line[:i], `result="successful"`) {
			failed += v
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("%s: no prober_probe_total series", url)
	}
	return total, failed, nil
}

func measure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ExitOnError)
	label := fs.String("label", "", "kubelet or agent")
	pid := fs.Int("pid", 0, "the prober's PID")
	ctrd := fs.Int("containerd-pid", 0, "containerd's PID (for the runtime's CPU; 0: not measured)")
	socket := fs.String("socket", "", "containerd's socket (its shims name it)")
	metrics := fs.String("metrics", "", "the prober's /metrics/probes URL (empty: probes not counted)")
	settle := fs.Duration("settle", 20*time.Second, "wait before the window")
	window := fs.Duration("window", 60*time.Second, "measured window")
	interval := fs.Duration("interval", time.Second, "RSS sampling interval")
	out := fs.String("out", "", "JSON result file")
	_ = fs.Parse(args)
	if *pid == 0 || *out == "" {
		return errors.New("measure needs -pid and -out")
	}
	alive := func() error {
		if _, err := cpuTicks(*pid, false); err != nil {
			return fmt.Errorf("%s (PID %d) is gone: %w", *label, *pid, err)
		}
		return nil
	}
	fmt.Fprintf(os.Stderr, "benchkubelet: %s PID %d: settling %s, then measuring %s\n", *label, *pid, *settle, *window)
	time.Sleep(*settle)
	if err := alive(); err != nil {
		return err
	}

	var rt0 map[int]int64
	if *ctrd != 0 {
		rt0 = runtimeTicks(runtimePIDs(*ctrd, *socket))
	}
	var p0, f0 float64
	var err error
	if *metrics != "" {
		if p0, f0, err = probeCounts(*metrics); err != nil {
			return err
		}
	}
	c0, err := cpuTicks(*pid, false)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var rss, anon []float64
	tick := time.NewTicker(*interval)
	end := t0.Add(*window)
	for {
		kb, err := statusKB(*pid, "VmRSS")
		if err != nil {
			return fmt.Errorf("%s (PID %d) is gone mid-window: %w", *label, *pid, err)
		}
		rss = append(rss, float64(kb)/1024)
		if kb, err = statusKB(*pid, "RssAnon"); err == nil {
			anon = append(anon, float64(kb)/1024)
		}
		if !time.Now().Add(*interval).Before(end) {
			break
		}
		<-tick.C
	}
	tick.Stop()
	time.Sleep(time.Until(end))
	c1, err := cpuTicks(*pid, false)
	if err != nil {
		return fmt.Errorf("%s (PID %d) is gone at the end of the window: %w", *label, *pid, err)
	}
	t1 := time.Now()
	threads, _ := statusKB(*pid, "Threads")
	var load1 float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	ph := Phase{
		Label: *label, PID: *pid, Start: t0, WindowS: t1.Sub(t0).Seconds(),
		CPUS: float64(c1-c0) / clockTicks, Samples: len(rss), Threads: int(threads), Load1: load1,
	}
	for _, r := range rss {
		ph.RSSMeanMiB += r
		ph.RSSMaxMiB = math.Max(ph.RSSMaxMiB, r)
	}
	ph.RSSMeanMiB /= float64(len(rss))
	for _, a := range anon {
		ph.AnonMeanMiB += a / float64(len(anon))
	}
	if *metrics != "" {
		p1, f1, err := probeCounts(*metrics)
		if err != nil {
			return err
		}
		ph.Probes, ph.Failed = p1-p0, f1-f0
	}
	if *ctrd != 0 {
		// Processes alive at both ends: a shim that came or went in the
		// window would count its whole life or nothing.
		rt1 := runtimeTicks(runtimePIDs(*ctrd, *socket))
		var d int64
		for p, t := range rt1 {
			if t0, ok := rt0[p]; ok {
				d += t - t0
			}
		}
		ph.RuntimeCPUS = float64(d) / clockTicks
	}
	b, _ := json.MarshalIndent(ph, "", "  ")
	fmt.Fprintf(os.Stderr, "benchkubelet: %s: CPU %.2f s in %.1f s, RSS mean %.1f MiB max %.1f MiB, probes %.0f (%.0f not successful), runtime CPU %.2f s\n",
		ph.Label, ph.CPUS, ph.WindowS, ph.RSSMeanMiB, ph.RSSMaxMiB, ph.Probes, ph.Failed, ph.RuntimeCPUS)
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

// ---------------------------------------------------------------- report

const (
	beginMarker = "<!-- kubelet:begin (written by make bench-kubelet) -->"
	endMarker   = "<!-- kubelet:end -->"
	section     = "## Beside kubelet (issue 15)"
	// Targets of issue 15: the agent's CPU and RSS against kubelet's.
	targetRatio = 0.25
)

func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	dir := fs.String("dir", "", "directory of run-N-kubelet.json and run-N-agent.json")
	runs := fs.Int("runs", 3, "runs")
	md := fs.String("md", "docs/performance.md", "file to rewrite between the kubelet markers")
	command := fs.String("command", "make bench-kubelet", "the reproduce command")
	goVersion := fs.String("go", runtime.Version(), "go version the agent was built with")
	kubeletVersion := fs.String("kubelet-version", "v1.36.3", "kubelet's version")
	kubeletV := fs.String("kubelet-v", "0", "kubelet's -v")
	pods := fs.Int("pods", 10, "pods")
	probesPerPod := fs.Int("probes-per-pod", 2, "probes per pod")
	period := fs.Float64("period", 2, "probe period, seconds")
	timeout := fs.Int("timeout", 5, "probe timeout, seconds")
	settle := fs.Duration("settle", 20*time.Second, "settle before each window")
	image := fs.String("image", "localhost/busybox:test", "the pods' image")
	agentVersion := fs.String("agent-version", "", "cri-prober's version (bin/cri-prober version)")
	_ = fs.Parse(args)

	type run struct{ k, a Phase }
	var rs []run
	for i := 1; i <= *runs; i++ {
		var r run
		for _, p := range []struct {
			name string
			ph   *Phase
		}{{"kubelet", &r.k}, {"agent", &r.a}} {
			b, err := os.ReadFile(filepath.Join(*dir, fmt.Sprintf("run-%d-%s.json", i, p.name)))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, p.ph); err != nil {
				return err
			}
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return errors.New("no runs")
	}

	window := rs[0].k.WindowS
	nominal := func(ph Phase) float64 { // probes due in the window
		return float64(*pods**probesPerPod) * ph.WindowS / *period
	}
	per60 := func(ph Phase) float64 { return ph.CPUS * 60 / ph.WindowS }
	msPerProbe := func(ph Phase) float64 { return 1000 * ph.CPUS / nominal(ph) }

	var b strings.Builder
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(&b, "Measured by `%s` on %s (%s, nproc %d, kernel %s, %s), %s.\n\n",
		*command, host, runtime.GOARCH, runtime.NumCPU(), strings.TrimSpace(string(kernel)), *goVersion,
		rs[0].k.Start.Format("2006-01-02"))
	fmt.Fprintf(&b, "The same %d pods (one `%s` container each: busybox httpd, an exec liveness probe `cat` and an HTTP\n", *pods, *image)
	fmt.Fprintf(&b, "readiness probe, both every %.0f s with a %d s timeout, always passing; %d probes due per %.0f s window) are\n",
		*period, *timeout, int(nominal(rs[0].k)+0.5), window)
	fmt.Fprintf(&b, "probed first by a real kubelet %s (built from the Go module proxy, standalone: static pods, no API server,\n", *kubeletVersion)
	agent := "cri-prober"
	if *agentVersion != "" {
		agent += " " + *agentVersion
	}
	fmt.Fprintf(&b, "`-v=%s`), then, with kubelet stopped and its pods removed, by `cri-prober run --pod-manifests` (%s,\n", *kubeletV, agent)
	b.WriteString("`make build`) on the same Pod YAML for pods made with crictl (own PID namespace per container, as kubelet's),\n")
	b.WriteString("on one private containerd.\n")
	fmt.Fprintf(&b, "Each window starts %s s after all pods are ready. CPU is the process's utime+stime; RSS is VmRSS sampled every\n",
		strconv.FormatFloat(settle.Seconds(), 'f', -1, 64))
	b.WriteString("second. \"Probes counted\" is `prober_probe_total` on each one's `/metrics/probes` over the window (not successful in\n")
	b.WriteString("brackets); \"runtime CPU\" is containerd and its shims (with the `runc exec`s they reaped) over the same window:\n")
	b.WriteString("the work the probes cause outside the prober, which should be about equal in both. \"Load\" is the machine's\n")
	b.WriteString("1-minute load average at each window's end (2 cores, shared with other work). \"Anon\" is RssAnon, the memory\n")
	b.WriteString("each allocated (heap, stacks); the rest of RSS is the pages of its own binary it has mapped, which grow with\n")
	b.WriteString("the binary's size (kubelet's is 121 MB, the agent's 35 MB).\n\n")

	b.WriteString("| run | CPU s per 60 s kubelet / agent | ms CPU per probe kubelet / agent | CPU agent/kubelet | RSS MiB mean (max) kubelet | RSS MiB mean (max) agent | RSS agent/kubelet | anon MiB kubelet / agent | anon agent/kubelet | probes counted kubelet / agent | runtime CPU s kubelet / agent | load kubelet / agent |\n")
	b.WriteString("|---:|---|---|---:|---|---|---:|---|---:|---|---|---|\n")
	var cpuR, rssR, anonR, kCPU, aCPU, kMs, aMs, kRSS, aRSS []float64
	for i, r := range rs {
		cr := r.a.CPUS / r.k.CPUS
		rr := r.a.RSSMeanMiB / r.k.RSSMeanMiB
		cpuR, rssR = append(cpuR, cr), append(rssR, rr)
		kCPU, aCPU = append(kCPU, per60(r.k)), append(aCPU, per60(r.a))
		kMs, aMs = append(kMs, msPerProbe(r.k)), append(aMs, msPerProbe(r.a))
		kRSS, aRSS = append(kRSS, r.k.RSSMeanMiB), append(aRSS, r.a.RSSMeanMiB)
		ar := math.NaN()
		if r.k.AnonMeanMiB > 0 {
			ar = r.a.AnonMeanMiB / r.k.AnonMeanMiB
			anonR = append(anonR, ar)
		}
		fmt.Fprintf(&b, "| %d | %.2f / %.2f | %.2f / %.2f | %.2f | %.1f (%.1f) | %.1f (%.1f) | %.2f | %.1f / %.1f | %.2f | %.0f (%.0f) / %.0f (%.0f) | %.2f / %.2f | %.1f / %.1f |\n",
			i+1, per60(r.k), per60(r.a), msPerProbe(r.k), msPerProbe(r.a), cr,
			r.k.RSSMeanMiB, r.k.RSSMaxMiB, r.a.RSSMeanMiB, r.a.RSSMaxMiB, rr, r.k.AnonMeanMiB, r.a.AnonMeanMiB, ar,
			r.k.Probes, r.k.Failed, r.a.Probes, r.a.Failed, r.k.RuntimeCPUS, r.a.RuntimeCPUS, r.k.Load1, r.a.Load1)
	}
	if len(rs) > 1 {
		fmt.Fprintf(&b, "| spread (min–max) | %s / %s | %s / %s | %s | %s | %s | %s | | | | | |\n",
			spread(kCPU, 2), spread(aCPU, 2), spread(kMs, 2), spread(aMs, 2), spread(cpuR, 2),
			spread(kRSS, 1), spread(aRSS, 1), spread(rssR, 2))
	}
	b.WriteString("\n")
	target := func(name string, ratios []float64) {
		over := 0
		for _, r := range ratios {
			if r > targetRatio {
				over++
			}
		}
		verdict := "met"
		if over > 0 {
			verdict = fmt.Sprintf("**not met** (%d of %d runs over)", over, len(ratios))
		}
		fmt.Fprintf(&b, "- %s ≤ %.2f× kubelet's: %s× (median; runs %s) — %s.\n", name, targetRatio,
			strconv.FormatFloat(median(ratios), 'f', 2, 64), spread(ratios, 2), verdict)
	}
	target("agent CPU", cpuR)
	target("agent RSS (mean)", rssR)
	if len(anonR) > 0 {
		fmt.Fprintf(&b, "- of which allocated memory (RssAnon): %s× kubelet's (median; runs %s).\n",
			strconv.FormatFloat(median(anonR), 'f', 2, 64), spread(anonR, 2))
	}
	fmt.Fprintf(&b, "\nReproduce: `%s` (as root; `BENCH_KUBELET_RUNS=N`, default 3; builds kubelet once into /var/cache/cri-prober,\n", *command)
	b.WriteString("about 4 minutes with a warm module cache). The machine is shared: figures move from run to run with other load.\n")

	return rewrite(*md, beginMarker, endMarker, section, b.String())
}

func spread(v []float64, prec int) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return strconv.FormatFloat(lo, 'f', prec, 64) + "–" + strconv.FormatFloat(hi, 'f', prec, 64)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rewrite replaces what is between the markers of file md with body, or
// appends the section with its markers when they are missing. Nothing else
// of the file changes.
func rewrite(md, beginMarker, endMarker, section, body string) error {
	old, err := os.ReadFile(md)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s := string(old)
	block := beginMarker + "\n" + body + endMarker
	i := strings.Index(s, beginMarker)
	j := strings.Index(s, endMarker)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + s[j+len(endMarker):]
	case i < 0 && j < 0:
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if s != "" {
			s += "\n"
		}
		s += section + "\n\n" + block + "\n"
	default:
		return fmt.Errorf("%s: the markers %q are broken (begin at %d, end at %d); fix them by hand", md, beginMarker, i, j)
	}
	// Write beside and rename, so that a reader never sees half a file.
	tmp := md + ".bench-kubelet.tmp"
	mode := os.FileMode(0o644)
	if st, err := os.Stat(md); err == nil {
		mode = st.Mode().Perm()
	}
	if err := os.WriteFile(tmp, []byte(s), mode); err != nil {
		return err
	}
	return os.Rename(tmp, md)
}
