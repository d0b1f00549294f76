package spec

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Static makes the pods read the agent's own: made from their manifest as
// kubelet's file source makes static pods (kubelet's staticPodPath). Each
// pod is named <name>-<node>, gets a UID that hashes its manifest, its
// node name and its file (so an edited or moved manifest is another pod,
// as under kubelet), kubelet's config annotations and defaults; what a
// static pod cannot reference (secrets, config maps, service accounts,
// claims) is refused as kubelet refuses it.
type Static struct {
	// NodeName is the node's name (kubelet's --hostname-override).
	NodeName string
	// Now gives kubernetes.io/config.seen (nil: time.Now).
	Now func() time.Time
	// LocalStorageLimits is what the agent does with the pods' local
	// storage limits (run --local-storage-limits): LocalStorageIgnore
	// ("", kubelet's outcome for a static pod) or LocalStorageEnforce.
	// Unless enforced, each limit is a warning naming its field.
	LocalStorageLimits string
}

// staticFile is Static for one file: kubelet's UID hashes the file's path.
type staticFile struct {
	Static
	path string
}

func (s *Static) forFile(path string) *staticFile {
	if s == nil {
		return nil
	}
	return &staticFile{Static: *s, path: absolute(path)}
}

// apply makes a decoded pod the static pod kubelet makes of it, or says
// why kubelet would refuse it. Errors name the pod as its manifest does.
func (s *staticFile) apply(source string, pod *corev1.Pod) []*Error {
	namespace := pod.Namespace
	if namespace == "" {
		namespace = "default"
	}
	fail := func(fieldPath, detail string) []*Error {
		return []*Error{{Source: source, Namespace: namespace, Pod: pod.Name, Field: fieldPath, Detail: detail}}
	}
	if f, resource := StaticPodAPIReferences(pod); resource != "" {
		return fail(f, fmt.Sprintf("Forbidden: static pods may not reference %s (kubelet refuses the pod): there is no API server to read them from; %s", resource, staticAlternative(resource)))
	}
	if errs := staticVolumeErrors(pod); len(errs) > 0 {
		var out []*Error
		for _, fe := range errs {
			e := &Error{Source: source, Namespace: namespace, Pod: pod.Name}
			e.Field, e.Detail = fromField(fe)
			out = append(out, e)
		}
		return out
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	StaticPod(pod, s.NodeName, s.path, now())
	var out []*Error
	for _, fe := range staticSpecErrors(&pod.Spec, field.NewPath("spec")) {
		e := &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name}
		e.Field, e.Detail = fromField(fe)
		out = append(out, e)
	}
	return out
}

// staticAlternative says what to use instead of an API object.
func staticAlternative(resource string) string {
	switch resource {
	case "secrets", "configmaps":
		return "put the files on the node and mount them with a hostPath volume, or set the values in env"
	case "serviceaccounts":
		return "remove serviceAccountName (no token exists without an API server)"
	case "persistentvolumeclaims":
		return "mount the storage with a hostPath volume"
	default:
		return "remove the reference"
	}
}

// staticVolumeErrors refuses volumes the agent cannot set up: those of a
// volume plugin other than emptyDir, hostPath and downwardAPI (the ones a
// static pod can use without an API server or a storage driver). A
// projected volume is refused even with downwardAPI sources only: kubelet
// without an API server fails every projected volume ("cannot setup
// projected volume ... because kube client is not configured",
// pkg/volume/projected/projected.go), so such a pod never starts under it.
func staticVolumeErrors(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "volumes")
	for i, v := range pod.Spec.Volumes {
		vs := v.VolumeSource
		switch {
		case vs.EmptyDir != nil, vs.HostPath != nil, vs.DownwardAPI != nil:
		case vs.Projected != nil:
			errs = append(errs, field.Forbidden(path.Index(i).Child("projected"), fmt.Sprintf(
				"volume %q: kubelet cannot set up a projected volume without an API server (its static pod stays ContainerCreating with FailedMount): use a downwardAPI volume for pod fields, or a hostPath volume for files", v.Name)))
		default:
			errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf(
				"volume %q: not supported by cri-prober, which sets up emptyDir, hostPath and downwardAPI volumes only: mount the storage on the node and use a hostPath volume", v.Name)))
		}
	}
	return errs
}

// staticSpecErrors is the API server's validation of what a pod the agent
// makes needs beyond its probes and policies (those are validatePod's):
// images, volumes and their mounts, ports, resources and DNS, with the
// API server's messages.
func staticSpecErrors(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, v := range s.Volumes {
		vp := path.Child("volumes").Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), ""))
		case volumes[v.Name]:
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes[v.Name] = true
		if v.HostPath != nil && v.HostPath.Path == "" {
			errs = append(errs, field.Required(vp.Child("hostPath", "path"), ""))
		}
	}
	check := func(list []corev1.Container, name string) {
		for i := range list {
			c := &list[i]
			cp := path.Child(name).Index(i)
			if c.Image == "" {
				errs = append(errs, field.Required(cp.Child("image"), "the image to run: the agent creates the container from it"))
			}
			mounts := map[string]bool{}
			for j, m := range c.VolumeMounts {
				mp := cp.Child("volumeMounts").Index(j)
				if !volumes[m.Name] {
					errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
				}
				switch {
				case m.MountPath == "":
					errs = append(errs, field.Required(mp.Child("mountPath"), ""))
				case mounts[m.MountPath]:
					errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
				}
				mounts[m.MountPath] = true
				if m.SubPath != "" && (filepath.IsAbs(m.SubPath) || slices.Contains(strings.Split(m.SubPath, "/"), "..")) {
					errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, "must be a relative path without '..'"))
				}
			}
			for j, p := range c.Ports {
				if s.HostNetwork && p.HostPort != 0 && p.HostPort != p.ContainerPort {
					errs = append(errs, field.Invalid(cp.Child("ports").Index(j).Child("containerPort"), p.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
				}
			}
			for res, limit := range c.Resources.Limits {
				if req, ok := c.Resources.Requests[res]; ok && req.Cmp(limit) > 0 {
					errs = append(errs, field.Invalid(cp.Child("resources", "requests").Key(string(res)), req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", res, limit.String())))
				}
			}
		}
	}
	check(s.InitContainers, "initContainers")
	check(s.Containers, "containers")
	if s.DNSPolicy == corev1.DNSNone && (s.DNSConfig == nil || len(s.DNSConfig.Nameservers) == 0) {
		errs = append(errs, field.Required(path.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when DNSPolicy is None"))
	}
	return errs
}
