package api

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// KubeState is kube-state-metrics' pod and container series
// (internal/store/pod.go; docs/metrics/workload/pod-metrics.md) made from
// the pods' report, the one /api/v1/pods shows, at scrape time: the same
// names, labels and values kube-state-metrics would give for the Pod
// objects a kubelet on this node would write, so that rules and dashboards
// made for it (the kubernetes-mixin's KubePodCrashLooping, KubePodNotReady,
// KubeContainerWaiting) work with only their job selector changed. Served
// on /metrics/kube-state, apart from the agent's own series.
//
// Regular containers are kube_pod_container_*, init containers and
// sidecars kube_pod_init_container_* (kubelet's containerStatuses and
// initContainerStatuses). Nothing is kept between scrapes: a pod that goes
// takes its series with it, as in kube-state-metrics.
//
// It writes Prometheus's text format itself, family by family, as
// kube-state-metrics does: client_golang's const metrics cost about 20
// allocations a series (label pairs, sorting, the registry's checks),
// which at 1,000 pods (30,000 series) made a scrape take 150 ms of CPU;
// this takes about 9 ms (BenchmarkKubeState1000Pods).
type KubeState struct {
	pods       Reporter
	node       string
	hostIP     string
	namespaces map[string]bool // nil: every namespace
}

// KubeStateOptions are what the series say of the node, and which pods
// they cover.
type KubeStateOptions struct {
	// NodeName is kube_pod_info's node (spec.nodeName); HostIP its host_ip.
	NodeName, HostIP string
	// Namespaces limits the series to the pods of these namespaces
	// (kube-state-metrics' --namespaces); empty: every pod.
	Namespaces []string
}

// NewKubeState returns the collector of the pods of r.
func NewKubeState(r Reporter, opts KubeStateOptions) *KubeState {
	k := &KubeState{pods: r, node: opts.NodeName, hostIP: opts.HostIP}
	for _, ns := range opts.Namespaces {
		if ns = strings.TrimSpace(ns); ns != "" {
			if k.namespaces == nil {
				k.namespaces = map[string]bool{}
			}
			k.namespaces[ns] = true
		}
	}
	return k
}

var _ http.Handler = (*KubeState)(nil)

// ksmFamily is one of kube-state-metrics' series: its name, help and
// type, and the samples of one pod.
type ksmFamily struct {
	name, help, typ string
	pod             func(w *ksmWriter, k *KubeState, p *pods.PodReport)
}

// ksmFamilies are the series, in kube-state-metrics' order of names (its
// help texts); the container series come twice, kube_pod_container_* for
// regular containers and kube_pod_init_container_* for init containers
// and sidecars.
var ksmFamilies = func() []ksmFamily {
	fs := []ksmFamily{
		{"kube_pod_info", "Information about pod.", "gauge", podInfo},
		{"kube_pod_owner", "Information about the Pod's owner.", "gauge", podOwner},
		{"kube_pod_start_time", "Start time in unix timestamp for a pod.", "gauge", podStartTime},
		{"kube_pod_status_phase", "The pods current phase.", "gauge", podPhase},
		{"kube_pod_status_ready", "Describes whether the pod is ready to serve requests.", "gauge", podCondition(corev1.PodReady)},
		{"kube_pod_status_scheduled", "Describes the status of the scheduling process for the pod.", "gauge", podCondition(corev1.PodScheduled)},
	}
	return append(append(fs, containerFamilies("kube_pod_container", "container", false)...), containerFamilies("kube_pod_init_container", "init container", true)...)
}()

// KubeStateSeries are the names of the series KubeState writes.
func KubeStateSeries() []string {
	names := make([]string, 0, len(ksmFamilies))
	for _, f := range ksmFamilies {
		names = append(names, f.name)
	}
	return names
}

func podInfo(w *ksmWriter, k *KubeState, p *pods.PodReport) {
	var byKind, byName string
	for _, o := range p.Owners {
		if o.Controller != nil && *o.Controller {
			byKind, byName = o.Kind, o.Name
			break
		}
	}
	w.sample(p, 1, "host_ip", k.hostIP, "pod_ip", p.IP, "node", k.node, "created_by_kind", byKind, "created_by_name", byName,
		"priority_class", p.PriorityClassName, "host_network", strconv.FormatBool(p.HostNetwork))
}

// podOwner is one series per owner reference, and one with empty labels
// for a pod without any (kube-state-metrics' way, which the mixin's
// KubePodNotReady joins on).
func podOwner(w *ksmWriter, _ *KubeState, p *pods.PodReport) {
	if len(p.Owners) == 0 {
		w.sample(p, 1, "owner_kind", "", "owner_name", "", "owner_is_controller", "")
	}
	for _, o := range p.Owners {
		w.sample(p, 1, "owner_kind", o.Kind, "owner_name", o.Name, "owner_is_controller", strconv.FormatBool(o.Controller != nil && *o.Controller))
	}
}

func podStartTime(w *ksmWriter, _ *KubeState, p *pods.PodReport) {
	if !p.StartTime.IsZero() {
		w.sample(p, float64(p.StartTime.Unix()))
	}
}

var ksmPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown, corev1.PodRunning}

func podPhase(w *ksmWriter, _ *KubeState, p *pods.PodReport) {
	if p.Phase == "" {
		return
	}
	for _, ph := range ksmPhases {
		w.sample(p, boolValue(p.Phase == ph), "phase", string(ph))
	}
}

// podCondition is a condition's series: true, false and unknown, 1 for
// the condition's status (none without the condition).
func podCondition(t corev1.PodConditionType) func(*ksmWriter, *KubeState, *pods.PodReport) {
	return func(w *ksmWriter, _ *KubeState, p *pods.PodReport) {
		for _, c := range p.Conditions {
			if c.Type != t {
				continue
			}
			for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
				w.sample(p, boolValue(c.Status == s), "condition", strings.ToLower(string(s)))
			}
		}
	}
}

