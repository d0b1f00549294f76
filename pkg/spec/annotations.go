package spec

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"
)

// SourceAnnotations is the Source of specs read from CRI annotations.
const SourceAnnotations = "annotations"

// Annotations read from CRI configs, for pods that crictl or a CI harness
// creates without a manifest.
const (
	AnnotationPrefix = "cri-prober.io/"
	// On a container config: a JSON core/v1 Probe.
	LivenessAnnotation  = AnnotationPrefix + "liveness-probe"
	ReadinessAnnotation = AnnotationPrefix + "readiness-probe"
	StartupAnnotation   = AnnotationPrefix + "startup-probe"
	// Written by cri-prober on the containers it re-creates (pkg/cri's
	// AnnotationRestartOf); read by no spec.
	RestartOfAnnotation    = AnnotationPrefix + "restart-of"
	RestartCauseAnnotation = AnnotationPrefix + "restart-cause"
	// On a sandbox config.
	RestartPolicyAnnotation = AnnotationPrefix + "restart-policy"
	GracePeriodAnnotation   = AnnotationPrefix + "termination-grace-period-seconds"
	// On a sandbox config or a manifest's metadata.annotations: where the
	// pod's HTTP, TCP and gRPC probes are dialled from (ProbeNetworkNode or
	// ProbeNetworkPod).
	ProbeNetworkAnnotation = AnnotationPrefix + "probe-network"
)

// Where network probes are dialled from.
const (
	// ProbeNetworkNode: the node's network, to the pod IP (kubelet's way).
	ProbeNetworkNode = "node"
	// ProbeNetworkPod: inside the pod's network namespace, to 127.0.0.1
	// unless the probe sets a host, so that what listens only on the pod's
	// loopback can be probed.
	ProbeNetworkPod = "pod"
)

// ValidateProbeNetwork checks a probe-network value ("" is unset).
func ValidateProbeNetwork(v string) error {
	switch v {
	case "", ProbeNetworkNode, ProbeNetworkPod:
		return nil
	}
	return fmt.Errorf("Unsupported value: %q: supported values: %q, %q", clip(v), ProbeNetworkNode, ProbeNetworkPod)
}

// Which hosts probes given in annotations may name (run
// --annotation-probe-hosts).
const (
	// AnnotationProbeHostsPod: none. An annotation probe goes to its own
	// pod (its IP, or 127.0.0.1 in its network namespace), with no Host
	// header: whoever can create a container cannot aim the agent at
	// another host from the node (OpenKruise's fix of GHSA-9fj4-3849-rv9g).
	// The default, also for "".
	AnnotationProbeHostsPod = "pod"
	// AnnotationProbeHostsAny: any host and Host header, as in a manifest
	// (kubelet's rule).
	AnnotationProbeHostsAny = "any"
)

// ValidateAnnotationProbeHosts checks an --annotation-probe-hosts value.
func ValidateAnnotationProbeHosts(v string) error {
	switch v {
	case AnnotationProbeHostsPod, AnnotationProbeHostsAny:
		return nil
	}
	return fmt.Errorf("Unsupported value: %q: supported values: %q, %q", clip(v), AnnotationProbeHostsPod, AnnotationProbeHostsAny)
}

// maxProblems is how many problems of one config's annotations are
// reported: a 256 KiB annotation of unknown fields must not become
// thousands of messages in every /api/v1/pods response and log line. The
// first say what to fix; the others are counted.
const maxProblems = 10

// problems collects the problems of one config's annotations, at most
// maxProblems of them.
type problems struct {
	base  Error // what every one is about: source, pod, container
	list  []*Error
	extra int
}

// add records a problem of the annotation or field at path.
func (p *problems) add(path, detail string) {
	if len(p.list) == maxProblems {
		p.extra++
		return
	}
	e := p.base
	e.Field, e.Detail = clip(path), detail
	p.list = append(p.list, &e)
}

func (p *problems) addField(fe *field.Error) { p.add(fromField(fe)) }

