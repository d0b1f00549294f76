package spec

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
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

// validatePod checks a defaulted pod with the API server's rules (kubelet
// 1.36's, with its default feature gates) for what the agent honours, and
// refuses what it cannot honour. Errors carry the container name where they
// concern one. Warnings are problems that leave the pod valid but make a
// part of it inert, as under kubelet (a probe naming a port the container
// does not declare); they are returned per container.
func validatePod(source string, pod *corev1.Pod) (errs []*Error, warnings map[string][]*Error) {
	warnings = map[string][]*Error{}
	problem := func(container string, fe *field.Error) *Error {
		e := &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Container: container}
		e.Field, e.Detail = fromField(fe)
		return e
	}
	add := func(container string, list field.ErrorList) {
		for _, fe := range list {
			errs = append(errs, problem(container, fe))
		}
	}
	warn := func(container string, list field.ErrorList) {
		for _, fe := range list {
			warnings[container] = append(warnings[container], problem(container, fe))
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
	podErrs = append(podErrs, unsupportedPodFields(&pod.Spec, specPath)...)
	add("", podErrs)
	warn("", podWarnings(&pod.Spec, specPath))

	names := map[string]bool{}
	for _, list := range []struct {
		field      string
		containers []corev1.Container
		init       bool
	}{{"initContainers", pod.Spec.InitContainers, true}, {"containers", pod.Spec.Containers, false}} {
		for i := range list.containers {
			c := &list.containers[i]
			cerrs, cwarns := validateContainer(c, specPath.Child(list.field).Index(i), names, pod.Spec.TerminationGracePeriodSeconds, list.init)
			add(c.Name, cerrs)
			warn(c.Name, cwarns)
		}
	}
	return errs, warnings
}

// unsupportedPodFields refuses what cannot be in a Pod manifest
// (ephemeral containers) and checks an active deadline as the API server
// does.
func unsupportedPodFields(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if len(s.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ephemeralContainers"), "cannot be set in a Pod manifest"))
	}
	return errs
}

// podWarnings are what a valid pod does that its author may not expect,
// as kubelet does it without an API server.
func podWarnings(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var warnings field.ErrorList
	if len(s.ReadinessGates) > 0 {
		warnings = append(warnings, field.Invalid(path.Child("readinessGates"), s.ReadinessGates[0].ConditionType,
			"nothing sets pod conditions without an API server, so the pod is not Ready until each gate's condition is set True with cri-prober gate set (as under kubelet, where a controller sets it); its containers run, are probed and restarted meanwhile"))
	}
	return warnings
}

func validateRestartPolicy(p corev1.RestartPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	default:
		return field.ErrorList{field.NotSupported(path, p, []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
	}
}

func validateContainer(c *corev1.Container, path *field.Path, names map[string]bool, grace *int64, init bool) (errs, warnings field.ErrorList) {
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
	errs = append(errs, validateContainerRestartPolicy(c, path, init)...)

	if init && !isSidecar(c) {
		for _, p := range []struct {
			field probeField
			probe *corev1.Probe
		}{{livenessField, c.LivenessProbe}, {readinessField, c.ReadinessProbe}, {startupField, c.StartupProbe}} {
			if p.probe != nil {
				errs = append(errs, field.Forbidden(path.Child(string(p.field)), "may not be set for init containers without restartPolicy=Always"))
			}
		}
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(path.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always"))
		}
		return errs, warnings
	}
	if c.Lifecycle != nil {
		lerrs, lwarns := validateLifecycle(c.Lifecycle, grace, c.Ports, path.Child("lifecycle"))
		errs, warnings = append(errs, lerrs...), append(warnings, lwarns...)
	}
	for _, p := range []struct {
		field probeField
		probe *corev1.Probe
	}{{livenessField, c.LivenessProbe}, {readinessField, c.ReadinessProbe}, {startupField, c.StartupProbe}} {
		errs = append(errs, ValidateProbe(p.probe, p.field, path.Child(string(p.field)))...)
		warnings = append(warnings, ProbePortWarnings(p.probe, c.Ports, true, path.Child(string(p.field)))...)
	}
	return errs, warnings
}

// validateContainerRestartPolicy checks a container's own restartPolicy
// and restartPolicyRules as kubelet 1.36's API validation does (features
// ContainerRestartRules and RestartAllContainersOnContainerExits on): any
// policy for regular and init containers, rules only beside a policy, at
// most 20 rules of at most 255 exit codes.
func validateContainerRestartPolicy(c *corev1.Container, path *field.Path, init bool) field.ErrorList {
	var errs field.ErrorList
	policyPath := path.Child("restartPolicy")
	if c.RestartPolicy == nil {
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Required(policyPath, "must specify restartPolicy when restart rules are used"))
		}
		return errs
	}
	supported := []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure}
	if !slices.Contains(supported, *c.RestartPolicy) {
		errs = append(errs, field.NotSupported(policyPath, *c.RestartPolicy, supported))
	}
	if len(c.RestartPolicyRules) > 20 {
		errs = append(errs, field.TooMany(path.Child("restartPolicyRules"), len(c.RestartPolicyRules), 20))
	}
	for i, rule := range c.RestartPolicyRules {
		rulePath := path.Child("restartPolicyRules").Index(i)
		switch rule.Action {
		case corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers:
		default:
			errs = append(errs, field.NotSupported(rulePath.Child("action"), rule.Action, []corev1.ContainerRestartRuleAction{corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers}))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(rulePath.Child("exitCodes"), "must be specified"))
			continue
		}
		ops := []corev1.ContainerRestartRuleOnExitCodesOperator{corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn}
		if !slices.Contains(ops, rule.ExitCodes.Operator) {
			errs = append(errs, field.NotSupported(rulePath.Child("exitCodes", "operator"), rule.ExitCodes.Operator, ops))
		}
		if len(rule.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooMany(rulePath.Child("exitCodes", "values"), len(rule.ExitCodes.Values), 255))
		}
	}
	return errs
}

