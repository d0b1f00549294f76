package podconfig

import (
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is the PodSandboxConfig kubelet's generatePodSandboxConfig makes
// for the pod's attempt-th sandbox (pkg/kubelet/kuberuntime): metadata,
// labels, annotations, DNS, hostname (off the host network), log
// directory, port mappings of the regular containers, the Linux config
// (cgroup parent, sysctls, security context) and the resources
// applySandboxResources adds. The pod is defaulted with its static
// identity applied. DNS's warnings are not returned here: call DNS for
// them.
func Sandbox(pod *corev1.Pod, attempt uint32, node Node) (*runtimeapi.PodSandboxConfig, error) {
	cfg, _, err := SandboxWithWarnings(pod, attempt, node)
	return cfg, err
}

// SandboxWithWarnings is Sandbox with the warnings kubelet records as
// events while making it (its DNS config's).
func SandboxWithWarnings(pod *corev1.Pod, attempt uint32, node Node) (*runtimeapi.PodSandboxConfig, []Warning, error) {
	if pod == nil {
		return nil, nil, errors.New("sandbox config: no pod")
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:      sandboxLabels(pod),
		Annotations: sandboxAnnotations(pod),
	}
	var warnings []Warning
	cfg.DnsConfig, warnings = DNS(pod, node)
	if !pod.Spec.HostNetwork {
		hostname, domain, err := HostnameAndDomain(pod, node)
		if err != nil {
			return nil, nil, sandboxError(pod, err)
		}
		if cfg.Hostname, err = KernelHostname(hostname, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
			return nil, nil, sandboxError(pod, err)
		}
	}
	cfg.LogDirectory = node.Layout().PodLogsDirectory(pod.Namespace, pod.Name, pod.UID)
	var ports []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		ports = append(ports, PortMappings(&pod.Spec.Containers[i])...)
	}
	if len(ports) > 0 {
		cfg.PortMappings = ports
	}
	lc, err := sandboxLinux(pod, node)
	if err != nil {
		return nil, nil, sandboxError(pod, err)
	}
	lc.Resources = sandboxResources(pod, node)
	lc.Overhead = sandboxOverhead(pod, node)
	cfg.Linux = lc
	return cfg, warnings, nil
}

// sandboxError is the message kubelet's createPodSandbox reports (in the
// FailedCreatePodSandBox event) when the config cannot be made.
func sandboxError(pod *corev1.Pod, err error) error {
	return fmt.Errorf("Failed to generate sandbox config for pod %q: %w", formatPod(pod), err) //nolint:staticcheck // kubelet's text
}

// PortMappings is kubecontainer's MakePortMappings as the sandbox uses it:
// one mapping per container port, the first of each name kept (unnamed
// ports are named by family, protocol, host IP and ports).
func PortMappings(c *corev1.Container) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	names := map[string]bool{}
	for _, p := range c.Ports {
		family := "any"
		if p.HostIP != "" {
			if ip := net.ParseIP(p.HostIP); ip != nil && ip.To4() == nil {
				family = "v6"
			} else {
				family = "v4"
			}
		}
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("%s-%s-%s:%d:%d", family, p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
		}
		if names[name] {
			continue
		}
		names[name] = true
		out = append(out, &runtimeapi.PortMapping{
			Protocol:      runtimeProtocol(p.Protocol),
			ContainerPort: p.ContainerPort,
			HostPort:      p.HostPort,
			HostIp:        p.HostIP,
		})
	}
	return out
}

// runtimeProtocol is toRuntimeProtocol: TCP for anything unknown.
func runtimeProtocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// sandboxLinux is generatePodSandboxLinuxConfig.
func sandboxLinux(pod *corev1.Pod, node Node) (*runtimeapi.LinuxPodSandboxConfig, error) {
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: CgroupParent(pod, node),
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			Privileged: hasPrivilegedContainer(pod),
			// Kubelet runs every sandbox under RuntimeDefault (#84623).
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
		Sysctls: map[string]string{},
	}
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return lc, nil
	}
	for _, s := range sc.Sysctls {
		// ConvertPodSysctlsVariableToDotsSeparator: runc wants dots.
		lc.Sysctls[NormalizeSysctl(s.Name)] = s.Value
	}
	ssc := lc.SecurityContext
	if sc.RunAsUser != nil {
		ssc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	}
	if sc.RunAsGroup != nil {
		ssc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	var err error
	if ssc.NamespaceOptions, err = namespaceOptions(pod); err != nil {
		return nil, err
	}
	if sc.FSGroup != nil {
		ssc.SupplementalGroups = append(ssc.SupplementalGroups, *sc.FSGroup)
	}
	ssc.SupplementalGroups = append(ssc.SupplementalGroups, sc.SupplementalGroups...)
	if p := sc.SupplementalGroupsPolicy; p != nil {
		v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*p)]
		if !ok {
			return nil, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", string(*p))
		}
		ssc.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(v)
	}
	if o := sc.SELinuxOptions; o != nil {
		ssc.SelinuxOptions = runtimeSELinux(o)
	}
	return lc, nil
}

// NormalizeSysctl is component-helpers' sysctl NormalizeName, which kubelet
// applies to the pod's sysctls before the sandbox is made: a name written
// with slashes (net/ipv4/conf/eno2.100/rp_filter) swaps '/' and '.'
// (net.ipv4.conf.eno2/100.rp_filter); a name whose first separator is a
// dot stays as it is.
func NormalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i == -1 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}
