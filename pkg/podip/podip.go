// Package podip picks a pod's addresses as kubelet does, in one place: its
// status.podIPs and status.podIP (kubelet's sortPodIPs), which the agent
// reports, probes and hands to containers (the downward API). It is a leaf
// every layer may use and imports nothing of ours.
package podip

import (
	"net"

	netutils "k8s.io/utils/net"
)

// Sort is kubelet's sortPodIPs: of a pod's addresses as the runtime
// reports them, the first one of the node's IP family, then the first one
// of the other, each re-stringified. An address is parsed as kubelet parses
// it (ParseIPSloppy: IPv4 with leading zeros too); anything else is
// skipped. The node's family is nodeIP's (kubelet's first --node-ip; here
// the node's first address): IPv4 when it is "" or not an address.
func Sort(podIPs []string, nodeIP string) []string {
	v6First := false
	if ip := net.ParseIP(nodeIP); ip != nil && ip.To4() == nil {
		v6First = true
	}
	pick := func(v6 bool) (string, bool) {
		for _, s := range podIPs {
			ip := netutils.ParseIPSloppy(s)
			if ip == nil {
				continue
			}
			if (ip.To4() == nil) == v6 {
				return ip.String(), true
			}
		}
		return "", false
	}
	out := make([]string, 0, 2)
	if s, ok := pick(v6First); ok {
		out = append(out, s)
	}
	if s, ok := pick(!v6First); ok {
		out = append(out, s)
	}
	return out
}

// Primary is the pod's primary address, kubelet's status.podIP: Sort's
// first, "" when the runtime reports none (a host-network sandbox, or one
// whose network is not set up).
func Primary(podIPs []string, nodeIP string) string {
	if ips := Sort(podIPs, nodeIP); len(ips) > 0 {
		return ips[0]
	}
	return ""
}