// validateLifecycle checks postStart and preStop handlers as the API server
// does. A tcpSocket handler is accepted (the API keeps it for backward
// compatibility) with a warning: kubelet fails it at every run, and so does
// the agent. stopSignal is accepted and ignored with a warning, as kubelet
// 1.36 ignores it (its ContainerStopSignals feature is alpha, off).
func validateLifecycle(l *corev1.Lifecycle, grace *int64, ports []corev1.ContainerPort, path *field.Path) (errs, warnings field.ErrorList) {
	for _, h := range []struct {
		name    string
		handler *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if h.handler == nil {
			continue
		}
		hp := path.Child(h.name)
		n := 0
		one := func(set bool, name string) bool {
			if !set {
				return false
			}
			if n > 0 {
				errs = append(errs, field.Forbidden(hp.Child(name), "may not specify more than 1 handler type"))
				return false
			}
			n++
			return true
		}
		if one(h.handler.Exec != nil, "exec") && len(h.handler.Exec.Command) == 0 {
			errs = append(errs, field.Required(hp.Child("exec", "command"), ""))
		}
		if one(h.handler.HTTPGet != nil, "httpGet") {
			errs = append(errs, validateHTTPGet(h.handler.HTTPGet, hp.Child("httpGet"))...)
			warnings = append(warnings, portWarnings(h.handler.HTTPGet.Port, ports, true, hp.Child("httpGet", "port"))...)
		}
		if one(h.handler.TCPSocket != nil, "tcpSocket") {
			errs = append(errs, validatePortNumOrName(h.handler.TCPSocket.Port, hp.Child("tcpSocket", "port"))...)
			warnings = append(warnings, field.Invalid(hp.Child("tcpSocket"), h.handler.TCPSocket.Port.String(), "kubelet does not run tcpSocket lifecycle handlers: the hook fails every time; use exec, httpGet or sleep"))
		}
		if one(h.handler.Sleep != nil, "sleep") && grace != nil && (h.handler.Sleep.Seconds < 0 || h.handler.Sleep.Seconds > *grace) {
			errs = append(errs, field.Invalid(hp.Child("sleep"), h.handler.Sleep.Seconds, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace)))
		}
		if n == 0 {
			errs = append(errs, field.Required(hp, "must specify a handler type"))
		}
	}
	if l.StopSignal != nil {
		warnings = append(warnings, field.Invalid(path.Child("stopSignal"), *l.StopSignal, "ignored, as kubelet 1.36 ignores it (its ContainerStopSignals feature is alpha and off): the container is stopped with its image's stop signal, else SIGTERM; remove it"))
	}
	return errs, warnings
}

