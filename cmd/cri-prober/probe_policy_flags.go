package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// probePolicy is where probes may go and what the agent keeps of their
// answers: flags of run, and of the commands that probe as it does (wait,
// probe, play), so that they probe alike.
type probePolicy struct {
	annotationProbeHosts probeHosts
	allowedDestinations  prefixList
	keepSuccessOutput    bool
	failureEvents        failureEvents
}

// register registers every flag of the policy (run).
func (p *probePolicy) register(fs *pflag.FlagSet) {
	p.registerAnnotationHosts(fs)
	p.registerDestinations(fs)
	p.registerFailureEvents(fs)
	fs.BoolVar(&p.keepSuccessOutput, "keep-success-output", false, "keep what passing probes print (an HTTP body, a command's output) in the results and histories, and so in the state API's output fields; by default it is dropped, as kubelet drops it, for a probe may fetch what only the node should read. Warnings and failures keep theirs either way")
}

// registerAnnotationHosts registers the flag that says where annotation
// probes may go (commands that read annotations).
func (p *probePolicy) registerAnnotationHosts(fs *pflag.FlagSet) {
	p.annotationProbeHosts = spec.AnnotationProbeHostsPod
	fs.Var(&p.annotationProbeHosts, "annotation-probe-hosts", "hosts that probes given in "+spec.AnnotationPrefix+" annotations may name: pod (none: they go to their own pod's address, with no Host header, so whoever creates containers cannot aim the agent at other hosts from the node) or any (a host and a Host header, as in a manifest)")
}

// registerDestinations registers the flag that lets probes reach the
// destinations every probe is refused.
func (p *probePolicy) registerDestinations(fs *pflag.FlagSet) {
	fs.Var(&p.allowedDestinations, "allow-probe-destination", "a `CIDR` (or an address) that probes may reach although it is link-local or a cloud's instance metadata service (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200), which are refused whatever the spec's source, names and redirects included (kubelet probes any address); repeatable, or comma-separated")
}

// registerFailureEvents registers the flag that says which event a probe
// failure makes (commands that run the engine: run, play, wait).
func (p *probePolicy) registerFailureEvents(fs *pflag.FlagSet) {
	p.failureEvents = failureEvents(prober.FailureEventsKubelet)
	fs.Var(&p.failureEvents, "probe-failure-events", "the event of a probe failure: kubelet (every failure Unhealthy, Warning, as kubelet) or threshold (a failure below the failureThreshold is ProbeFailureIgnored, Normal; Unhealthy, Warning, once the threshold is reached, as proposed for kubernetes#115823)")
}

// apply gives the engine the policy.
func (p *probePolicy) apply(cfg *agent.Config) {
	cfg.Resolver.AnnotationProbeHosts = string(p.annotationProbeHosts)
	cfg.Prober.AllowedDestinations = p.allowedDestinations
	cfg.Prober.FailureEvents = prober.FailureEvents(p.failureEvents)
	cfg.Prober.KeepSuccessOutput = p.keepSuccessOutput
}

// probeHosts is --annotation-probe-hosts, checked as it is set (from the
// command line or a config file).
type probeHosts string

func (h *probeHosts) Set(value string) error {
	if err := spec.ValidateAnnotationProbeHosts(value); err != nil {
		return err
	}
	*h = probeHosts(value)
	return nil
}

func (h *probeHosts) String() string { return string(*h) }
func (h *probeHosts) Type() string   { return "string" }

// failureEvents is --probe-failure-events, checked as it is set (from the
// command line or a config file).
type failureEvents string

func (f *failureEvents) Set(value string) error {
	if err := prober.ValidateFailureEvents(value); err != nil {
		return err
	}
	*f = failureEvents(value)
	return nil
}

func (f *failureEvents) String() string { return string(*f) }
func (f *failureEvents) Type() string   { return "string" }

// prefixList is a repeatable flag of CIDRs (an address alone is its own
// /32 or /128).
type prefixList []netip.Prefix

func (l *prefixList) Set(value string) error {
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR (169.254.169.254/32) or an address: %w", s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Type ends in "Slice": a list in a config file (configValue).
func (l *prefixList) Type() string { return "cidrSlice" }
