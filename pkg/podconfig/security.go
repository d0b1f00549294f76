package podconfig

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// defaultMaskedPaths and defaultReadonlyPaths are pkg/securitycontext's
// (kept in sync with moby); kubelet adds each CPU's thermal_throttle that
// exists (Node.ThermalThrottlePaths).
var (
	defaultMaskedPaths = []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/interrupts",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// maskedPaths is ConvertToRuntimeMaskedPaths: none for an Unmasked
// procMount, else the defaults.
func maskedPaths(procMount *corev1.ProcMountType, node Node) []string {
	if procMount != nil && *procMount == corev1.UnmaskedProcMount {
		return []string{}
	}
	return append(append([]string{}, defaultMaskedPaths...), node.ThermalThrottlePaths...)
}

// readonlyPaths is ConvertToRuntimeReadonlyPaths.
func readonlyPaths(procMount *corev1.ProcMountType) []string {
	if procMount != nil && *procMount == corev1.UnmaskedProcMount {
		return []string{}
	}
	return append([]string{}, defaultReadonlyPaths...)
}

// EffectiveSecurityContext is pkg/securitycontext's
// DetermineEffectiveSecurityContext: the pod's SELinux, Windows, runAsUser,
// runAsGroup and runAsNonRoot, overridden field by field by the
// container's.
func EffectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) *corev1.SecurityContext {
	var eff *corev1.SecurityContext
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff = &corev1.SecurityContext{}
		if psc.SELinuxOptions != nil {
			o := *psc.SELinuxOptions
			eff.SELinuxOptions = &o
		}
		if psc.WindowsOptions != nil {
			o := *psc.WindowsOptions
			eff.WindowsOptions = &o
		}
		eff.RunAsUser = copyPtr(psc.RunAsUser)
		eff.RunAsGroup = copyPtr(psc.RunAsGroup)
		eff.RunAsNonRoot = copyPtr(psc.RunAsNonRoot)
	}
	csc := c.SecurityContext
	switch {
	case eff == nil && csc == nil:
		return &corev1.SecurityContext{}
	case csc == nil:
		return eff
	case eff == nil:
		return csc
	}
	if csc.SELinuxOptions != nil {
		o := *csc.SELinuxOptions
		eff.SELinuxOptions = &o
	}
	if w := csc.WindowsOptions; w != nil {
		if eff.WindowsOptions == nil {
			eff.WindowsOptions = &corev1.WindowsSecurityContextOptions{}
		}
		if w.GMSACredentialSpecName != nil || w.GMSACredentialSpec != nil {
			eff.WindowsOptions.GMSACredentialSpecName = w.GMSACredentialSpecName
			eff.WindowsOptions.GMSACredentialSpec = w.GMSACredentialSpec
		}
		if w.RunAsUserName != nil {
			eff.WindowsOptions.RunAsUserName = w.RunAsUserName
		}
		if w.HostProcess != nil {
			eff.WindowsOptions.HostProcess = w.HostProcess
		}
	}
	if csc.Capabilities != nil {
		cp := *csc.Capabilities
		eff.Capabilities = &cp
	}
	if csc.Privileged != nil {
		eff.Privileged = copyPtr(csc.Privileged)
	}
	if csc.RunAsUser != nil {
		eff.RunAsUser = copyPtr(csc.RunAsUser)
	}
	if csc.RunAsGroup != nil {
		eff.RunAsGroup = copyPtr(csc.RunAsGroup)
	}
	if csc.RunAsNonRoot != nil {
		eff.RunAsNonRoot = copyPtr(csc.RunAsNonRoot)
	}
	if csc.ReadOnlyRootFilesystem != nil {
		eff.ReadOnlyRootFilesystem = copyPtr(csc.ReadOnlyRootFilesystem)
	}
	if csc.AllowPrivilegeEscalation != nil {
		eff.AllowPrivilegeEscalation = copyPtr(csc.AllowPrivilegeEscalation)
	}
	if csc.ProcMount != nil {
		eff.ProcMount = copyPtr(csc.ProcMount)
	}
	return eff
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// containerSecurityContext is determineEffectiveSecurityContext
// (kuberuntime's security_context.go).
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container, image ImageInfo, node Node) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := EffectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:   runtimeCapabilities(eff.Capabilities),
		SelinuxOptions: runtimeSELinux(eff.SELinuxOptions),
	}
	if eff.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	if eff.Privileged != nil {
		sc.Privileged = *eff.Privileged
	}
	if eff.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *eff.ReadOnlyRootFilesystem
	}
	var err error
	sc.Seccomp, err = seccompProfile(pod.Spec.SecurityContext, c.SecurityContext, node)
	if err != nil {
		return nil, err
	}
	sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c)
	if err != nil {
		return nil, err
	}
	if sc.RunAsUser == nil {
		uid, name := image.user()
		if uid != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *uid}
		}
		sc.RunAsUsername = name
	}
	sc.NamespaceOptions, err = namespaceOptions(pod)
	if err != nil {
		return nil, err
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if p := psc.SupplementalGroupsPolicy; p != nil {
			v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*p)]
			if !ok {
				return nil, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", string(*p))
			}
			sc.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(v)
		}
	}
	sc.NoNewPrivs = eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation
	sc.MaskedPaths = maskedPaths(eff.ProcMount, node)
	sc.ReadonlyPaths = readonlyPaths(eff.ProcMount)
	return sc, nil
}