// containerFamilies are the container series of prefix, for init
// containers (and sidecars) or regular ones, from each container's status
// as kubelet's API shows it: state, last state, ready, restart count.
func containerFamilies(prefix, what string, init bool) []ksmFamily {
	each := func(f func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport)) func(*ksmWriter, *KubeState, *pods.PodReport) {
		return func(w *ksmWriter, _ *KubeState, p *pods.PodReport) {
			for i := range p.Containers {
				if c := &p.Containers[i]; (c.Kind != spec.Regular) == init {
					f(w, p, c)
				}
			}
		}
	}
	return []ksmFamily{
		{prefix + "_state_started", "Start time in unix timestamp for a pod " + what + ".", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if st := c.Status.State; st.Running != nil {
				w.sample(p, float64(st.Running.StartedAt.Unix()), "container", c.Name)
			} else if st.Terminated != nil {
				w.sample(p, float64(st.Terminated.StartedAt.Unix()), "container", c.Name)
			}
		})},
		{prefix + "_status_last_terminated_exitcode", "Describes the exit code for the last " + what + " in terminated state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if last := c.Status.LastState.Terminated; last != nil {
				w.sample(p, float64(last.ExitCode), "container", c.Name)
			}
		})},
		{prefix + "_status_last_terminated_reason", "Describes the last reason the " + what + " was in terminated state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if last := c.Status.LastState.Terminated; last != nil {
				w.sample(p, 1, "container", c.Name, "reason", last.Reason)
			}
		})},
		{prefix + "_status_last_terminated_timestamp", "Last terminated time for a pod " + what + " in unix timestamp.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if last := c.Status.LastState.Terminated; last != nil {
				w.sample(p, float64(last.FinishedAt.Unix()), "container", c.Name)
			}
		})},
		{prefix + "_status_ready", "Describes whether the " + what + "s readiness check succeeded.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			w.sample(p, boolValue(c.Ready), "container", c.Name)
		})},
		{prefix + "_status_restarts_total", "The number of " + what + " restarts per container.", "counter", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			w.sample(p, float64(c.RestartCount), "container", c.Name)
		})},
		{prefix + "_status_running", "Describes whether the " + what + " is currently in running state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			w.sample(p, boolValue(c.Status.State.Running != nil), "container", c.Name)
		})},
		{prefix + "_status_terminated", "Describes whether the " + what + " is currently in terminated state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			w.sample(p, boolValue(c.Status.State.Terminated != nil), "container", c.Name)
		})},
		{prefix + "_status_terminated_reason", "Describes the reason the " + what + " is currently in terminated state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if st := c.Status.State.Terminated; st != nil {
				w.sample(p, 1, "container", c.Name, "reason", st.Reason)
			}
		})},
		{prefix + "_status_waiting", "Describes whether the " + what + " is currently in waiting state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			w.sample(p, boolValue(c.Status.State.Waiting != nil), "container", c.Name)
		})},
		{prefix + "_status_waiting_reason", "Describes the reason the " + what + " is currently in waiting state.", "gauge", each(func(w *ksmWriter, p *pods.PodReport, c *pods.ContainerReport) {
			if st := c.Status.State.Waiting; st != nil {
				w.sample(p, 1, "container", c.Name, "reason", st.Reason)
			}
		})},
	}
}

// ServeHTTP writes the series of every pod of the report in Prometheus's
// text format (0.0.4). A pod is one namespace, name and UID: should the
// report hold two (sandboxes of one pod kept apart), the first is taken,
// so that no series is written twice.
func (k *KubeState) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	reports := k.pods.Report()
	keep := reports[:0:0]
	seen := make(map[[3]string]bool, len(reports))
	for _, p := range reports {
		key := [3]string{p.Namespace, p.Name, p.UID}
		if seen[key] || k.namespaces != nil && !k.namespaces[p.Namespace] {
			continue
		}
		seen[key] = true
		keep = append(keep, p)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriterSize(w, 64<<10)
	k.write(bw, keep)
	bw.Flush() //nolint:errcheck // the client went away
}

func (k *KubeState) write(bw *bufio.Writer, reports []pods.PodReport) {
	wr := &ksmWriter{w: bw}
	for _, f := range ksmFamilies {
		wr.name = f.name
		bw.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.typ + "\n") //nolint:errcheck // seen at Flush
		for i := range reports {
			f.pod(wr, k, &reports[i])
		}
	}
}

// ksmWriter writes the samples of one family.
type ksmWriter struct {
	w    *bufio.Writer
	name string
	buf  []byte
}

// sample writes one sample of the family: the pod's labels, then the
// label pairs kv (name, value, …), then v.
func (w *ksmWriter) sample(p *pods.PodReport, v float64, kv ...string) {
	b := append(w.buf[:0], w.name...)
	b = appendLabel(append(b, '{'), "namespace", p.Namespace)
	b = appendLabel(append(b, ','), "pod", p.Name)
	b = appendLabel(append(b, ','), "uid", p.UID)
	for i := 0; i+1 < len(kv); i += 2 {
		b = appendLabel(append(b, ','), kv[i], kv[i+1])
	}
	b = append(b, '}', ' ')
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	b = append(b, '\n')
	w.w.Write(b) //nolint:errcheck // seen at Flush
	w.buf = b
}

// appendLabel appends name="value", the value escaped as the text format
// wants (backslash, double quote, line feed).
func appendLabel(b []byte, name, value string) []byte {
	b = append(append(b, name...), '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
