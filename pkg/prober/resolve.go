package prober

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// pod is one pod as the agent sees it: its sandboxes from the runtime
// (several when it was re-created: same UID), the spec that applies to it,
// and each container's newest instance.
type pod struct {
	key       string // UID, or "sandbox:<id>" for a sandbox without one
	namespace string
	name      string
	uid       string
	sandbox   *cri.Pod // the newest sandbox, preferring a ready one
	ready     bool     // some sandbox of the pod is ready
	source    string   // where its probe specs come from ("" if none)
	policy    spec.PodPolicy
	// errs are pod-level problems. With an invalid manifest nothing of the
	// pod is probed and no container is ready.
	errs []*spec.Error
	// containers by name: every name the runtime or the spec knows.
	containers map[string]*podContainer
}

// podContainer is one container of a pod.
type podContainer struct {
	name     string
	instance *cri.Container  // newest instance; nil before it exists
	spec     *spec.Container // nil: not probed
	sidecar  bool
	errs     []*spec.Error // invalid spec: not probed, and never ready
	// managed: cri-prober may stop and restart it (a manifest lists it, it
	// has probe annotations, or its sandbox has a restart policy
	// annotation). Others are only observed.
	managed bool
}

// policySignature sums up what the restarter reads of a pod: its restart
// policy, grace period and managed containers; "" if none is managed.
func (p *pod) policySignature() string {
	var managed []string
	for name, pc := range p.containers {
		if pc.managed {
			managed = append(managed, name)
		}
	}
	if len(managed) == 0 {
		return ""
	}
	sort.Strings(managed)
	return fmt.Sprintf("%s/%d/%s", p.policy.RestartPolicy, p.policy.TerminationGracePeriodSeconds, strings.Join(managed, ","))
}

// resolution is the outcome of matching specs to the runtime's pods.
type resolution struct {
	pods     []*pod
	warnings []string
}

// annotationReader reads a container's probe specs from its annotations.
type annotationReader func(p *pod, c *cri.Container) (*spec.Container, []*spec.Error)

// resolve matches the runtime's pods with manifests and annotations. A
// manifest applies to the pods with its namespace and name (and UID, when it
// sets one); annotations apply to containers no manifest lists.
//
// A pod named by a manifest that is invalid gets that manifest's errors and
// no probes: it is never reported ready, rather than treated as unprobed.
func resolve(snap *cri.Snapshot, manifests []*spec.Pod, manifestErrs []*spec.Error, annotations annotationReader) resolution {
	var res resolution
	if snap == nil {
		return res
	}
	groups := map[string]*pod{}
	var order []string
	for _, sb := range snap.Pods() {
		key := sb.Key()
		p, ok := groups[key]
		if !ok {
			p = &pod{key: key, namespace: sb.Namespace, name: sb.Name, uid: sb.UID, containers: map[string]*podContainer{}}
			groups[key] = p
			order = append(order, key)
		}
		if p.sandbox == nil || newer(sb, p.sandbox) {
			p.sandbox = sb
		}
		p.ready = p.ready || sb.State == cri.SandboxReady
		for _, c := range snap.PodContainers(sb.ID) {
			pc := p.container(c.Name)
			if pc.instance == nil || c.CreatedAt.After(pc.instance.CreatedAt) ||
				(c.CreatedAt.Equal(pc.instance.CreatedAt) && c.Attempt > pc.instance.Attempt) {
				pc.instance = c
			}
		}
	}
	sort.Strings(order)

	for _, key := range order {
		p := groups[key]
		manifest := matchManifest(p, manifests)
		if manifest != nil {
			p.source = manifest.Source
			p.policy = spec.PodPolicy{RestartPolicy: manifest.RestartPolicy, TerminationGracePeriodSeconds: manifest.TerminationGracePeriodSeconds,
				ProbeNetwork: manifest.ProbeNetwork}
			for i := range manifest.Containers {
				c := &manifest.Containers[i]
				pc := p.container(c.Name)
				pc.sidecar = c.Sidecar
				pc.managed = true
				if c.HasProbes() {
					pc.spec = c
				}
			}
		} else if errs := errorsFor(p, manifestErrs); len(errs) > 0 {
			p.errs, p.source = errs, errs[0].Source
			p.policy = spec.PodPolicy{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: spec.DefaultGracePeriodSecond}
			res.pods = append(res.pods, p)
			continue
		} else {
			p.policy, p.errs = spec.PodPolicyFromAnnotations(p.namespace, p.name, p.sandbox.Annotations)
		}
		_, hasPolicy := p.sandbox.Annotations[spec.RestartPolicyAnnotation]
		hasPolicy = hasPolicy && manifest == nil && len(p.errs) == 0
		for _, name := range p.sortedNames() {
			pc := p.containers[name]
			if pc.instance == nil {
				continue
			}
			annotated, errs := annotations(p, pc.instance)
			_, inManifest := manifestContainer(manifest, name)
			switch {
			case inManifest && (annotated != nil || errs != nil):
				res.warnings = append(res.warnings, fmt.Sprintf("pod %s/%s container %s: the manifest %s wins over the container's %s annotations", p.namespace, p.name, name, manifest.Source, spec.AnnotationPrefix))
			case inManifest:
			case errs != nil:
				pc.errs = errs
			case annotated != nil:
				pc.spec = annotated
				pc.managed = true
				if p.source == "" {
					p.source = "annotations"
				}
			case hasPolicy:
				pc.managed = true
			}
		}
		res.pods = append(res.pods, p)
	}
	return res
}

