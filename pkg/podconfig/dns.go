package podconfig

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Kubelet's DNS limits (pkg/apis/core/validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// defaultDNSOptions are ClusterFirst's options.
var defaultDNSOptions = []string{"ndots:5"}

// Warning is an event kubelet records about a pod while making its
// configs: its reason and message.
type Warning struct {
	Reason, Message string
}

// DNS is the sandbox's DNS config as kubelet's GetPodDNS makes it
// (pkg/kubelet/network/dns), with the warnings kubelet records as events
// (MissingClusterDNS when ClusterFirst falls back to Default for want of
// clusterDNS, DNSConfigForming when limits cut servers or searches).
//
// Kubelet builds the options from maps, so their order differs between
// its runs; here each option keeps its first position.
func DNS(pod *corev1.Pod, node Node) (*runtimeapi.DNSConfig, []Warning) {
	var warnings []Warning
	cfg := &runtimeapi.DNSConfig{}
	if !node.NoResolvConf {
		rc := node.ResolvConf
		cfg.Servers = append([]string(nil), rc.Nameservers...)
		cfg.Searches = append([]string(nil), rc.Searches...)
		cfg.Options = append([]string(nil), rc.Options...)
	}
	host := false
	switch podDNSType(pod) {
	case corev1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case corev1.DNSClusterFirst:
		if len(node.ClusterDNS) > 0 {
			cfg.Servers = []string{}
			for _, s := range node.ClusterDNS {
				if ip := net.ParseIP(s); ip != nil {
					s = ip.String()
				}
				cfg.Servers = append(cfg.Servers, s)
			}
			cfg.Searches = clusterSearches(cfg.Searches, pod, node.ClusterDomain)
			cfg.Options = defaultDNSOptions
			break
		}
		warnings = append(warnings, Warning{Reason: "MissingClusterDNS", Message: fmt.Sprintf("pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			formatPod(pod), corev1.DNSClusterFirst, corev1.DNSDefault)})
		host = true
	default:
		host = true
	}
	if host && node.NoResolvConf {
		for _, s := range node.IPs {
			if ip := net.ParseIP(s); ip != nil && ip.To4() == nil {
				cfg.Servers = append(cfg.Servers, "::1")
			} else {
				cfg.Servers = append(cfg.Servers, "127.0.0.1")
			}
		}
		if len(cfg.Servers) == 0 {
			cfg.Servers = append(cfg.Servers, "127.0.0.1")
		}
		cfg.Searches = []string{"."}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, Warning{Reason: "DNSConfigForming", Message: fmt.Sprintf("Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " "))})
	}
	var cut bool
	cfg.Searches, cut = searchesWithinLimits(cfg.Searches)
	if cut {
		warnings = append(warnings, Warning{Reason: "DNSConfigForming", Message: fmt.Sprintf("Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(cfg.Searches, " "))})
	}
	return cfg, warnings
}

// podDNSType is getPodDNSType, answered as the policy that applies:
// ClusterFirst (also ClusterFirstWithHostNet, and an unknown policy, which
// kubelet logs and treats as ClusterFirst), Default (also ClusterFirst on
// the host network) or None.
func podDNSType(pod *corev1.Pod) corev1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
		return corev1.DNSNone
	case corev1.DNSClusterFirstWithHostNet:
		return corev1.DNSClusterFirst
	case corev1.DNSClusterFirst:
		if !pod.Spec.HostNetwork {
			return corev1.DNSClusterFirst
		}
		return corev1.DNSDefault
	case corev1.DNSDefault:
		return corev1.DNSDefault
	}
	return corev1.DNSClusterFirst
}

// clusterSearches is generateSearchesForDNSClusterFirst.
func clusterSearches(hostSearch []string, pod *corev1.Pod, domain string) []string {
	if domain == "" {
		return hostSearch
	}
	s := []string{fmt.Sprintf("%s.svc.%s", pod.Namespace, domain), "svc." + domain, domain}
	return omitDuplicates(append(s, hostSearch...))
}

func omitDuplicates(list []string) []string {
	seen := make(map[string]bool, len(list))
	var out []string
	for _, s := range list {
		if !seen[s] {
			out = append(out, s)
			seen[s] = true
		}
	}
	return out
}

// mergeDNSOptions is kubelet's mergeDNSOptions: the pod's options replace
// those of the same name; "name" without a value when Value is nil or "".
func mergeDNSOptions(existing []string, more []corev1.PodDNSConfigOption) []string {
	type opt struct{ name, value string }
	var list []opt
	set := func(name, value string) {
		for i := range list {
			if list[i].name == name {
				list[i].value = value
				return
			}
		}
		list = append(list, opt{name, value})
	}
	for _, o := range existing {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range more {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		set(o.Name, v)
	}
	out := []string{}
	for _, o := range list {
		if o.value != "" {
			out = append(out, o.name+":"+o.value)
		} else {
			out = append(out, o.name)
		}
	}
	return out
}

// searchesWithinLimits is formDNSSearchFitsLimits: at most 32 paths, none
// longer than a DNS subdomain, the line at most 2048 characters (cut from
// the end).
func searchesWithinLimits(search []string) ([]string, bool) {
	cut := false
	if len(search) > maxDNSSearchPaths {
		search = search[:maxDNSSearchPaths]
		cut = true
	}
	kept := search[:0:0]
	for _, s := range search {
		if len(s) > utilvalidation.DNS1123SubdomainMaxLength {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	if search != nil {
		search = kept
	}
	if n := len(strings.Join(search, " ")); n > maxDNSSearchListChars {
		cutN, cutLen := 0, 0
		for i := len(search) - 1; i >= 0; i-- {
			cutLen += len(search[i]) + 1
			cutN++
			if n-cutLen <= maxDNSSearchListChars {
				break
			}
		}
		search = search[:len(search)-cutN]
		cut = true
	}
	return search, cut
}
