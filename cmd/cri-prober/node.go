package main

import (
	"fmt"
	"net"
	"path"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/node"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// defaultRootDir is where the agent keeps its own pods' directories
// (volumes, /etc/hosts, termination messages): kubelet's --root-dir is
// /var/lib/kubelet, which a kubelet on the same node would share.
const defaultRootDir = "/var/lib/cri-prober"

// defaultCgroupRoot keeps the agent's pod cgroups apart from a kubelet's
// (/kubepods): a kubelet kills what runs in pod cgroups it does not know.
const defaultCgroupRoot = "/cri-prober"

// nodeFlags are kubelet's settings for the pods it makes, under kubelet's
// flag names: run (with --static-pod-path) and play share them.
type nodeFlags struct {
	rootDir          string
	podLogsDir       string
	hostnameOverride string
	nodeName         string
	clusterDNS       []string
	clusterDomain    string
	resolvConf       string
	cgroupRoot       string
	cgroupsPerQOS    bool
	flags            *pflag.FlagSet
}

func (f *nodeFlags) register(fs *pflag.FlagSet) {
	f.flags = fs
	fs.StringVar(&f.rootDir, "root-dir", defaultRootDir, "directory of the pods the agent makes: their volumes, /etc/hosts and termination messages, and its records of them (kubelet's --root-dir)")
	fs.StringVar(&f.podLogsDir, "pod-logs-dir", podconfig.DefaultPodLogsDir, "directory of the logs of the pods the agent makes, in kubelet's layout (<namespace>_<name>_<uid>/<container>/<attempt>.log), for crictl logs and cri-prober logs (kubelet's podLogsDir)")
	fs.StringVar(&f.nodeName, "node-name", "", "the node's name: on what leaves the node (events' reportingInstance, restart ledger entries, /api/v1/pods' node, the node label of cri_prober_build_info and kube_pod_info), and what the pods the agent makes are named after (<name>-<node>) and see in spec.nodeName; default: the host's name, lowercased, as kubelet names its node")
	fs.StringVar(&f.hostnameOverride, "hostname-override", "", "kubelet's name for --node-name (the same setting: give either)")
	fs.StringSliceVar(&f.clusterDNS, "cluster-dns", nil, "DNS server addresses for pods with dnsPolicy ClusterFirst (kubelet's --cluster-dns); without, such pods get the node's resolv.conf, as kubelet gives them")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "", "the cluster's DNS domain, searched by ClusterFirst pods (kubelet's --cluster-domain)")
	fs.StringVar(&f.resolvConf, "resolv-conf", node.DefaultResolvConf, "the node's resolv.conf, for pods with dnsPolicy Default (kubelet's --resolv-conf); empty: none")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", defaultCgroupRoot, "the cgroup under which the pods the agent makes get theirs, <cgroup-root>/kubepods[/burstable|/besteffort]/pod<uid> (kubelet's --cgroup-root, whose default / would put them beside a kubelet's, which kills the processes of pod cgroups it does not know)")
	fs.BoolVar(&f.cgroupsPerQOS, "cgroups-per-qos", true, "put each pod the agent makes in a cgroup of its own, by QoS class, as kubelet does (kubelet's --cgroups-per-qos); false: the runtime's default cgroups")
	_ = fs.SetAnnotation("root-dir", "cobra_annotation_bash_completion_subdirs_in_dir", []string{})
}

// name is the node's name: --node-name or --hostname-override (one
// setting under two names: both given must agree), else the host's name.
func (f *nodeFlags) name() (string, error) {
	override := f.nodeName
	if f.hostnameOverride != "" {
		if override != "" && !strings.EqualFold(strings.TrimSpace(override), strings.TrimSpace(f.hostnameOverride)) {
			return "", fmt.Errorf("--node-name %q and --hostname-override %q name the node twice: give one of them", f.nodeName, f.hostnameOverride)
		}
		override = f.hostnameOverride
	}
	name, err := node.Name(override)
	if err != nil {
		return "", fmt.Errorf("the node's name: %w; give --node-name", err)
	}
	return name, nil
}

// node is the node as the pods the agent makes see it: kubelet's
// discovery of the host (node.Discover) with these settings, hostIP
// the node's address when one is given.
func (f *nodeFlags) node(hostIP string) (podconfig.Node, error) {
	if err := f.check(); err != nil {
		return podconfig.Node{}, err
	}
	name, err := f.name()
	if err != nil {
		return podconfig.Node{}, err
	}
	opts := node.Options{HostnameOverride: name, NodeIP: hostIP, RootDir: f.rootDir, Logger: klog.Background(),
		CgroupRoot: path.Join(f.cgroupRoot, "kubepods")}
	if f.flags != nil && f.flags.Changed("resolv-conf") {
		opts.ResolvConf = &f.resolvConf
	}
	node, err := node.Discover(opts)
	if err != nil {
		return node, err
	}
	if !f.cgroupsPerQOS {
		node.CgroupRoot = ""
	}
	node.PodLogsDir = f.podLogsDir
	node.ClusterDomain = f.clusterDomain
	for _, s := range f.clusterDNS {
		node.ClusterDNS = append(node.ClusterDNS, strings.TrimSpace(s))
	}
	return node, nil
}

// check validates the values the node is made of before anything is
// started.
func (f *nodeFlags) check() error {
	for _, s := range f.clusterDNS {
		if net.ParseIP(strings.TrimSpace(s)) == nil {
			return fmt.Errorf("--cluster-dns %q: not an IP address", s)
		}
	}
	if !path.IsAbs(f.cgroupRoot) {
		return fmt.Errorf("--cgroup-root %q: want an absolute cgroup path, such as %s", f.cgroupRoot, defaultCgroupRoot)
	}
	_, err := f.name()
	return err
}