// runtimeCapabilities is convertToRuntimeCapabilities.
func runtimeCapabilities(c *corev1.Capabilities) *runtimeapi.Capability {
	if c == nil {
		return nil
	}
	out := &runtimeapi.Capability{
		AddCapabilities:  make([]string, len(c.Add)),
		DropCapabilities: make([]string, len(c.Drop)),
	}
	for i, v := range c.Add {
		out.AddCapabilities[i] = string(v)
	}
	for i, v := range c.Drop {
		out.DropCapabilities[i] = string(v)
	}
	return out
}

// runtimeSELinux is convertToRuntimeSELinuxOption.
func runtimeSELinux(o *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// seccompProfile is kuberuntime's getSeccompProfile: the container's
// profile, else the pod's, else RuntimeDefault under kubelet's
// seccompDefault and Unconfined otherwise. Localhost profiles are files
// under <root>/seccomp.
func seccompProfile(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext, node Node) (*runtimeapi.SecurityProfile, error) {
	var p *corev1.SeccompProfile
	if csc != nil && csc.SeccompProfile != nil {
		p = csc.SeccompProfile
	} else if psc != nil && psc.SeccompProfile != nil {
		p = psc.SeccompProfile
	}
	return fieldSeccompProfile(p, node.Layout().SeccompDir(), node.SeccompDefault)
}

// fieldSeccompProfile is kuberuntime's fieldSeccompProfile.
func fieldSeccompProfile(p *corev1.SeccompProfile, root string, fallbackToRuntimeDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if fallbackToRuntimeDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost.")
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, *p.LocalhostProfile),
		}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// Deprecated AppArmor annotation values (k8s.io/api/core/v1).
const (
	appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
	appArmorRuntimeDefault   = "runtime/default"
	appArmorUnconfined       = "unconfined"
	appArmorLocalhostPrefix  = "localhost/"
)

// appArmorProfile is kuberuntime's getAppArmorProfile over
// pkg/security/apparmor's GetProfile: the container's field, else the
// deprecated per-container pod annotation, else the pod's field; with the
// deprecated profile string kubelet still sends beside it.
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := apparmorFor(pod, c)
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, appArmorRuntimeDefault, nil
	case corev1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, appArmorUnconfined, nil
	case corev1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			appArmorLocalhostPrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
}

func apparmorFor(pod *corev1.Pod, c *corev1.Container) *corev1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[appArmorAnnotationPrefix+c.Name]; ok {
		switch {
		case v == appArmorRuntimeDefault:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		case v == appArmorUnconfined:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, appArmorLocalhostPrefix):
			name := strings.TrimPrefix(v, appArmorLocalhostPrefix)
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.AppArmorProfile != nil {
		return psc.AppArmorProfile
	}
	return nil
}

// namespaceOptions is kuberuntime's NamespacesForPod: IPC and network of
// the node or the pod, PID of the node, the pod (shareProcessNamespace) or
// the container, and the node's user namespace. A pod asking for its own
// user namespace (hostUsers: false) needs kubelet's ID-range allocator,
// which the agent does not have.
func namespaceOptions(pod *corev1.Pod) (*runtimeapi.NamespaceOption, error) {
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return nil, errors.New("can't set `spec.hostUsers: false`: user namespaces are not supported by cri-prober")
	}
	ns := &runtimeapi.NamespaceOption{
		Ipc:           runtimeapi.NamespaceMode_POD,
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE},
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns, nil
}

// verifyRunAsNonRoot is kuberuntime's verifyRunAsNonRoot (Linux), with its
// messages: a container that must not run as root may not have runAsUser
// 0, nor, without a runAsUser, an image whose user is root, not numeric,
// or not a valid UID.
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, image ImageInfo) error {
	eff := EffectiveSecurityContext(pod, c)
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	podName := formatPod(pod)
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return configErrorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podName, c.Name)
		}
		return nil
	}
	uid, username := image.user()
	switch {
	case uid == nil && username != "":
		return configErrorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, podName, c.Name)
	case uid != nil:
		if *uid == 0 {
			return configErrorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podName, c.Name)
		}
		if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
			return configErrorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
				*uid, math.MaxInt32, strings.Join(errs, "; "), podName, c.Name)
		}
	}
	return nil
}

// formatPod is pkg/kubelet/util/format's Pod: name_namespace(uid).
func formatPod(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// user is getImageUser: the image's numeric UID, else its user name, else
// root (UID 0).
func (i ImageInfo) user() (*int64, string) {
	if i.UID != nil {
		v := *i.UID
		return &v, ""
	}
	if i.Username != "" {
		return nil, i.Username
	}
	return new(int64), ""
}

// hasPrivilegedContainer is kubecontainer's HasPrivilegedContainer: any
// init, regular or ephemeral container privileged.
func hasPrivilegedContainer(pod *corev1.Pod) bool {
	check := func(sc *corev1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if check(list[i].SecurityContext) {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if check(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}
