package podconfig

import (
	"bytes"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// EtcHostsPath is where the managed hosts file is mounted.
const EtcHostsPath = "/etc/hosts"

// Headers kubelet writes at the top of a pod's hosts file.
const (
	managedHostsHeader                = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// HostsFile is the managed /etc/hosts of a pod on the pod network
// (managedHostsFileContent): localhost entries, the pod's IPs with its
// hostname (and FQDN when it has a domain), then the host aliases.
func HostsFile(podIPs []string, hostname, domain string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(HostAliasEntries(aliases))
	return b.Bytes()
}

// HostNetworkHostsFile is the hosts file of a pod on the host network
// (nodeHostsFileContent): the node's /etc/hosts under kubelet's header,
// then the host aliases.
func HostNetworkHostsFile(nodeHosts []byte, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderWithHostNetwork)
	b.Write(nodeHosts)
	b.Write(HostAliasEntries(aliases))
	return b.Bytes()
}

// HostAliasEntries is hostsEntriesFromHostAliases: one line per alias IP
// after a blank line and a comment, empty without aliases.
func HostAliasEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return []byte{}
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// ShouldMountHostsFile is kubelet's shouldMountHostsFile (Linux): a pod on
// the host network always gets the managed /etc/hosts, a pod on the pod
// network once it has an IP. A container mounting a volume on /etc/hosts
// itself does not get it (MountsHostsFile).
func ShouldMountHostsFile(pod *corev1.Pod, podIPs []string) bool {
	return len(podIPs) > 0 || pod.Spec.HostNetwork
}

// MountsHostsFile reports whether the container gets the managed
// /etc/hosts (makeMounts' mountEtcHostsFile): ShouldMountHostsFile, and no
// volumeMount of its own on /etc/hosts. Kubelet writes the file
// (ensureHostsFile) at each start of such a container, and only then.
func MountsHostsFile(pod *corev1.Pod, c *corev1.Container, podIPs []string) bool {
	if !ShouldMountHostsFile(pod, podIPs) {
		return false
	}
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == EtcHostsPath {
			return false
		}
	}
	return true
}

// HostnameAndDomain is kubelet's GeneratePodHostNameAndDomain: the
// hostnameOverride (gate HostnameOverride, on in 1.36), else
// spec.hostname or the pod name, cut to 63 characters; the domain
// <subdomain>.<namespace>.svc.<cluster domain> when spec.subdomain is set.
func HostnameAndDomain(pod *corev1.Pod, node Node) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := utilvalidation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		h, err := truncateHostname(pod.Name, *o)
		return h, "", err
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := utilvalidation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	hostname, err = truncateHostname(pod.Name, hostname)
	if err != nil {
		return "", "", err
	}
	if sub := pod.Spec.Subdomain; sub != "" {
		if msgs := utilvalidation.IsDNS1123Label(sub); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", sub, pod.Namespace, node.ClusterDomain)
	}
	return hostname, domain, nil
}

// truncateHostname is truncatePodHostnameIfNeeded: at most 63 characters,
// not ending in '-' or '.'.
func truncateHostname(podName, hostname string) (string, error) {
	const maxLen = 63
	if len(hostname) <= maxLen {
		return hostname, nil
	}
	t := strings.TrimRight(hostname[:maxLen], "-.")
	if t == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return t, nil
}

// KernelHostname is kubelet's GetNodenameForKernel: the FQDN when the pod
// asks for setHostnameAsFQDN and has a domain (at most 64 characters),
// else the hostname.
func KernelHostname(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	const maxLen = 64
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxLen, len(fqdn))
	}
	return fqdn, nil
}