// ValidateProbe checks one defaulted probe with the API server's rules.
// A named port is checked for its syntax only: whether the container
// declares it is ProbePortWarnings' concern.
func ValidateProbe(p *corev1.Probe, kind probeField, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateHandler(&p.ProbeHandler, path)...)
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

// ValidateReadinessProbe is ValidateProbe for a readiness probe (the CLI's
// one-off probes).
func ValidateReadinessProbe(p *corev1.Probe) field.ErrorList {
	return ValidateProbe(p, readinessField, field.NewPath("probe"))
}

// ProbePortWarnings says when a probe names a port the container does not
// declare. kubelet accepts such a pod and the probe errors at every run, so
// the probe is inert: it never changes its result. The rest of the pod is
// unaffected. declarable is false where no port can be declared (CRI
// annotations).
func ProbePortWarnings(p *corev1.Probe, ports []corev1.ContainerPort, declarable bool, path *field.Path) field.ErrorList {
	switch {
	case p == nil:
		return nil
	case p.HTTPGet != nil:
		return portWarnings(p.HTTPGet.Port, ports, declarable, path.Child("httpGet", "port"))
	case p.TCPSocket != nil:
		return portWarnings(p.TCPSocket.Port, ports, declarable, path.Child("tcpSocket", "port"))
	}
	return nil
}

func portWarnings(port intstr.IntOrString, ports []corev1.ContainerPort, declarable bool, path *field.Path) field.ErrorList {
	if port.Type != intstr.String || len(validation.IsValidPortName(port.StrVal)) > 0 {
		return nil // a number, or a syntax error reported as such
	}
	if _, err := ResolvePort(port, ports); err == nil {
		return nil
	}
	if !declarable {
		return field.ErrorList{field.Invalid(path, port.StrVal, "named ports need a Pod manifest that declares them: this probe errors at every run and never changes its result; use a port number in annotations")}
	}
	return field.ErrorList{field.Invalid(path, port.StrVal, fmt.Sprintf("no port named %q among the container's ports: this probe errors at every run and never changes its result, as under kubelet; declare the port or use its number", port.StrVal))}
}

func validateHandler(h *corev1.ProbeHandler, path *field.Path) field.ErrorList {
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
	check(h.HTTPGet != nil, "httpGet", func(p *field.Path) field.ErrorList { return validateHTTPGet(h.HTTPGet, p) })
	check(h.TCPSocket != nil, "tcpSocket", func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.TCPSocket.Port, p.Child("port"))
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

func validateHTTPGet(h *corev1.HTTPGetAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(h.Port, p.Child("port"))...)
	if s := h.Scheme; s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(p.Child("scheme"), s, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for _, hdr := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(p.Child("httpHeaders"), hdr.Name, msg))
		}
	}
	return errs
}

// validatePortNumOrName accepts a port number 1–65535 or a port name's
// syntax (the API server's ValidatePortNumOrName).
func validatePortNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(path, port.StrVal, msg))
	}
	return errs
}

// ResolvePort returns the number of a probe or hook port exactly as
// kubelet's ResolveContainerPort does: a number; a name the container
// declares; failing that a name that parses as a number (kubelet's "last
// ditch effort", whose error text is then kubelet's too); and 1–65535.
func ResolvePort(port intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = port.IntValue()
	case intstr.String:
		found := false
		for _, p := range ports {
			if p.Name == port.StrVal {
				n, found = int(p.ContainerPort), true
				break
			}
		}
		if !found {
			var err error
			if n, err = strconv.Atoi(port.StrVal); err != nil {
				return n, err
			}
		}
	default:
		return n, fmt.Errorf("intOrString had no kind: %+v", port)
	}
	if n > 0 && n < 65536 {
		return n, nil
	}
	return n, fmt.Errorf("invalid port number: %v", n)
}
