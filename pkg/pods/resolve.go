package pods

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// AnnotationReader reads a container's specs from its CRI annotations.
type AnnotationReader func(namespace, pod string, c *cri.Container) (*spec.Container, []*spec.Error)

// ReadAnnotations is the AnnotationReader that parses every time, with
// annotation probes pinned to their pod (the default).
var ReadAnnotations = ReadAnnotationsWith(spec.AnnotationProbeHostsPod)

// ReadAnnotationsWith is the AnnotationReader that parses every time, with
// annotation probes allowed the hosts probeHosts says
// (spec.AnnotationProbeHostsPod or …Any).
func ReadAnnotationsWith(probeHosts string) AnnotationReader {
	return func(namespace, pod string, c *cri.Container) (*spec.Container, []*spec.Error) {
		return spec.ContainerFromAnnotations(namespace, pod, c.Name, c.Annotations, probeHosts)
	}
}

// Inputs are what a view is resolved from besides the snapshot.
type Inputs struct {
	Manifests      []*spec.Pod
	ManifestErrors []*spec.Error
	// StaticPods are the pods the agent makes (static pod manifests,
	// their identity applied: spec.StaticPod). Each is in the view whether
	// or not the runtime has a sandbox of it yet, under its UID.
	StaticPods []*spec.Pod
	// Records are the pod records of the static pods the agent has made
	// and not yet removed (on disk), by UID: one that no manifest in
	// StaticPods names any more is an orphan, the agent's to stop and remove (its sandboxes,
	// then what it left on the host), as kubelet removes a static pod
	// whose file is gone.
	Records map[string]Record
	// Removed are the last manifests of orphans that the agent saw before
	// they went (by UID): an orphan is stopped with its spec (preStop,
	// grace period, termination order). Without one (the agent restarted
	// since), what kubelet's container annotations record is used.
	Removed map[string]*spec.Pod
	// Annotations reads containers' annotations (default ReadAnnotations).
	Annotations AnnotationReader
	// Evicted are the static pods the agent evicted (pkg/eviction), by
	// UID, with kubelet's message: each is Failed with reason Evicted, and
	// pod sync kills it and never starts it again.
	Evicted map[string]string
	// IgnoreAnnotations leaves CRI annotations out as a spec source: no
	// probes, restart policy, grace period or probe network from them (the
	// operator's choice, --spec-sources: beside kubelet, whoever creates a
	// Pod sets its sandbox's annotations).
	IgnoreAnnotations bool
	// HostIP is probed for host-network pods, which have no IP of their
	// own (kubelet probes the node's address).
	HostIP string
	// ProbeNetwork is where network probes are dialled from for pods that
	// do not say (spec.ProbeNetworkNode, the default, or ProbeNetworkPod).
	ProbeNetwork string
}

