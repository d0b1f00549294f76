package main

// startup measures how long pods take to come up: from their manifests
// written into a static pod directory (kubelet's, or the agent's
// --static-pod-path) to each pod's container running (its StartedAt, as
// the runtime says) and to the pod Ready (as kubelet's /pods or the
// agent's /api/v1/pods first says, polled every pollEvery); or, for the
// floor, the same sandboxes and containers (kubelet's configs of the same
// manifests) made directly through CRI, all at once, and Ready when the
// container's HTTP server first answers.
//
//	benchkubelet startup -mode kubelet|agent -manifests DIR -static DIR -url URL -endpoint unix://SOCK -out F
//	benchkubelet startup -mode floor -manifests DIR -node NAME -root-dir DIR -logs DIR -cgroup-root /R -endpoint unix://SOCK -out F
//	benchkubelet startup-report -dir DIR -md docs/performance.md -command '…'

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/node"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const pollEvery = 20 * time.Millisecond

// startupResult is one measurement: per pod, seconds from the start to
// its container running and to its pod ready.
type startupResult struct {
	Mode    string             `json:"mode"`
	Pods    int                `json:"pods"`
	Running map[string]float64 `json:"running"`
	Ready   map[string]float64 `json:"ready"`
	// The floor's steps: when each pod's sandbox and container were made.
	Sandbox map[string]float64 `json:"sandbox,omitempty"`
	Created map[string]float64 `json:"created,omitempty"`
}

func startup(args []string) error {
	fs := flag.NewFlagSet("startup", flag.ExitOnError)
	mode := fs.String("mode", "", "kubelet, agent or floor")
	manifests := fs.String("manifests", "", "kubelet, agent: the manifests to write into -static")
	static := fs.String("static", "", "kubelet, agent: the static pod directory")
	url := fs.String("url", "", "kubelet: its /pods; agent: its /api/v1/pods")
	endpoint := fs.String("endpoint", "", "the CRI endpoint")
	nodeName := fs.String("node", "", "floor: the node's name, as kubelet's --hostname-override")
	rootDir := fs.String("root-dir", "", "floor: a root directory, as kubelet's")
	logs := fs.String("logs", "", "floor: the pods' log directory")
	cgroupRoot := fs.String("cgroup-root", "", "floor: the pods' cgroup root, as kubelet's")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after")
	out := fs.String("out", "", "the result's JSON file")
	_ = fs.Parse(args)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client, err := cri.Dial(ctx, *endpoint)
	if err != nil {
		return err
	}
	defer client.Close()
	var r *startupResult
	switch *mode {
	case "kubelet", "agent":
		r, err = startupStatic(ctx, client, *mode, *manifests, *static, *url)
	case "floor":
		var n podconfig.Node
		n, err = node.Discover(node.Options{HostnameOverride: *nodeName, RootDir: *rootDir, CgroupRoot: path.Join(*cgroupRoot, "kubepods")})
		if err != nil {
			return err
		}
		n.PodLogsDir = *logs
		r, err = startupFloor(ctx, client, *manifests, n)
	default:
		return fmt.Errorf("-mode %q: kubelet, agent or floor", *mode)
	}
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchkubelet: %s, %d pods: all running %.2fs, all ready %.2fs\n", r.Mode, r.Pods, maxOf(r.Running), maxOf(r.Ready))
	if r.Sandbox != nil {
		fmt.Fprintf(os.Stderr, "benchkubelet: %s, mean: sandbox made %.2fs, container created %.2fs, running %.2fs\n", r.Mode, meanOf(r.Sandbox), meanOf(r.Created), meanOf(r.Running))
	}
	return os.WriteFile(*out, data, 0o644)
}

// startupStatic writes the manifests into the static directory (each
// written beside and renamed, as kubelet's docs ask) and follows the pods.
func startupStatic(ctx context.Context, client *cri.Client, mode, manifests, static, url string) (*startupResult, error) {
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s: %v", manifests, err)
	}
	data := map[string][]byte{}
	for _, f := range files {
		if data[f], err = os.ReadFile(f); err != nil {
			return nil, err
		}
	}
	r := &startupResult{Mode: mode, Pods: len(files), Running: map[string]float64{}, Ready: map[string]float64{}}
	t0 := time.Now()
	for _, f := range files {
		tmp := filepath.Join(static, "."+filepath.Base(f))
		if err := os.WriteFile(tmp, data[f], 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, filepath.Join(static, filepath.Base(f))); err != nil {
			return nil, err
		}
	}
	for len(r.Ready) < r.Pods || len(r.Running) < r.Pods {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %d of %d pods running, %d ready: %w", mode, len(r.Running), r.Pods, len(r.Ready), err)
		}
		now := time.Now()
		ready, _, err := readyPods(url, mode)
		if err == nil {
			for _, name := range ready {
				if _, seen := r.Ready[name]; !seen {
					r.Ready[name] = now.Sub(t0).Seconds()
				}
			}
		}
		if err := startedAt(ctx, client, t0, r.Running); err != nil {
			return nil, err
		}
		time.Sleep(pollEvery)
	}
	return r, nil
}