func (p *problems) none() bool { return len(p.list) == 0 }

// errors returns the problems, and how many more there were.
func (p *problems) errors() []*Error {
	if p.extra == 0 {
		return p.list
	}
	more := p.base
	more.Detail = fmt.Sprintf("and %d more problems in these annotations, not shown: fix the ones shown, then see the rest", p.extra)
	return append(p.list, &more)
}

var containerAnnotations = []struct {
	key   string
	field probeField
}{{StartupAnnotation, startupField}, {ReadinessAnnotation, readinessField}, {LivenessAnnotation, livenessField}}

// ContainerFromAnnotations reads the probes of a container from its CRI
// config annotations. It returns nil when the container has none. Any
// problem (bad JSON, an invalid probe, an unknown cri-prober.io/ key, a
// host that probeHosts does not allow) is an error and no probe of the
// container is used: half a spec would probe something other than what
// was asked. What the errors quote of the annotations is bounded.
func ContainerFromAnnotations(namespace, pod, container string, annotations map[string]string, probeHosts string) (*Container, []*Error) {
	c := &Container{Name: container}
	errs := problems{base: Error{Source: SourceAnnotations, Namespace: namespace, Pod: pod, Container: container}}
	checkKeys(annotations, "a container config", []string{LivenessAnnotation, ReadinessAnnotation, StartupAnnotation, ExtensionsAnnotation, RestartOfAnnotation, RestartCauseAnnotation}, errs.add)
	for _, a := range containerAnnotations {
		raw, ok := annotations[a.key]
		if !ok {
			continue
		}
		var probe corev1.Probe
		strict, err := json.UnmarshalStrict([]byte(raw), &probe, json.DisallowDuplicateFields, json.DisallowUnknownFields)
		if err != nil {
			errs.add(a.key, "not a JSON Probe: "+cleanJSONError(err))
			continue
		}
		for _, e := range strict {
			errs.add(a.key, strictDetail(e, probe))
		}
		if len(strict) > 0 {
			continue
		}
		DefaultProbe(&probe)
		for _, fe := range ValidateProbe(&probe, a.field, field.NewPath(a.key)) {
			errs.addField(fe)
		}
		if probeHosts != AnnotationProbeHostsAny {
			for _, fe := range pinnedToPod(&probe, field.NewPath(a.key)) {
				errs.addField(fe)
			}
		}
		for _, fe := range ProbePortWarnings(&probe, nil, false, field.NewPath(a.key)) {
			w := errs.base
			w.Field, w.Detail = fromField(fe)
			c.Warnings = append(c.Warnings, &w)
		}
		switch a.field {
		case livenessField:
			c.Liveness = &probe
		case readinessField:
			c.Readiness = &probe
		case startupField:
			c.Startup = &probe
		}
	}
	if raw, ok := annotations[ExtensionsAnnotation]; ok && errs.none() {
		ext, ferrs := decodeExtensions([]byte(raw), c, field.NewPath(ExtensionsAnnotation))
		for _, fe := range ferrs {
			errs.addField(fe)
		}
		c.Extensions = ext
	}
	if !errs.none() {
		return nil, errs.errors()
	}
	if !c.HasProbes() {
		return nil, nil
	}
	return c, nil
}

// pinnedToPod refuses what would aim an annotation probe anywhere but its
// own pod: a host, or a Host header (a virtual host the pod's address
// does not name). A gRPC probe has neither; an exec probe runs in the
// container itself.
func pinnedToPod(p *corev1.Probe, path *field.Path) field.ErrorList {
	const allow = "or let annotations name hosts with run --annotation-probe-hosts=" + AnnotationProbeHostsAny
	var errs field.ErrorList
	if h := p.HTTPGet; h != nil {
		if h.Host != "" {
			errs = append(errs, field.Forbidden(path.Child("httpGet", "host"), "annotation probes go to their own pod (its IP, or 127.0.0.1 in its network namespace): remove the host, "+allow))
		}
		for i, hdr := range h.HTTPHeaders {
			if strings.EqualFold(hdr.Name, "Host") {
				errs = append(errs, field.Forbidden(path.Child("httpGet", "httpHeaders").Index(i).Child("name"), "annotation probes go to their own pod, under its address: remove the Host header, "+allow))
			}
		}
	}
	if s := p.TCPSocket; s != nil && s.Host != "" {
		errs = append(errs, field.Forbidden(path.Child("tcpSocket", "host"), "annotation probes go to their own pod (its IP, or 127.0.0.1 in its network namespace): remove the host, "+allow))
	}
	return errs
}

