package spec

import corev1 "k8s.io/api/core/v1"

// ShouldRestart reports whether the container, having exited with
// exitCode, is started again: kubelet 1.36's ContainerShouldRestart. The
// container's restartPolicyRules are tried in order, then its own
// restartPolicy, then the pod's. (A sidecar is restarted whatever it
// exits with; kubelet does not ask this of sidecars.)
func (c *Container) ShouldRestart(pod corev1.RestartPolicy, exitCode int32) bool {
	if c != nil && c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c.RestartPolicyRules, exitCode); ok &&
			(rule.Action == corev1.ContainerRestartRuleActionRestart || rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers) {
			return true
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch pod {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// RestartsAll reports whether the container, having exited with exitCode,
// restarts the whole pod in place: its first matching rule's action is
// RestartAllContainers (kubelet 1.36's RestartAllContainersOnContainerExits,
// beta and on).
func (c *Container) RestartsAll(exitCode int32) bool {
	if c == nil || c.RestartPolicy == nil {
		return false
	}
	rule, ok := matchingRestartRule(c.RestartPolicyRules, exitCode)
	return ok && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// CanRestartAll reports whether some exit of the container restarts the
// whole pod: one of its rules' action is RestartAllContainers (podutil's
// AllContainersCouldRestart, for one container).
func (c *Container) CanRestartAll() bool {
	if c == nil {
		return false
	}
	for _, rule := range c.RestartPolicyRules {
		if rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
			return true
		}
	}
	return false
}

// RestartsAfterKill reports whether the container is started again after
// the agent kills it for failing a liveness or startup probe. kubelet
// decides this with the kill, while the container still runs: there is no
// exit code yet, so rules are not consulted, only the container's policy
// (anything but Never restarts) and otherwise the pod's.
func (c *Container) RestartsAfterKill(pod corev1.RestartPolicy) bool {
	if c != nil && c.RestartPolicy != nil {
		return *c.RestartPolicy != corev1.ContainerRestartPolicyNever
	}
	return pod != corev1.RestartPolicyNever
}

// matchingRestartRule returns the first rule whose exit codes match:
// kubelet's FindMatchingContainerRestartRule.
func matchingRestartRule(rules []corev1.ContainerRestartRule, exitCode int32) (corev1.ContainerRestartRule, bool) {
	for _, rule := range rules {
		if rule.ExitCodes == nil {
			continue
		}
		in := false
		for _, code := range rule.ExitCodes.Values {
			if code == exitCode {
				in = true
			}
		}
		switch rule.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return corev1.ContainerRestartRule{}, false
}