// readyPods are the names of the pods the API says are ready, and how
// many pods it lists.
func readyPods(url, format string) ([]string, int, error) {
	body, err := get(url)
	if err != nil {
		return nil, 0, err
	}
	var names []string
	switch format {
	case "kubelet":
		var l kubeletPods
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, 0, err
		}
		for _, p := range l.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					names = append(names, p.Metadata.Name)
				}
			}
		}
		return names, len(l.Items), nil
	case "agent":
		var l agentPods
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, 0, err
		}
		for _, p := range l.Pods {
			if p.Ready {
				names = append(names, p.Name)
			}
		}
		return names, len(l.Pods), nil
	}
	return nil, 0, fmt.Errorf("unknown format %q (kubelet or agent)", format)
}

// startedAt records, for each pod with a running container not yet
// recorded, when the runtime says it started.
func startedAt(ctx context.Context, client *cri.Client, t0 time.Time, running map[string]float64) error {
	cs, err := client.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return err
	}
	for _, c := range cs {
		pod := c.GetLabels()["io.kubernetes.pod.name"]
		if _, seen := running[pod]; seen || pod == "" {
			continue
		}
		st, err := client.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			continue
		}
		running[pod] = time.Unix(0, st.GetStatus().GetStartedAt()).Sub(t0).Seconds()
	}
	return nil
}

// startupFloor makes the pods of the manifests directly through CRI, all
// at once, with the configs kubelet makes of them (pkg/podconfig, checked
// against kubelet's own functions), and counts a pod ready when its first
// container's HTTP server (port 8080) first answers. What kubelet does
// beside the CRI calls (volumes, files, image checks, events, probes) is
// left out: the floor is the runtime's own time.
func startupFloor(ctx context.Context, client *cri.Client, dir string, node podconfig.Node) (*startupResult, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s: %v", dir, err)
	}
	var objs []*corev1.Pod
	for _, f := range files {
		res := manifests.Load(f, manifests.AsStatic(spec.Static{NodeName: node.Name}))
		if len(res.Errors) > 0 || len(res.Pods) != 1 {
			return nil, fmt.Errorf("%s: %v", f, res.Errors)
		}
		objs = append(objs, res.Pods[0].Object)
	}
	image := objs[0].Spec.Containers[0].Image
	st, err := client.ImageStatus(ctx, image, false)
	if err != nil || st.GetImage() == nil {
		return nil, fmt.Errorf("image %s: %v (import it first)", image, err)
	}
	info := podconfig.ImageInfo{Ref: st.GetImage().GetId(), Username: st.GetImage().GetUsername()}
	if uid := st.GetImage().GetUid(); uid != nil {
		v := uid.GetValue()
		info.UID = &v
	}
	r := &startupResult{Mode: "floor", Pods: len(objs), Running: map[string]float64{}, Ready: map[string]float64{},
		Sandbox: map[string]float64{}, Created: map[string]float64{}}
	var mu sync.Mutex
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, pod := range objs {
		wg.Go(func() {
			steps, err := floorPod(ctx, client, pod, node, info, t0)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", pod.Name, err)
				return
			}
			mu.Lock()
			r.Sandbox[pod.Name], r.Created[pod.Name], r.Running[pod.Name], r.Ready[pod.Name] = steps[0], steps[1], steps[2], steps[3]
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	return r, nil
}

// floorPod makes one pod and returns when (after t0) its sandbox was made,
// its container created, running and answering.
func floorPod(ctx context.Context, client *cri.Client, pod *corev1.Pod, node podconfig.Node, image podconfig.ImageInfo, t0 time.Time) (steps [4]float64, err error) {
	sbCfg, err := podconfig.Sandbox(pod, 0, node)
	if err != nil {
		return steps, err
	}
	if err := os.MkdirAll(sbCfg.GetLogDirectory(), 0o755); err != nil {
		return steps, err
	}
	sb, err := client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		return steps, err
	}
	steps[0] = time.Since(t0).Seconds()
	sbs, err := client.PodSandboxStatus(ctx, sb, false)
	if err != nil {
		return steps, err
	}
	ip := sbs.GetStatus().GetNetwork().GetIp()
	cfg, err := podconfig.Container(podconfig.ContainerInput{Pod: pod, Container: &pod.Spec.Containers[0], PodIP: ip, PodIPs: []string{ip}, Image: image}, node)
	if err != nil {
		return steps, err
	}
	ctr, err := client.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		return steps, err
	}
	steps[1] = time.Since(t0).Seconds()
	if err := client.StartContainer(ctx, ctr); err != nil {
		return steps, err
	}
	cs, err := client.ContainerStatus(ctx, ctr, false)
	if err != nil {
		return steps, err
	}
	steps[2] = time.Unix(0, cs.GetStatus().GetStartedAt()).Sub(t0).Seconds()
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				steps[3] = time.Since(t0).Seconds()
				return steps, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return steps, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func maxOf(m map[string]float64) float64 {
	out := 0.0
	for _, v := range m {
		out = max(out, v)
	}
	return out
}