// PodPolicy is what a sandbox's annotations say about the whole pod.
type PodPolicy struct {
	RestartPolicy                 corev1.RestartPolicy
	TerminationGracePeriodSeconds int64
	ProbeNetwork                  string // "" (the agent's default), ProbeNetworkNode or ProbeNetworkPod
}

// PodPolicyFromAnnotations reads the restart policy and grace period from a
// sandbox's annotations, with the API server's defaults (Always, 30 s). On
// error the defaults are returned with the errors, which quote the
// annotations bounded.
func PodPolicyFromAnnotations(namespace, pod string, annotations map[string]string) (PodPolicy, []*Error) {
	p := PodPolicy{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: DefaultGracePeriodSecond}
	errs := problems{base: Error{Source: SourceAnnotations, Namespace: namespace, Pod: pod}}
	checkKeys(annotations, "a pod sandbox config", []string{RestartPolicyAnnotation, GracePeriodAnnotation, ProbeNetworkAnnotation}, errs.add)
	if v, ok := annotations[ProbeNetworkAnnotation]; ok {
		if err := ValidateProbeNetwork(v); err != nil {
			errs.add(ProbeNetworkAnnotation, err.Error())
		} else {
			p.ProbeNetwork = v
		}
	}
	if v, ok := annotations[RestartPolicyAnnotation]; ok {
		if fe := validateRestartPolicy(corev1.RestartPolicy(v), field.NewPath(RestartPolicyAnnotation)); len(fe) > 0 {
			errs.addField(fe[0])
		} else {
			p.RestartPolicy = corev1.RestartPolicy(v)
		}
	}
	if v, ok := annotations[GracePeriodAnnotation]; ok {
		g, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			errs.add(GracePeriodAnnotation, fmt.Sprintf("Invalid value: %q: must be a whole number of seconds", clip(v)))
		case g < 0:
			errs.add(GracePeriodAnnotation, fmt.Sprintf("Invalid value: %d: must be greater than or equal to 0", g))
		default:
			p.TerminationGracePeriodSeconds = g
		}
	}
	return p, errs.errors()
}

// checkKeys reports the cri-prober.io/ annotations that are not read from
// this kind of config: a typo or a misplaced key must not silently disable
// a probe or a policy. fail bounds what it quotes of a key.
func checkKeys(annotations map[string]string, on string, known []string, fail func(key, detail string)) {
	var keys []string
	for k := range annotations {
		if strings.HasPrefix(k, AnnotationPrefix) && !slices.Contains(known, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case LivenessAnnotation, ReadinessAnnotation, StartupAnnotation, ExtensionsAnnotation:
			fail(k, "belongs on a container config, not on "+on)
		case RestartPolicyAnnotation, GracePeriodAnnotation, ProbeNetworkAnnotation:
			fail(k, "belongs on the pod sandbox config, not on "+on)
		default:
			read := slices.DeleteFunc(slices.Clone(known), func(k string) bool { return k == RestartOfAnnotation || k == RestartCauseAnnotation })
			detail := fmt.Sprintf("unknown annotation; on %s cri-prober reads %s", on, strings.Join(read, ", "))
			if s := closest(k, read); s != "" {
				detail += fmt.Sprintf(": did you mean %q?", s)
			}
			fail(k, detail)
		}
	}
}
