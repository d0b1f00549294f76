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
	return fmt.Errorf("Unsupported value: %q: supported values: %q, %q", v, ProbeNetworkNode, ProbeNetworkPod)
}

var containerAnnotations = []struct {
	key   string
	field probeField
}{{StartupAnnotation, startupField}, {ReadinessAnnotation, readinessField}, {LivenessAnnotation, livenessField}}

// ContainerFromAnnotations reads the probes of a container from its CRI
// config annotations. It returns nil when the container has none. Any
// problem (bad JSON, an invalid probe, an unknown cri-prober.io/ key) is an
// error and no probe of the container is used: half a spec would probe
// something other than what was asked.
func ContainerFromAnnotations(namespace, pod, container string, annotations map[string]string) (*Container, []*Error) {
	c := &Container{Name: container}
	var errs []*Error
	fail := func(key, detail string) {
		errs = append(errs, &Error{Source: SourceAnnotations, Namespace: namespace, Pod: pod, Container: container, Field: key, Detail: detail})
	}
	checkKeys(annotations, "a container config", []string{LivenessAnnotation, ReadinessAnnotation, StartupAnnotation, ExtensionsAnnotation, RestartOfAnnotation, RestartCauseAnnotation}, fail)
	for _, a := range containerAnnotations {
		raw, ok := annotations[a.key]
		if !ok {
			continue
		}
		var probe corev1.Probe
		strict, err := json.UnmarshalStrict([]byte(raw), &probe, json.DisallowDuplicateFields, json.DisallowUnknownFields)
		if err != nil {
			fail(a.key, "not a JSON Probe: "+cleanJSONError(err))
			continue
		}
		for _, e := range strict {
			fail(a.key, strictDetail(e, probe))
		}
		if len(strict) > 0 {
			continue
		}
		DefaultProbe(&probe)
		for _, fe := range ValidateProbe(&probe, a.field, field.NewPath(a.key)) {
			fail(fe.Field, fe.ErrorBody())
		}
		for _, fe := range ProbePortWarnings(&probe, nil, false, field.NewPath(a.key)) {
			c.Warnings = append(c.Warnings, &Error{Source: SourceAnnotations, Namespace: namespace, Pod: pod, Container: container, Field: fe.Field, Detail: fe.ErrorBody()})
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
	if raw, ok := annotations[ExtensionsAnnotation]; ok && len(errs) == 0 {
		ext, ferrs := decodeExtensions([]byte(raw), c, field.NewPath(ExtensionsAnnotation))
		for _, fe := range ferrs {
			fail(fe.Field, fe.ErrorBody())
		}
		c.Extensions = ext
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if !c.HasProbes() {
		return nil, nil
	}
	return c, nil
}

// PodPolicy is what a sandbox's annotations say about the whole pod.
type PodPolicy struct {
	RestartPolicy                 corev1.RestartPolicy
	TerminationGracePeriodSeconds int64
	ProbeNetwork                  string // "" (the agent's default), ProbeNetworkNode or ProbeNetworkPod
}

// PodPolicyFromAnnotations reads the restart policy and grace period from a
// sandbox's annotations, with the API server's defaults (Always, 30 s). On
// error the defaults are returned with the errors.
func PodPolicyFromAnnotations(namespace, pod string, annotations map[string]string) (PodPolicy, []*Error) {
	p := PodPolicy{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: DefaultGracePeriodSecond}
	var errs []*Error
	fail := func(key, detail string) {
		errs = append(errs, &Error{Source: SourceAnnotations, Namespace: namespace, Pod: pod, Field: key, Detail: detail})
	}
	checkKeys(annotations, "a pod sandbox config", []string{RestartPolicyAnnotation, GracePeriodAnnotation, ProbeNetworkAnnotation}, fail)
	if v, ok := annotations[ProbeNetworkAnnotation]; ok {
		if err := ValidateProbeNetwork(v); err != nil {
			fail(ProbeNetworkAnnotation, err.Error())
		} else {
			p.ProbeNetwork = v
		}
	}
	if v, ok := annotations[RestartPolicyAnnotation]; ok {
		if fe := validateRestartPolicy(corev1.RestartPolicy(v), field.NewPath(RestartPolicyAnnotation)); len(fe) > 0 {
			fail(RestartPolicyAnnotation, fe[0].ErrorBody())
		} else {
			p.RestartPolicy = corev1.RestartPolicy(v)
		}
	}
	if v, ok := annotations[GracePeriodAnnotation]; ok {
		g, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			fail(GracePeriodAnnotation, fmt.Sprintf("Invalid value: %q: must be a whole number of seconds", v))
		case g < 0:
			fail(GracePeriodAnnotation, fmt.Sprintf("Invalid value: %d: must be greater than or equal to 0", g))
		default:
			p.TerminationGracePeriodSeconds = g
		}
	}
	return p, errs
}

// checkKeys reports the cri-prober.io/ annotations that are not read from
// this kind of config: a typo or a misplaced key must not silently disable
// a probe or a policy.
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
