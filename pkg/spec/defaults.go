package spec

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ApplyAPIDefaults applies the API server's defaults to a pod
// (SetObjectDefaults_Pod of pkg/apis/core/v1 in Kubernetes 1.36, with the
// gates on by default there: PodLevelResources, ImageVolume), as the
// decoder does for a static pod before kubelet sees it. It is idempotent.
// The namespace is not defaulted: the API server takes it from the request
// and kubelet's static-pod source sets it (StaticPod).
func ApplyAPIDefaults(pod *corev1.Pod) {
	defaultPodObject(pod)
	s := &pod.Spec
	// SetDefaults_PodSpec.
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(corev1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.EphemeralContainers {
		defaultContainer((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUpResources(s.Overhead)
	if s.Resources != nil {
		roundUpResources(s.Resources.Limits)
		roundUpResources(s.Resources.Requests)
	}
}

// defaultPodObject is SetDefaults_Pod: requests default to limits, the
// pod-level defaults, service links, and host ports under hostNetwork.
func defaultPodObject(pod *corev1.Pod) {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			r := &list[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			for k, v := range r.Limits {
				if _, ok := r.Requests[k]; !ok {
					r.Requests[k] = v.DeepCopy()
				}
			}
		}
	}
	defaultHugePagePodLimits(pod)
	defaultPodRequests(pod)
	if pod.Spec.EnableServiceLinks == nil {
		v := corev1.DefaultEnableServiceLinks
		pod.Spec.EnableServiceLinks = &v
	}
	if pod.Spec.HostNetwork {
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				for j := range list[i].Ports {
					if p := &list[i].Ports[j]; p.HostPort == 0 {
						p.HostPort = p.ContainerPort
					}
				}
			}
		}
	}
}

// IsPodLevelResource reports whether spec.resources may set the resource
// (component-helpers' IsSupportedPodLevelResource): cpu, memory, hugepages.
func IsPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func hasPodLevel(list corev1.ResourceList) bool {
	for name := range list {
		if IsPodLevelResource(name) {
			return true
		}
	}
	return false
}

// defaultPodRequests is pkg/apis/core/v1's defaultPodRequests: with
// pod-level limits, pod-level requests default to the containers'
// effective requests, else to the pod-level limits.
func defaultPodRequests(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Limits) == 0 {
		return
	}
	reqs := r.Requests
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	for k, v := range ContainerRequests(pod) {
		// Overcommit is allowed for everything but hugepages.
		if _, ok := reqs[k]; !ok && IsPodLevelResource(k) && !strings.HasPrefix(string(k), corev1.ResourceHugePagesPrefix) {
			reqs[k] = v.DeepCopy()
		}
	}
	for k, v := range r.Limits {
		if _, ok := reqs[k]; !ok && IsPodLevelResource(k) {
			reqs[k] = v.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		r.Requests = reqs
	}
}

// defaultHugePagePodLimits is pkg/apis/core/v1's defaultHugePagePodLimits.
func defaultHugePagePodLimits(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || (len(r.Limits) == 0 && len(r.Requests) == 0) {
		return
	}
	lims := r.Limits
	if lims == nil {
		lims = corev1.ResourceList{}
	}
	for k, v := range ContainerLimits(pod) {
		if !strings.HasPrefix(string(k), corev1.ResourceHugePagesPrefix) {
			continue
		}
		if _, ok := r.Requests[k]; ok {
			continue
		}
		if _, ok := lims[k]; !ok {
			lims[k] = v.DeepCopy()
		}
	}
	if len(lims) > 0 {
		r.Limits = lims
	}
}

// ContainerRequests is component-helpers' AggregateContainerRequests with
// no options: the sum over regular containers and sidecars, or the largest
// init container's need (plus the sidecars started before it) if more.
func ContainerRequests(pod *corev1.Pod) corev1.ResourceList {
	return aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
}

// ContainerLimits is component-helpers' AggregateContainerLimits with no
// options.
func ContainerLimits(pod *corev1.Pod) corev1.ResourceList {
	return aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
}

func aggregate(pod *corev1.Pod, of func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(sum, of(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	inits := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		need := of(c)
		if isSidecar(c) {
			addResources(sum, need)
			addResources(sidecars, need)
			need = sidecars
		} else {
			tmp := corev1.ResourceList{}
			addResources(tmp, need)
			addResources(tmp, sidecars)
			need = tmp
		}
		maxResources(inits, need)
	}
	maxResources(sum, inits)
	return sum
}

func addResources(list, add corev1.ResourceList) {
	for name, q := range add {
		if v, ok := list[name]; ok {
			v.Add(q)
			list[name] = v
		} else {
			list[name] = q.DeepCopy()
		}
	}
}

func maxResources(list, other corev1.ResourceList) {
	for name, q := range other {
		if v, ok := list[name]; !ok || q.Cmp(v) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

// roundUpResources is SetDefaults_ResourceList: quantities round up to
// milli scale.
func roundUpResources(list corev1.ResourceList) {
	for k, v := range list {
		v.RoundUp(-3)
		list[k] = v
	}
}

func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if isEmptyVolumeSource(src) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = defaultPullPolicy(src.Image.Reference)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		t := corev1.HostPathUnset
		src.HostPath.Type = &t
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = ptrInt32(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if rbd := src.RBD; rbd != nil {
		if rbd.RBDPool == "" {
			rbd.RBDPool = "rbd"
		}
		if rbd.RadosUser == "" {
			rbd.RadosUser = "admin"
		}
		if rbd.Keyring == "" {
			rbd.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptrInt32(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIItems(d.Items)
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = ptrInt32(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if a := src.AzureDisk; a != nil {
		if a.CachingMode == nil {
			m := corev1.AzureDataDiskCachingReadWrite
			a.CachingMode = &m
		}
		if a.FSType == nil {
			s := "ext4"
			a.FSType = &s
		}
		if a.ReadOnly == nil {
			b := false
			a.ReadOnly = &b
		}
		if a.Kind == nil {
			k := corev1.AzureSharedBlobDisk
			a.Kind = &k
		}
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptrInt32(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for j := range p.Sources {
			s := &p.Sources[j]
			if s.DownwardAPI != nil {
				defaultDownwardAPIItems(s.DownwardAPI.Items)
			}
			if t := s.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				h := int64(time.Hour.Seconds())
				t.ExpirationSeconds = &h
			}
		}
	}
	if s := src.ScaleIO; s != nil {
		if s.StorageMode == "" {
			s.StorageMode = "ThinProvisioned"
		}
		if s.FSType == "" {
			s.FSType = "xfs"
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := corev1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUpResources(spec.Resources.Limits)
		roundUpResources(spec.Resources.Requests)
	}
}

// isEmptyVolumeSource is ptr.AllPtrFieldsNil on a VolumeSource: a volume
// that names no source is an emptyDir.
func isEmptyVolumeSource(s *corev1.VolumeSource) bool {
	return *s == corev1.VolumeSource{}
}

func defaultDownwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for j := range c.Ports {
		if c.Ports[j].Protocol == "" {
			c.Ports[j].Protocol = corev1.ProtocolTCP
		}
	}
	for j := range c.Env {
		vf := c.Env[j].ValueFrom
		if vf == nil {
			continue
		}
		if vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
		if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil {
			b := false
			vf.FileKeyRef.Optional = &b
		}
	}
	roundUpResources(c.Resources.Limits)
	roundUpResources(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		DefaultProbe(p)
		if g := p.GRPC; g != nil && g.Service == nil {
			s := ""
			g.Service = &s
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is SetDefaults_Container's: Always for the tag
// "latest", given or implied (no tag and no digest), else IfNotPresent
// (also for a reference that does not parse, as the error is ignored).
func defaultPullPolicy(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// The reference grammar of github.com/distribution/reference, which
// parsers.ParseImageName uses through ParseNormalizedNamed.
var referenceRE = func() *regexp.Regexp {
	const (
		alnum     = `[a-z0-9]+`
		separator = `(?:[._]|__|[-]+)`
		pathComp  = alnum + `(?:` + separator + alnum + `)*`
		domComp   = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		ipv6      = `\[(?:[a-fA-F0-9:]+)\]`
		host      = `(?:` + domComp + `(?:\.` + domComp + `)*|` + ipv6 + `)`
		domain    = host + `(?::[0-9]+)?`
		name      = `(?:` + domain + `/)?` + pathComp + `(?:/` + pathComp + `)*`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`
	)
	return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
}()

var hex64RE = regexp.MustCompile(`^[a-f0-9]{64}$`)

// imageTag is the tag parsers.ParseImageName returns: the tag given,
// "latest" when there is neither tag nor digest, "" when the reference
// does not parse.
func imageTag(image string) string {
	m := referenceRE.FindStringSubmatch(image)
	if m == nil || len(m[1]) > 255 || hex64RE.MatchString(m[1]) {
		return ""
	}
	if d := m[3]; d != "" {
		alg, enc, _ := strings.Cut(d, ":")
		want := map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}[alg]
		if want == 0 || len(enc) != want || strings.ToLower(enc) != enc {
			return ""
		}
	}
	if m[2] == "" && m[3] == "" {
		return "latest"
	}
	return m[2]
}

func ptrInt32(v int32) *int32 { return &v }

// Static pod annotations kubelet's config sources set (pkg/kubelet/types).
const (
	ConfigSourceAnnotation    = "kubernetes.io/config.source"
	ConfigHashAnnotation      = "kubernetes.io/config.hash"
	ConfigFirstSeenAnnotation = "kubernetes.io/config.seen"
	// ConfigSourceFile is kubelet's file source (--pod-manifest-path).
	ConfigSourceFile = "file"
)

// timestampLayout is kubelet's RFC3339NanoFixed, the format of
// kubernetes.io/config.seen.
const timestampLayout = "2006-01-02T15:04:05.000000000Z07:00"

// StaticPod makes a manifest's pod what kubelet's file source makes of it
// (pkg/kubelet/config: the decoder's API defaults, applyDefaults for a
// file, then the source and first-seen annotations): the UID when none is
// given, the name <name>-<node name>, the namespace "default" when empty,
// spec.nodeName, the kubernetes.io/config.{hash,source,seen} annotations,
// the NoExecute toleration that keeps it from eviction, phase Pending.
// source is the manifest's path, seen the time the agent first read it.
//
// Kubelet's UID is fnv128a over a spew dump of its internal Pod type
// followed by "host:<node>file:<path>"; that type is not in k8s.io/api,
// so the dump cannot be reproduced outside kubelet. The UID here is
// fnv128a (hex) over the defaulted v1 pod's JSON followed by the same
// "host:<node>file:<path>": just as stable and as unique, but a value
// kubelet would not compute for the same file.
func StaticPod(pod *corev1.Pod, nodeName, source string, seen time.Time) {
	// The decoder leaves no kind and apiVersion on kubelet's pod.
	pod.TypeMeta = metav1.TypeMeta{}
	ApplyAPIDefaults(pod)
	if pod.UID == "" {
		h := fnv.New128a()
		data, err := json.Marshal(pod)
		if err != nil {
			// A Pod always marshals; keep the hash defined regardless.
			data = []byte(fmt.Sprintf("%#v", pod))
		}
		h.Write(data)
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", source)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = fmt.Sprintf("%s-%s", pod.Name, strings.ToLower(nodeName))
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	addOrUpdateToleration(pod, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	pod.Status.Phase = corev1.PodPending
	pod.Annotations[ConfigSourceAnnotation] = ConfigSourceFile
	if _, ok := pod.Annotations[ConfigFirstSeenAnnotation]; !ok {
		pod.Annotations[ConfigFirstSeenAnnotation] = seen.Format(timestampLayout)
	}
}

// addOrUpdateToleration is pkg/apis/core/helper's AddOrUpdateTolerationInPod.
func addOrUpdateToleration(pod *corev1.Pod, t corev1.Toleration) {
	var out []corev1.Toleration
	updated := false
	for _, old := range pod.Spec.Tolerations {
		if old.Key == t.Key && old.Effect == t.Effect && old.Operator == t.Operator && old.Value == t.Value {
			if equalToleration(old, t) {
				return
			}
			out = append(out, t)
			updated = true
			continue
		}
		out = append(out, old)
	}
	if !updated {
		out = append(out, t)
	}
	pod.Spec.Tolerations = out
}

func equalToleration(a, b corev1.Toleration) bool {
	if (a.TolerationSeconds == nil) != (b.TolerationSeconds == nil) {
		return false
	}
	if a.TolerationSeconds != nil && *a.TolerationSeconds != *b.TolerationSeconds {
		return false
	}
	a.TolerationSeconds, b.TolerationSeconds = nil, nil
	return a == b
}

// StaticPodAPIReferences is pkg/api/pod's HasAPIObjectReference, which
// kubelet applies to static pods (gate PreventStaticPodAPIReferences, on
// in 1.36): the first reference to an API object, as the field that makes
// it and the resource kubelet names in "static pods may not reference
// <resource>". Both are empty when the pod references none.
func StaticPodAPIReferences(pod *corev1.Pod) (field string, resource string) {
	s := &pod.Spec
	if s.ServiceAccountName != "" {
		return "spec.serviceAccountName", "serviceaccounts"
	}
	//nolint:staticcheck // the conversion to the internal type copies it into serviceAccountName
	if s.DeprecatedServiceAccount != "" {
		return "spec.serviceAccount", "serviceaccounts"
	}
	if f := secretReference(s); f != "" {
		return f, "secrets"
	}
	if f := configMapReference(s); f != "" {
		return f, "configmaps"
	}
	if len(s.ResourceClaims) > 0 {
		return "spec.resourceClaims", "resourceclaims"
	}
	for i := range s.Volumes {
		v := &s.Volumes[i].VolumeSource
		f := fmt.Sprintf("spec.volumes[%d]", i)
		switch {
		case v.AWSElasticBlockStore != nil, v.AzureDisk != nil, v.CephFS != nil, v.Cinder != nil,
			v.DownwardAPI != nil, v.EmptyDir != nil, v.FC != nil, v.FlexVolume != nil, v.Flocker != nil, v.GCEPersistentDisk != nil,
			v.GitRepo != nil, v.HostPath != nil, v.Image != nil, v.ISCSI != nil, v.NFS != nil, v.PhotonPersistentDisk != nil,
			v.PortworxVolume != nil, v.Quobyte != nil, v.RBD != nil, v.ScaleIO != nil, v.StorageOS != nil, v.VsphereVolume != nil:
			continue
		case v.ConfigMap != nil:
			return f + ".configMap", "configmaps (via configmap volumes)"
		case v.Secret != nil:
			return f + ".secret", "secrets (via secret volumes)"
		case v.CSI != nil:
			return f + ".csi", "csidrivers (via CSI volumes)"
		case v.Glusterfs != nil:
			return f + ".glusterfs", "endpoints (via glusterFS volumes)"
		case v.PersistentVolumeClaim != nil:
			return f + ".persistentVolumeClaim", "persistentvolumeclaims"
		case v.Ephemeral != nil:
			return f + ".ephemeral", "persistentvolumeclaims (via ephemeral volumes)"
		case v.AzureFile != nil:
			return f + ".azureFile", "secrets (via azureFile volumes)"
		case v.Projected != nil:
			for j, src := range v.Projected.Sources {
				pf := fmt.Sprintf("%s.projected.sources[%d]", f, j)
				switch {
				case src.ConfigMap != nil:
					return pf + ".configMap", "configmaps (via projected volumes)"
				case src.Secret != nil:
					return pf + ".secret", "secrets (via projected volumes)"
				case src.ServiceAccountToken != nil:
					return pf + ".serviceAccountToken", "serviceaccounts (via projected volumes)"
				case src.ClusterTrustBundle != nil:
					return pf + ".clusterTrustBundle", "clustertrustbundles"
				case src.PodCertificate != nil:
					return pf + ".podCertificate", "podcertificates"
				case src.DownwardAPI != nil:
					continue
				default:
					// Kubelet refuses it too: "unknown source for projected volume".
					return pf, "an unknown projected volume source"
				}
			}
		default:
			return f, "an unknown volume type"
		}
	}
	return "", ""
}

// allContainers lists the containers in pkg/api/pod's AllContainers order.
func allContainers(s *corev1.PodSpec) (list []*corev1.Container, paths []string) {
	for i := range s.InitContainers {
		list = append(list, &s.InitContainers[i])
		paths = append(paths, fmt.Sprintf("spec.initContainers[%d]", i))
	}
	for i := range s.Containers {
		list = append(list, &s.Containers[i])
		paths = append(paths, fmt.Sprintf("spec.containers[%d]", i))
	}
	for i := range s.EphemeralContainers {
		list = append(list, (*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
		paths = append(paths, fmt.Sprintf("spec.ephemeralContainers[%d]", i))
	}
	return list, paths
}

// secretReference is VisitPodSecretNames stopping at the first name.
func secretReference(s *corev1.PodSpec) string {
	for i, r := range s.ImagePullSecrets {
		if r.Name != "" {
			return fmt.Sprintf("spec.imagePullSecrets[%d]", i)
		}
	}
	list, paths := allContainers(s)
	for k, c := range list {
		for i, e := range c.EnvFrom {
			if e.SecretRef != nil && e.SecretRef.Name != "" {
				return fmt.Sprintf("%s.envFrom[%d].secretRef", paths[k], i)
			}
		}
		for i, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				return fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef", paths[k], i)
			}
		}
	}
	for i := range s.Volumes {
		v := &s.Volumes[i].VolumeSource
		f := fmt.Sprintf("spec.volumes[%d]", i)
		var name, sub string
		switch {
		case v.AzureFile != nil:
			name, sub = v.AzureFile.SecretName, ".azureFile.secretName"
		case v.CephFS != nil && v.CephFS.SecretRef != nil:
			name, sub = v.CephFS.SecretRef.Name, ".cephfs.secretRef"
		case v.Cinder != nil && v.Cinder.SecretRef != nil:
			name, sub = v.Cinder.SecretRef.Name, ".cinder.secretRef"
		case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
			name, sub = v.FlexVolume.SecretRef.Name, ".flexVolume.secretRef"
		case v.Projected != nil:
			for j, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name != "" {
					return fmt.Sprintf("%s.projected.sources[%d].secret", f, j)
				}
			}
		case v.RBD != nil && v.RBD.SecretRef != nil:
			name, sub = v.RBD.SecretRef.Name, ".rbd.secretRef"
		case v.Secret != nil:
			name, sub = v.Secret.SecretName, ".secret"
		case v.ScaleIO != nil && v.ScaleIO.SecretRef != nil:
			name, sub = v.ScaleIO.SecretRef.Name, ".scaleIO.secretRef"
		case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
			name, sub = v.ISCSI.SecretRef.Name, ".iscsi.secretRef"
		case v.StorageOS != nil && v.StorageOS.SecretRef != nil:
			name, sub = v.StorageOS.SecretRef.Name, ".storageos.secretRef"
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			name, sub = v.CSI.NodePublishSecretRef.Name, ".csi.nodePublishSecretRef"
		}
		if name != "" {
			return f + sub
		}
	}
	return ""
}

// configMapReference is VisitPodConfigmapNames stopping at the first name.
func configMapReference(s *corev1.PodSpec) string {
	list, paths := allContainers(s)
	for k, c := range list {
		for i, e := range c.EnvFrom {
			if e.ConfigMapRef != nil && e.ConfigMapRef.Name != "" {
				return fmt.Sprintf("%s.envFrom[%d].configMapRef", paths[k], i)
			}
		}
		for i, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name != "" {
				return fmt.Sprintf("%s.env[%d].valueFrom.configMapKeyRef", paths[k], i)
			}
		}
	}
	for i := range s.Volumes {
		v := &s.Volumes[i].VolumeSource
		switch {
		case v.Projected != nil:
			for j, src := range v.Projected.Sources {
				if src.ConfigMap != nil && src.ConfigMap.Name != "" {
					return fmt.Sprintf("spec.volumes[%d].projected.sources[%d].configMap", i, j)
				}
			}
		case v.ConfigMap != nil && v.ConfigMap.Name != "":
			return fmt.Sprintf("spec.volumes[%d].configMap", i)
		}
	}
	return ""
}