func meanOf(m map[string]float64) float64 {
	sum := 0.0
	for _, v := range m {
		sum += v
	}
	return sum / float64(max(len(m), 1))
}

func medianOf(m map[string]float64) float64 {
	var v []float64
	for _, x := range m {
		v = append(v, x)
	}
	return median(v)
}

const (
	startupBegin   = "<!-- startup:begin (written by make bench-startup) -->"
	startupEnd     = "<!-- startup:end -->"
	startupSection = "## From a manifest to a Ready pod, beside kubelet (issue 20)"
)

// startupReport writes the runs' results (run-R-N-MODE.json) into md.
func startupReport(args []string) error {
	fs := flag.NewFlagSet("startup-report", flag.ExitOnError)
	dir := fs.String("dir", "", "the results")
	md := fs.String("md", "docs/performance.md", "file to rewrite between the startup markers")
	command := fs.String("command", "make bench-startup", "how to reproduce")
	header := fs.String("header", "", "what was measured, as a paragraph")
	_ = fs.Parse(args)
	files, err := filepath.Glob(filepath.Join(*dir, "run-*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no results in %s", *dir)
	}
	type key struct {
		pods int
		mode string
	}
	all := map[key][]*startupResult{}
	runs := map[string]bool{}
	for _, f := range files {
		var r startupResult
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		all[key{r.Pods, r.Mode}] = append(all[key{r.Pods, r.Mode}], &r)
		runs[strings.SplitN(filepath.Base(f), "-", 3)[1]] = true
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Measured by `%s` on %s (nproc 2), %s, %d runs.\n\n%s\n\n", *command, host, time.Now().UTC().Format("2006-01-02"), len(runs), *header)
	b.WriteString("| pods | | all running (s): kubelet / agent / floor | all Ready (s): kubelet / agent / floor | median pod Ready (s): kubelet / agent / floor |\n|---:|---|---|---|---|\n")
	var sizes []int
	for k := range all {
		if k.mode == "kubelet" {
			sizes = append(sizes, k.pods)
		}
	}
	sort.Ints(sizes)
	med := func(pods int, mode string, f func(*startupResult) float64) float64 {
		var v []float64
		for _, r := range all[key{pods, mode}] {
			v = append(v, f(r))
		}
		return median(v)
	}
	allRunning := func(r *startupResult) float64 { return maxOf(r.Running) }
	allReady := func(r *startupResult) float64 { return maxOf(r.Ready) }
	podReady := func(r *startupResult) float64 { return medianOf(r.Ready) }
	var verdicts []string
	for _, n := range sizes {
		row := func(f func(*startupResult) float64) string {
			return fmt.Sprintf("%.2f / %.2f / %.2f", med(n, "kubelet", f), med(n, "agent", f), med(n, "floor", f))
		}
		fmt.Fprintf(&b, "| %d | median of runs | %s | %s | %s |\n", n, row(allRunning), row(allReady), row(podReady))
		for _, mode := range []string{"kubelet", "agent", "floor"} {
			var each []string
			for _, r := range all[key{n, mode}] {
				each = append(each, fmt.Sprintf("%.2f", maxOf(r.Ready)))
			}
			fmt.Fprintf(&b, "| | %s, all Ready per run | | %s | |\n", mode, strings.Join(each, ", "))
		}
		k, a, fl := med(n, "kubelet", allReady), med(n, "agent", allReady), med(n, "floor", allReady)
		if n == 1 {
			verdicts = append(verdicts, verdict(fmt.Sprintf("1 pod Ready in ≤ 0.5× kubelet's time: %.2f s against %.2f s, %.2f×", a, k, a/k), a <= 0.5*k))
		} else {
			verdicts = append(verdicts, verdict(fmt.Sprintf("%d pods Ready at or below kubelet's time: %.2f s against %.2f s", n, a, k), a <= k))
			verdicts = append(verdicts, verdict(fmt.Sprintf("%d pods running within 1.2× of the floor: %.2f s against %.2f s, %.2f×", n, med(n, "agent", allRunning), med(n, "floor", allRunning), med(n, "agent", allRunning)/med(n, "floor", allRunning)), med(n, "agent", allRunning) <= 1.2*med(n, "floor", allRunning)))
			verdicts = append(verdicts, fmt.Sprintf("- %d pods Ready against the floor (its server's first answer, no probe period): %.2f s against %.2f s, %.2f×.", n, a, fl, a/fl))
		}
	}
	b.WriteString("\n" + strings.Join(verdicts, "\n") + "\n\n")
	fmt.Fprintf(&b, "Reproduce: `%s` (as root; `BENCH_STARTUP_RUNS=N`, default 3).\n", *command)
	return rewrite(*md, startupBegin, startupEnd, startupSection, b.String())
}

func verdict(what string, met bool) string {
	if met {
		return "- " + what + " — met."
	}
	return "- " + what + " — **not met**."
}
