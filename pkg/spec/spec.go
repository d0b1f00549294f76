// Package spec turns what users give (Pod manifests, CRI annotations) into
// probe specs: decoded strictly, defaulted as the API server defaults, and
// validated with the API server's rules, every problem reported with the
// file, pod, container and field it concerns; static pods made as kubelet
// makes them (Static), and kubelet's restart policies (policy.go). A file's
// bytes are decoded here (DecodeFile) and files are joined under one rule
// (Combine: a pod defined twice is an error); reading them, the manifest
// directory and its watch and trust rules are pkg/manifests'.
//
// It is pure: it reads no file and knows nothing of the runtime. Beside
// Kubernetes' API types it imports results' probe types and the leaves
// pkg/bounded (cutting what a manifest echoes) and pkg/credential (which
// header names carry credentials). Two things reach outside: a pod's File
// is made absolute against the working directory, and a Static without
// Now stamps kubernetes.io/config.seen with the clock.
package spec

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// KubeletMinorVersion is the kubelet release whose behaviour is the
// contract (v1.36.3): its probe and lifecycle User-Agents carry it.
const KubeletMinorVersion = "1.36"

// Pod is the part of a Pod that the agent honours: its probes, restart
// policies, grace periods, init containers and lifecycle hooks.
type Pod struct {
	// Source says where the spec came from, for messages: "pods.yaml:12"
	// (file and first line of the document) or "annotations".
	Source string
	// File is the manifest's file, absolute ("" for annotations and data
	// read from standard input): a static pod's identity and record.
	File          string
	Namespace     string
	Name          string
	UID           string // empty: match any sandbox with this namespace and name
	RestartPolicy corev1.RestartPolicy
	// TerminationGracePeriodSeconds is the pod's grace period (default 30).
	TerminationGracePeriodSeconds int64
	// ProbeNetwork is metadata.annotations[cri-prober.io/probe-network]:
	// "", ProbeNetworkNode or ProbeNetworkPod.
	ProbeNetwork string
	// Containers are every container of the pod in kubelet's order: the
	// init containers (regular ones and sidecars) as listed, then the
	// regular containers.
	Containers []Container
	// Object is the whole Pod as decoded and defaulted: an owned pod's
	// sandbox and containers are made from it. Never modified.
	Object *corev1.Pod
	// Warnings are what the pod does that its author may not expect
	// (readiness gates nothing sets).
	Warnings []*Error
}

// Kind is a container's role in its pod, as kubelet tells them apart.
type Kind int

const (
	// Regular is a container of spec.containers.
	Regular Kind = iota
	// Init is an init container: it runs to completion before the next.
	Init
	// Sidecar is an init container with restartPolicy Always: it starts
	// before the next one and keeps running beside the regular containers.
	Sidecar
)

func (k Kind) String() string {
	switch k {
	case Init:
		return "init"
	case Sidecar:
		return "sidecar"
	default:
		return "regular"
	}
}

// IsInit reports whether the container is one of spec.initContainers.
func (k Kind) IsInit() bool { return k != Regular }

// Container is one container of a pod: its role, probes (defaulted), ports
// (for named ports), environment (for $(VAR) in exec commands), its own
// restart policy and rules, and lifecycle hooks.
type Container struct {
	Name  string
	Kind  Kind
	Ports []corev1.ContainerPort
	Env   []corev1.EnvVar
	// RestartPolicy and RestartPolicyRules are the container's own (nil
	// and none: the pod's restartPolicy decides). A sidecar's policy is
	// Always.
	RestartPolicy      *corev1.ContainerRestartPolicy
	RestartPolicyRules []corev1.ContainerRestartRule
	// Lifecycle holds the postStart and preStop handlers (nil: none).
	Lifecycle *corev1.Lifecycle
	// Warnings are problems that make part of the container inert without
	// invalidating it (a probe naming a port the container does not
	// declare errors at every run, as under kubelet).
	Warnings []*Error

	Liveness  *corev1.Probe
	Readiness *corev1.Probe
	Startup   *corev1.Probe
	// Extensions are cri-prober's additions to the probes, by type
	// (ExtensionsAnnotation); nil for kubelet's behaviour.
	Extensions map[results.ProbeType]*Extensions
}

// Extension returns the additions to the probe of type t, or nil.
func (c *Container) Extension(t results.ProbeType) *Extensions {
	return c.Extensions[t]
}

// Probe returns the container's probe of type t, or nil.
func (c *Container) Probe(t results.ProbeType) *corev1.Probe {
	switch t {
	case results.Liveness:
		return c.Liveness
	case results.Readiness:
		return c.Readiness
	default:
		return c.Startup
	}
}