// Resolve builds the view of snap under the specs. A pod is a UID and a
// namespace/name: a sandbox that reuses another pod's UID is kept apart
// (identify). A static pod is the pod of its manifest, matched to the
// sandboxes the agent made for it by UID. A manifest applies to the other
// pods with its namespace and name (and UID, when it sets one);
// CRI annotations apply to containers no manifest lists. A pod named by
// an invalid manifest gets that manifest's errors and nothing else: it is
// never reported ready, rather than treated as unprobed.
func Resolve(snap *cri.Snapshot, in Inputs) *View {
	v := &View{ManifestErrors: in.ManifestErrors}
	for _, m := range slices.Concat(in.Manifests, in.StaticPods) {
		v.ManifestWarnings = append(v.ManifestWarnings, m.Warnings...)
	}
	if snap == nil {
		v.index()
		return v
	}
	v.Time, v.Seq = snap.Time, snap.Seq
	if in.Annotations == nil {
		in.Annotations = ReadAnnotations
	}
	byKey := map[string]*Pod{}
	instances := map[string]map[string][]*cri.Container{} // pod key → name → instances
	add := func(key, namespace, name, uid string) *Pod {
		p, ok := byKey[key]
		if !ok {
			p = &Pod{Key: key, Namespace: namespace, Name: name, UID: uid}
			byKey[key] = p
			v.pods = append(v.pods, p)
			instances[key] = map[string][]*cri.Container{}
		}
		return p
	}
	static := map[string]*spec.Pod{}
	for _, m := range in.StaticPods {
		static[m.UID] = m
		add(m.UID, m.Namespace, m.Name, m.UID).Static = true
	}
	apart, conflicts := identify(snap.Sandboxes(), claims(in))
	for _, sb := range snap.Sandboxes() {
		key, keptApart := apart[sb.ID]
		if !keptApart {
			key = sb.Key()
		}
		p := add(key, sb.Namespace, sb.Name, sb.UID)
		p.Sandboxes = append(p.Sandboxes, sb)
		if _, made := in.Records[sb.UID]; static[sb.UID] == nil && made && key == sb.UID {
			p.Static, p.Orphaned = true, true
		}
		for _, c := range snap.PodContainers(sb.ID) {
			instances[key][c.Name] = append(instances[key][c.Name], c)
		}
	}
	// An orphan whose sandboxes are gone still has its directory, logs
	// and record to remove (an agent stopped in the middle of it).
	for uid, rec := range in.Records {
		if _, ok := byKey[uid]; !ok && static[uid] == nil {
			p := add(uid, rec.Namespace, rec.Name, uid)
			p.Static, p.Orphaned = true, true
		}
	}
	slices.SortFunc(v.pods, func(a, b *Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key))
	})
	specs := indexSpecs(in)
	for _, p := range v.pods {
		p.Conflicts = conflicts[p.Key]
		slices.SortStableFunc(p.Sandboxes, currentSandboxFirst)
		if len(p.Sandboxes) > 0 {
			p.Sandbox = p.Sandboxes[0]
		}
		switch {
		case static[p.UID] != nil && p.Static:
			resolveStatic(p, static[p.UID], instances[p.Key])
		case p.Orphaned:
			resolveOrphan(p, in.Removed[p.UID], instances[p.Key])
		default:
			annotations := in.Annotations
			if in.IgnoreAnnotations {
				annotations = nil
			}
			v.Warnings = append(v.Warnings, resolveSpecs(p, instances[p.Key], specs[nsName{p.Namespace, p.Name}], annotations)...)
		}
		for _, c := range p.Containers {
			setInstances(c, instances[p.Key][c.Name])
		}
		p.StartTime = startTime(p, in.Records)
		p.Phase = phase(p, PodStatus{}, (*Container).Running)
		if pastActiveDeadline(p, snap.Time) {
			p.Phase, p.Reason, p.Message = corev1.PodFailed, ReasonDeadlineExceeded, MessageDeadlineExceeded
		}
		if msg, ok := in.Evicted[p.UID]; ok && p.Static && !p.Orphaned {
			p.Evicted = true
			if p.Reason == "" {
				p.Phase, p.Reason, p.Message = corev1.PodFailed, ReasonEvicted, msg
			}
		}
		p.Terminating = !p.Static && !p.SandboxReady() && slices.ContainsFunc(p.Containers, (*Container).Running) ||
			p.Orphaned
		setProbeAddress(p, in)
	}
	v.index()
	return v
}

// Record is what the pod record of a static pod the agent made says
// (podfs.Record, as the view needs it).
type Record struct {
	Namespace, Name string
	// Created is when the agent first made the pod (its start time).
	Created time.Time
}

// kubelet's status of a pod past its active deadline (active_deadline.go).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ReasonEvicted is kubelet's status reason (and event reason) of a pod its
// eviction manager evicted; the message says why (Inputs.Evicted).
const ReasonEvicted = "Evicted"

// startTime is when the pod started on the node, kubelet's
// status.startTime: when the agent first made it (its record), else its
// oldest sandbox's creation; zero before it has one.
func startTime(p *Pod, made map[string]Record) time.Time {
	if rec, ok := made[p.UID]; ok && p.Static && !rec.Created.IsZero() {
		return rec.Created
	}
	var t time.Time
	for _, sb := range p.Sandboxes {
		if t.IsZero() || sb.CreatedAt.Before(t) {
			t = sb.CreatedAt
		}
	}
	return t
}

// activeDeadline is the pod's spec.activeDeadlineSeconds (0: none).
func activeDeadline(p *Pod) time.Duration {
	if p.Manifest == nil || p.Manifest.Object == nil || p.Manifest.Object.Spec.ActiveDeadlineSeconds == nil {
		return 0
	}
	return time.Duration(*p.Manifest.Object.Spec.ActiveDeadlineSeconds) * time.Second
}

// pastActiveDeadline is kubelet's activeDeadlineHandler.pastActiveDeadline
// at time now.
func pastActiveDeadline(p *Pod, now time.Time) bool {
	d := activeDeadline(p)
	return d > 0 && !p.StartTime.IsZero() && now.Sub(p.StartTime) >= d
}