// newer says whether sandbox a supersedes b as the pod's current one.
func newer(a, b *cri.Pod) bool {
	if (a.State == cri.SandboxReady) != (b.State == cri.SandboxReady) {
		return a.State == cri.SandboxReady
	}
	return a.CreatedAt.After(b.CreatedAt)
}

func matchManifest(p *pod, manifests []*spec.Pod) *spec.Pod {
	for _, m := range manifests {
		if m.Namespace == p.namespace && m.Name == p.name && (m.UID == "" || m.UID == p.uid) {
			return m
		}
	}
	return nil
}

// errorsFor returns the manifest errors about pod p.
func errorsFor(p *pod, errs []*spec.Error) []*spec.Error {
	var out []*spec.Error
	for _, e := range errs {
		if e.Pod == p.name && e.Namespace == p.namespace {
			out = append(out, e)
		}
	}
	return out
}

func manifestContainer(m *spec.Pod, name string) (*spec.Container, bool) {
	if m == nil {
		return nil, false
	}
	return m.Container(name)
}

func (p *pod) container(name string) *podContainer {
	pc, ok := p.containers[name]
	if !ok {
		pc = &podContainer{name: name}
		p.containers[name] = pc
	}
	return pc
}

func (p *pod) sortedNames() []string {
	names := make([]string, 0, len(p.containers))
	for n := range p.containers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// probed reports whether any container of the pod is probed.
func (p *pod) probed() bool {
	for _, pc := range p.containers {
		if pc.spec != nil {
			return true
		}
	}
	return false
}

// status builds what the pod's workers read. hostIP stands in for the pod
// IP of a host-network sandbox, as kubelet uses the node's address.
func (p *pod) status(hostIP, defaultNetwork string) *podStatus {
	s := &podStatus{
		key:           p.key,
		namespace:     p.namespace,
		name:          p.name,
		restartPolicy: p.policy.RestartPolicy,
		ip:            p.sandbox.IP(),
		containers:    make(map[string]containerStatus, len(p.containers)),
	}
	if s.ip == "" && p.sandbox.HostNetwork {
		s.ip = hostIP
	}
	network := p.policy.ProbeNetwork
	if network == "" {
		network = defaultNetwork
	}
	// A host-network pod has no namespace of its own: probed as kubelet
	// would, at the node's address.
	s.inPodNetwork = network == spec.ProbeNetworkPod && !p.sandbox.HostNetwork
	s.netns = p.sandbox.NetNS
	var regular []containerStatus
	running := false
	for name, pc := range p.containers {
		if pc.instance == nil {
			continue
		}
		cs := containerStatus{
			id:        pc.instance.ID,
			state:     pc.instance.State,
			startedAt: pc.instance.StartedAt,
			exitCode:  pc.instance.ExitCode,
		}
		if pc.spec != nil {
			cs.hasStartupProbe = pc.spec.Startup != nil
			cs.hasReadinessProbe = pc.spec.Readiness != nil
		}
		s.containers[name] = cs
		running = running || cs.running()
		if !pc.sidecar {
			regular = append(regular, cs)
		}
	}
	s.phase = podPhase(regular, p.policy.RestartPolicy, p.ready)
	s.terminating = !p.ready && running
	if s.restartPolicy == "" {
		s.restartPolicy = corev1.RestartPolicyAlways
	}
	return s
}
