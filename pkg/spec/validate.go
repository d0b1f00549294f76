package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// probeField names a probe by its field in the container spec.
type probeField string

const (
	livenessField  probeField = "livenessProbe"
	readinessField probeField = "readinessProbe"
	startupField   probeField = "startupProbe"
)

// validatePod checks a defaulted pod with the API server's rules for what
// probing uses, plus one of ours: a named probe port must be declared by the
// container (kubelet would otherwise fail the probe forever, silently).
// Errors carry the container name where they concern one.
func validatePod(source string, pod *corev1.Pod) []*Error {
	var errs []*Error
	add := func(container string, list field.ErrorList) {
		for _, fe := range list {
			errs = append(errs, &Error{
				Source: source, Namespace: pod.Namespace, Pod: pod.Name, Container: container,
				Field: fe.Field, Detail: fe.ErrorBody(),
			})
		}
	}

	meta := field.NewPath("metadata")
	var podErrs field.ErrorList
	if pod.Name == "" {
		podErrs = append(podErrs, field.Required(meta.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
		if pod.Name != "" {
			podErrs = append(podErrs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		podErrs = append(podErrs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	for _, k := range slices.Sorted(maps.Keys(pod.Annotations)) {
		switch {
		case k == ProbeNetworkAnnotation:
			if v := pod.Annotations[k]; v != ProbeNetworkNode && v != ProbeNetworkPod {
				podErrs = append(podErrs, field.NotSupported(meta.Child("annotations").Key(k), v, []string{ProbeNetworkNode, ProbeNetworkPod}))
			}
		case k == ExtensionsAnnotation: // decoded once the containers are known
		case strings.HasPrefix(k, AnnotationPrefix):
			podErrs = append(podErrs, field.NotSupported(meta.Child("annotations").Key(k), k, []string{ProbeNetworkAnnotation, ExtensionsAnnotation}))
		}
	}
	specPath := field.NewPath("spec")
	podErrs = append(podErrs, validateRestartPolicy(pod.Spec.RestartPolicy, specPath.Child("restartPolicy"))...)
	podErrs = append(podErrs, apivalidation.ValidateNonnegativeField(*pod.Spec.TerminationGracePeriodSeconds, specPath.Child("terminationGracePeriodSeconds"))...)
	if len(pod.Spec.Containers) == 0 {
		podErrs = append(podErrs, field.Required(specPath.Child("containers"), ""))
	}
	add("", podErrs)

	names := map[string]bool{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		add(c.Name, validateContainer(c, specPath.Child("containers").Index(i), names, false))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		add(c.Name, validateContainer(c, specPath.Child("initContainers").Index(i), names, true))
	}
	return errs
}

func validateRestartPolicy(p corev1.RestartPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	default:
		return field.ErrorList{field.NotSupported(path, p, []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
	}
}

func validateContainer(c *corev1.Container, path *field.Path, names map[string]bool, init bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name == "":
		errs = append(errs, field.Required(path.Child("name"), ""))
	case names[c.Name]:
		errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
	default:
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), c.Name, msg))
		}
	}
	names[c.Name] = true

	portNames := map[string]bool{}
	for i, p := range c.Ports {
		pp := path.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), p.ContainerPort, msg))
		}
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
			}
			if portNames[p.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			portNames[p.Name] = true
		}
	}

	if init {
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(path.Child("restartPolicy"), *c.RestartPolicy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
		if !isSidecar(c) {
			for _, p := range []struct {
				field probeField
				probe *corev1.Probe
			}{{livenessField, c.LivenessProbe}, {readinessField, c.ReadinessProbe}, {startupField, c.StartupProbe}} {
				if p.probe != nil {
					errs = append(errs, field.Forbidden(path.Child(string(p.field)), "may not be set for init containers without restartPolicy=Always"))
				}
			}
			return errs
		}
	}
	errs = append(errs, ValidateProbe(c.LivenessProbe, livenessField, c.Ports, path.Child(string(livenessField)))...)
	errs = append(errs, ValidateProbe(c.ReadinessProbe, readinessField, c.Ports, path.Child(string(readinessField)))...)
	errs = append(errs, ValidateProbe(c.StartupProbe, startupField, c.Ports, path.Child(string(startupField)))...)
	return errs
}

// ValidateProbe checks one defaulted probe. ports are the container's
// declared ports; nil means none can be declared (CRI annotations), so
// named ports are refused with a hint.
func ValidateProbe(p *corev1.Probe, kind probeField, ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateHandler(&p.ProbeHandler, ports, path)...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.InitialDelaySeconds), path.Child("initialDelaySeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.TimeoutSeconds), path.Child("timeoutSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.PeriodSeconds), path.Child("periodSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.SuccessThreshold), path.Child("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.FailureThreshold), path.Child("failureThreshold"))...)
	if kind != readinessField && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if g := p.TerminationGracePeriodSeconds; g != nil {
		switch {
		case kind == readinessField:
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		case *g <= 0:
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

func validateHandler(h *corev1.ProbeHandler, ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	handlers := 0
	check := func(set bool, name string, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if handlers > 0 {
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 handler type"))
			return
		}
		handlers++
		errs = append(errs, validate(path.Child(name))...)
	}
	check(h.Exec != nil, "exec", func(p *field.Path) field.ErrorList {
		if len(h.Exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	check(h.HTTPGet != nil, "httpGet", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if h.HTTPGet.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, validateProbePort(h.HTTPGet.Port, ports, p.Child("port"))...)
		if s := h.HTTPGet.Scheme; s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("scheme"), s, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
		for _, hdr := range h.HTTPGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
				errs = append(errs, field.Invalid(p.Child("httpHeaders"), hdr.Name, msg))
			}
		}
		return errs
	})
	check(h.TCPSocket != nil, "tcpSocket", func(p *field.Path) field.ErrorList {
		return validateProbePort(h.TCPSocket.Port, ports, p.Child("port"))
	})
	check(h.GRPC != nil, "grpc", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(p.Child("port"), h.GRPC.Port, msg))
		}
		return errs
	})
	if handlers == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	return errs
}

// validateProbePort accepts a port number 1–65535 or the name of a port the
// container declares.
func validateProbePort(port intstr.IntOrString, ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	if port.Type == intstr.Int {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
		return errs
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		var errs field.ErrorList
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(path, port.StrVal, msg))
		}
		return errs
	}
	if ports == nil {
		return field.ErrorList{field.Invalid(path, port.StrVal, "named ports need a Pod manifest that declares them; use a port number in annotations")}
	}
	if _, ok := ResolvePort(port, ports); !ok {
		return field.ErrorList{field.Invalid(path, port.StrVal, fmt.Sprintf("no port named %q among the container's ports", port.StrVal))}
	}
	return nil
}

// ResolvePort returns the number of a probe port: the number itself, or the
// containerPort of the declared port with that name.
func ResolvePort(port intstr.IntOrString, ports []corev1.ContainerPort) (int, bool) {
	if port.Type == intstr.Int {
		return port.IntValue(), true
	}
	for _, p := range ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