// resolveStatic gives a static pod its manifest's spec: every container of
// it is the agent's, and containers the runtime has that the manifest
// does not list (a manifest is immutable: none should exist) are shown
// but never touched.
func resolveStatic(p *Pod, m *spec.Pod, observed map[string][]*cri.Container) {
	p.Source, p.Manifest = m.Source, m
	p.Policy = spec.PodPolicy{RestartPolicy: m.RestartPolicy, TerminationGracePeriodSeconds: m.TerminationGracePeriodSeconds, ProbeNetwork: m.ProbeNetwork}
	for i := range m.Containers {
		sc := &m.Containers[i]
		p.Containers = append(p.Containers, &Container{Name: sc.Name, Kind: sc.Kind, Spec: sc, Managed: true})
	}
	for _, name := range slices.Sorted(maps.Keys(observed)) {
		if _, ok := p.Container(name); !ok {
			p.Containers = append(p.Containers, &Container{Name: name, Kind: spec.Regular})
		}
	}
}

// resolveOrphan gives an orphan its containers, all the agent's to stop:
// from its last manifest when the agent saw it, else from what kubelet's
// annotations on its containers record (kubelet's
// restoreSpecsFromContainerLabels): the pod's grace period and each
// container's preStop hook.
func resolveOrphan(p *Pod, last *spec.Pod, observed map[string][]*cri.Container) {
	p.Source = "(manifest removed)"
	if last != nil {
		resolveStatic(p, last, observed)
		p.Source = last.Source + " (removed)"
		return
	}
	p.Policy = spec.PodPolicy{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: spec.DefaultGracePeriodSecond}
	for _, name := range slices.Sorted(maps.Keys(observed)) {
		newest := slices.MinFunc(observed[name], NewestFirst)
		c := &Container{Name: name, Kind: spec.Regular, Managed: true, Spec: &spec.Container{Name: name}}
		if g, err := strconv.ParseInt(newest.Annotations[podconfig.AnnotationPodTerminationGracePeriod], 10, 64); err == nil {
			p.Policy.TerminationGracePeriodSeconds = g
		}
		if raw := newest.Annotations[podconfig.AnnotationPreStopHandler]; raw != "" {
			var h corev1.LifecycleHandler
			if json.Unmarshal([]byte(raw), &h) == nil {
				c.Spec.Lifecycle = &corev1.Lifecycle{PreStop: &h}
			}
		}
		p.Containers = append(p.Containers, c)
	}
}

// currentSandboxFirst orders a pod's sandboxes: ready ones first, then the
// newest (then the highest attempt, then by ID, so the order is total).
func currentSandboxFirst(a, b *cri.Sandbox) int {
	if ar, br := a.State == cri.SandboxReady, b.State == cri.SandboxReady; ar != br {
		if ar {
			return -1
		}
		return 1
	}
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.Attempt, a.Attempt), cmp.Compare(a.ID, b.ID))
}

// NewestFirst orders a container's instances as kubelet orders container
// statuses: newest creation first (then the highest attempt, then by ID).
func NewestFirst(a, b *cri.Container) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.Attempt, a.Attempt), cmp.Compare(a.ID, b.ID))
}

// setInstances sorts a container's instances and picks the current one:
// the newest.
func setInstances(c *Container, list []*cri.Container) {
	c.Instances = slices.SortedStableFunc(slices.Values(list), NewestFirst)
	if len(c.Instances) > 0 {
		c.Current = c.Instances[0]
	}
}

// namedSpecs are the manifests and manifest errors of one namespace/name.
type namedSpecs struct {
	manifests []*spec.Pod
	errs      []*spec.Error
}

// indexSpecs groups the manifests and their errors by namespace and name:
// each pod looks its own up instead of scanning them all.
func indexSpecs(in Inputs) map[nsName]*namedSpecs {
	index := map[nsName]*namedSpecs{}
	get := func(k nsName) *namedSpecs {
		s, ok := index[k]
		if !ok {
			s = &namedSpecs{}
			index[k] = s
		}
		return s
	}
	for _, m := range in.Manifests {
		s := get(nsName{m.Namespace, m.Name})
		s.manifests = append(s.manifests, m)
	}
	for _, e := range in.ManifestErrors {
		if e.Pod != "" {
			s := get(nsName{e.Namespace, e.Pod})
			s.errs = append(s.errs, e)
		}
	}
	return index
}