// HasProbes reports whether the container has any probe.
func (c *Container) HasProbes() bool {
	return c.Liveness != nil || c.Readiness != nil || c.Startup != nil
}

// Container returns the probed container with the given name.
func (p *Pod) Container(name string) (*Container, bool) {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i], true
		}
	}
	return nil, false
}

// Error is one problem in what a user gave.
type Error struct {
	Source    string // file:line (or file), or "annotations"
	Namespace string
	Pod       string
	Container string
	Field     string // e.g. spec.containers[0].livenessProbe.periodSeconds
	Detail    string // e.g. Invalid value: -1: must be greater than or equal to 0
	// Reason is the event reason a warning is told with when it is not
	// about a probe ("": InvalidProbeConfig, the reason of a probe's
	// problem); it is not part of the text.
	Reason string
}

// maxErrorText bounds an Error's text, whatever the config it is about
// holds (a name, a key, a value quoted): each problem is in every
// /api/v1/pods response, status line, event and log record while it lasts.
const maxErrorText = bounded.Message

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	switch {
	case e.Pod != "" && e.Namespace != "":
		fmt.Fprintf(&b, ": pod %s/%s", e.Namespace, e.Pod)
	case e.Pod != "":
		fmt.Fprintf(&b, ": pod %s", e.Pod) // a sandbox config without a namespace
	}
	if e.Container != "" {
		fmt.Fprintf(&b, ": container %s", e.Container)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Detail)
	return bounded.Within(b.String(), maxErrorText)
}

// Defaults the API server applies to a Probe.
const (
	DefaultPeriodSeconds     = 10
	DefaultTimeoutSeconds    = 1
	DefaultSuccessThreshold  = 1
	DefaultFailureThreshold  = 3
	DefaultGracePeriodSecond = 30
)

// DefaultProbe applies the API server's defaults: zero period, timeout and
// thresholds take their defaults (so an explicit 0 means the default, as in
// Kubernetes), and an HTTP probe gets path "/" and scheme HTTP.
func DefaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = DefaultPeriodSeconds
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = DefaultSuccessThreshold
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = DefaultFailureThreshold
	}
	defaultHTTPGet(p.HTTPGet)
}

// defaultHTTPGet applies the API server's defaults to an HTTPGetAction (of
// a probe or a lifecycle handler): path "/" and scheme HTTP.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultPod applies the API server's pod defaults that probing depends on.
func defaultPod(pod *corev1.Pod) {
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		g := int64(DefaultGracePeriodSecond)
		pod.Spec.TerminationGracePeriodSeconds = &g
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			c := &list[i]
			DefaultProbe(c.LivenessProbe)
			DefaultProbe(c.ReadinessProbe)
			DefaultProbe(c.StartupProbe)
			if l := c.Lifecycle; l != nil {
				for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
					if h != nil {
						defaultHTTPGet(h.HTTPGet)
					}
				}
			}
			for j := range c.Ports {
				if c.Ports[j].Protocol == "" {
					c.Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
}

// isSidecar reports whether an init container is restartable.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// PreStop returns the container's preStop handler, or nil.
func (c *Container) PreStop() *corev1.LifecycleHandler {
	if c == nil || c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PreStop
}

// PostStart returns the container's postStart handler, or nil.
func (c *Container) PostStart() *corev1.LifecycleHandler {
	if c == nil || c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PostStart
}

// fromPod keeps what the agent honours of a defaulted, valid pod.
func fromPod(source string, pod *corev1.Pod) *Pod {
	p := &Pod{
		Source:                        source,
		Namespace:                     pod.Namespace,
		Name:                          pod.Name,
		UID:                           string(pod.UID),
		RestartPolicy:                 pod.Spec.RestartPolicy,
		TerminationGracePeriodSeconds: *pod.Spec.TerminationGracePeriodSeconds,
		ProbeNetwork:                  pod.Annotations[ProbeNetworkAnnotation],
		Object:                        pod,
	}
	add := func(c *corev1.Container, kind Kind) {
		p.Containers = append(p.Containers, Container{
			Name: c.Name, Kind: kind, Ports: c.Ports, Env: c.Env,
			RestartPolicy: c.RestartPolicy, RestartPolicyRules: c.RestartPolicyRules, Lifecycle: c.Lifecycle,
			Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe,
		})
	}
	for i := range pod.Spec.InitContainers {
		kind := Init
		if isSidecar(&pod.Spec.InitContainers[i]) {
			kind = Sidecar
		}
		add(&pod.Spec.InitContainers[i], kind)
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], Regular)
	}
	return p
}