// resolveSpecs gives the pod its source, policy and containers from the
// matching manifest or else the annotations (none when annotations is
// nil: then an unlisted pod keeps the default policy and is only observed).
// It returns warnings.
func resolveSpecs(p *Pod, observed map[string][]*cri.Container, named *namedSpecs, annotations AnnotationReader) []string {
	if named == nil {
		named = &namedSpecs{}
	}
	var warnings []string
	add := func(name string, kind spec.Kind) *Container {
		c, ok := p.Container(name)
		if !ok {
			c = &Container{Name: name, Kind: kind}
			p.Containers = append(p.Containers, c)
		}
		return c
	}
	observedNames := make([]string, 0, len(observed))
	for name := range observed {
		observedNames = append(observedNames, name)
	}
	sort.Strings(observedNames)
	defaults := spec.PodPolicy{RestartPolicy: "Always", TerminationGracePeriodSeconds: spec.DefaultGracePeriodSecond}

	manifest := matchManifest(p, named.manifests)
	switch {
	case manifest != nil:
		p.Source, p.Manifest = manifest.Source, manifest
		if restartsAll(manifest) {
			warnings = append(warnings, fmt.Sprintf("pod %s/%s: %s: RestartAllContainers rules are honoured for the pods the agent makes (--static-pod-path); in a pod made by someone else only the container that exits is restarted", p.Namespace, p.Name, manifest.Source))
		}
		p.Policy = spec.PodPolicy{RestartPolicy: manifest.RestartPolicy, TerminationGracePeriodSeconds: manifest.TerminationGracePeriodSeconds,
			ProbeNetwork: manifest.ProbeNetwork}
		for i := range manifest.Containers {
			sc := &manifest.Containers[i]
			c := add(sc.Name, sc.Kind)
			c.Spec, c.Managed = sc, true
		}
	default:
		if errs := named.errs; len(errs) > 0 {
			p.Problems, p.Source, p.ManifestInvalid, p.Policy = errs, errs[0].Source, true, defaults
			for _, name := range observedNames {
				add(name, spec.Regular)
			}
			return nil
		}
		p.Policy = defaults
		if annotations != nil {
			p.Policy, p.Problems = spec.PodPolicyFromAnnotations(p.Namespace, p.Name, p.Sandbox.Annotations)
		}
	}
	for _, name := range observedNames {
		add(name, spec.Regular)
	}
	_, hasPolicy := p.Sandbox.Annotations[spec.RestartPolicyAnnotation]
	hasPolicy = hasPolicy && annotations != nil && manifest == nil && len(p.Problems) == 0
	for _, name := range observedNames {
		c, _ := p.Container(name)
		if annotations == nil {
			continue
		}
		// A container's configuration never changes: any instance's
		// annotations will do; the newest is read.
		newest := slices.MinFunc(observed[name], NewestFirst)
		annotated, errs := annotations(p.Namespace, p.Name, newest)
		inManifest := manifest != nil && c.Spec != nil
		switch {
		case inManifest && (annotated != nil || errs != nil):
			warnings = append(warnings, fmt.Sprintf("pod %s/%s container %s: the manifest %s wins over the container's %s annotations", p.Namespace, p.Name, name, manifest.Source, spec.AnnotationPrefix))
		case inManifest:
		case errs != nil:
			c.Problems = errs
		case annotated != nil:
			c.Spec, c.Managed = annotated, true
			if p.Source == "" {
				p.Source = spec.SourceAnnotations
			}
		case hasPolicy:
			c.Managed = true
		}
	}
	return warnings
}

// restartsAll reports whether a container of the manifest has a
// RestartAllContainers rule.
func restartsAll(m *spec.Pod) bool {
	for _, c := range m.Containers {
		for _, r := range c.RestartPolicyRules {
			if r.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
				return true
			}
		}
	}
	return false
}

func matchManifest(p *Pod, manifests []*spec.Pod) *spec.Pod {
	for _, m := range manifests {
		if m.Namespace == p.Namespace && m.Name == p.Name && (m.UID == "" || m.UID == p.UID) {
			return m
		}
	}
	return nil
}

// setProbeAddress says where the pod's network probes go.
func setProbeAddress(p *Pod, in Inputs) {
	if p.Sandbox == nil {
		return
	}
	network := p.Policy.ProbeNetwork
	if network == "" {
		network = in.ProbeNetwork
	}
	p.PodIP = p.Sandbox.IP(in.HostIP)
	p.ProbeHost, p.InPodNetwork = ProbeAddress(p.Sandbox, network, in.HostIP)
}

// ProbeAddress returns where network probes of a pod whose sandbox is sb
// go when they name no host, given where they are dialled from (network)
// and the node's address: the pod IP, or 127.0.0.1 inside the pod's
// network namespace (inPodNetwork). A host-network pod has no address or
// namespace of its own: it is probed at the node's address, as kubelet
// does, whatever its probe network.
func ProbeAddress(sb *cri.Sandbox, network, hostIP string) (host string, inPodNetwork bool) {
	if network == spec.ProbeNetworkPod && !sb.HostNetwork {
		return "127.0.0.1", true // the pod's own loopback, inside its namespace
	}
	if ip := sb.IP(hostIP); ip != "" {
		return ip, false
	}
	if sb.HostNetwork {
		return hostIP, false
	}
	return "", false
}
