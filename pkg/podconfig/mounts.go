package podconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// mounts is kubelet's makeMounts (kubelet_pods.go) and the runtime side of
// it (kuberuntime's makeMounts): each volumeMount in order, then the
// managed /etc/hosts unless the container mounts its own, then the
// termination-message file.
func mounts(in ContainerInput, node Node, env []EnvVar) ([]*runtimeapi.Mount, error) {
	pod, c := in.Pod, in.Container
	out := []*runtimeapi.Mount{}
	for i, vm := range c.VolumeMounts {
		vol, subPath, err := mountSource(in, env, i)
		if err != nil {
			return nil, err
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath}
		if vol.Image != nil {
			m.Image = vol.Image
			m.ImageSubPath = subPath
		} else {
			m.HostPath = vol.HostPath
			if subPath != "" {
				// Kubelet bind-mounts the subPath to SubPathBindTarget and
				// hands that over; the host side says where it put it
				// (pkg/podfs PrepareContainer).
				if p, ok := in.SubPaths[i]; ok {
					m.HostPath = p
				} else {
					m.HostPath = filepath.Join(vol.HostPath, subPath)
				}
			}
		}
		if !filepath.IsAbs(m.ContainerPath) {
			m.ContainerPath = makeAbsolute(m.ContainerPath)
		}
		if m.Propagation, m.RecursiveReadOnly, err = mountOptions(vm, node); err != nil {
			return nil, err
		}
		m.Readonly = vm.ReadOnly || vol.ReadOnly
		m.SelinuxRelabel = vol.SELinuxRelabel && node.SELinuxEnabled
		out = append(out, m)
	}
	if MountsHostsFile(pod, c, in.PodIPs) {
		out = append(out, &runtimeapi.Mount{
			HostPath:       node.Layout().EtcHosts(pod.UID),
			ContainerPath:  EtcHostsPath,
			SelinuxRelabel: node.SELinuxEnabled,
			Propagation:    runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		})
	}
	if in.TerminationMessageHostPath != "" && c.TerminationMessagePath != "" {
		out = append(out, &runtimeapi.Mount{
			HostPath:       makeAbsolute(in.TerminationMessageHostPath),
			ContainerPath:  makeAbsolute(c.TerminationMessagePath),
			SelinuxRelabel: node.SELinuxEnabled,
		})
	}
	return out, nil
}

// mountSource is the first half of makeMounts' loop body for the
// container's volumeMount i, what kubelet checks before it prepares a
// subPath on the host: the volume must exist, subPathExpr is expanded, and
// the subPath must be relative and without "..". subPath is "" without
// one.
func mountSource(in ContainerInput, env []EnvVar, i int) (vol Volume, subPath string, err error) {
	c := in.Container
	vm := c.VolumeMounts[i]
	vol, ok := in.Volumes[vm.Name]
	if !ok || (vol.HostPath == "" && vol.Image == nil) {
		return Volume{}, "", configErrorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
	}
	subPath = vm.SubPath
	if vm.SubPathExpr != "" {
		if subPath, err = expandSubPath(vm.SubPathExpr, env); err != nil {
			return Volume{}, "", &ConfigError{Message: err.Error()}
		}
	}
	if subPath != "" {
		if filepath.IsAbs(subPath) {
			return Volume{}, "", configErrorf("error SubPath `%s` must not be an absolute path", subPath)
		}
		if err := ValidatePathNoBacksteps(subPath); err != nil {
			return Volume{}, "", configErrorf("unable to provision SubPath `%s`: %v", subPath, err)
		}
	}
	return vol, subPath, nil
}

// mountOptions is the second half of makeMounts' loop body, after the
// subPath is prepared: the propagation and the recursive read-only mode.
func mountOptions(vm corev1.VolumeMount, node Node) (runtimeapi.MountPropagation, bool, error) {
	prop, err := propagation(vm.MountPropagation)
	if err != nil {
		return 0, false, &ConfigError{Message: err.Error()}
	}
	rro, err := recursiveReadOnly(vm, node.RuntimeSupportsRRO)
	if err != nil {
		return 0, false, configErrorf("failed to resolve recursive read-only mode: %v", err)
	}
	return prop, rro, nil
}

// SubPathMount is a volumeMount with a subPath (or subPathExpr) on a
// volume of the host's: kubelet makes a missing subPath a directory
// (SafeMakeDir), bind-mounts <VolumeHostPath>/<SubPath> onto
// Layout.SubPathBindTarget(pod UID, Volume, container, Index)
// (PrepareSafeSubpath) and hands the runtime that path.
type SubPathMount struct {
	// Index is the mount's position in the container's volumeMounts.
	Index int
	// Volume is the volume's name, VolumeHostPath its path on the host.
	Volume         string
	VolumeHostPath string
	// SubPath is expanded and checked: relative, without "..".
	SubPath string
}

// SubPathMounts is what kubelet decides about a container's subPaths
// before it prepares them on the host (GenerateRunContainerOptions up to
// makeMounts' PrepareSafeSubpath): the hostname and the environment first,
// as kubelet makes them first, then each volumeMount in order. An image
// volume's subPath is the runtime's (Mount.ImageSubPath) and is not
// listed. Errors are *ConfigError; with one, the subPaths returned are
// those kubelet had prepared on the host before it failed: a host side
// that prepares them in order and reports their failure first fails as
// kubelet does. in.SubPaths and in.TerminationMessageHostPath are not
// read.
func SubPathMounts(in ContainerInput, node Node) ([]SubPathMount, error) {
	if in.Pod == nil || in.Container == nil {
		return nil, errors.New("container subPaths: no pod or no container")
	}
	if _, _, err := HostnameAndDomain(in.Pod, node); err != nil {
		return nil, &ConfigError{Message: err.Error()}
	}
	env, err := environment(in, node)
	if err != nil {
		return nil, err
	}
	var out []SubPathMount
	for i, vm := range in.Container.VolumeMounts {
		vol, subPath, err := mountSource(in, env, i)
		if err != nil {
			return out, err
		}
		if subPath != "" && vol.Image == nil {
			out = append(out, SubPathMount{Index: i, Volume: vm.Name, VolumeHostPath: vol.HostPath, SubPath: subPath})
		}
		if _, _, err := mountOptions(vm, node); err != nil {
			return out, err
		}
	}
	return out, nil
}

// makeAbsolute is volumeutil.MakeAbsolutePath on Linux.
func makeAbsolute(p string) string {
	return filepath.Clean("/" + p)
}

// expandSubPath is kubecontainer's ExpandContainerVolumeMounts: every
// variable of subPathExpr must have a non-empty value.
func expandSubPath(expr string, env []EnvVar) (string, error) {
	values := make(map[string]string, len(env))
	for _, e := range env {
		values[e.Name] = e.Value
	}
	missing := map[string]bool{}
	out := Expand(expr, func(name string) string {
		v, ok := values[name]
		if !ok || v == "" {
			missing[name] = true
		}
		return v
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	return out, nil
}

// ValidatePathNoBacksteps is pkg/volume/validation's: no ".." element in
// p. A subPath and a hostPath volume's path are checked with it.
func ValidatePathNoBacksteps(p string) error {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return fmt.Errorf("must not contain '..'")
		}
	}
	return nil
}

// propagation is translateMountPropagation.
func propagation(mode *corev1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	switch {
	case mode == nil, *mode == corev1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case *mode == corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case *mode == corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}

// recursiveReadOnly is resolveRecursiveReadOnly (gate RecursiveReadOnlyMounts
// is on in 1.36).
func recursiveReadOnly(m corev1.VolumeMount, runtimeSupports bool) (bool, error) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == corev1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", m.Name, *m.MountPropagation)
	}
	switch *m.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyIfPossible:
		return runtimeSupports, nil
	case corev1.RecursiveReadOnlyEnabled:
		if !runtimeSupports {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	}
	return false, fmt.Errorf("unknown recursive read-only mode %q", *m.RecursiveReadOnly)
}

// VolumeFor says how kubelet's volume plugins present a pod volume to a
// container: where the host side keeps it (under the node's Layout for
// the plugins kubelet manages, the node path for hostPath), whether the
// plugin forces it read-only, and whether it may be relabelled for
// SELinux (the plugins' GetAttributes). ok is false for the other types;
// an image volume is the host side's Volume{Image: the pulled image}.
func VolumeFor(pod *corev1.Pod, v *corev1.Volume, node Node) (vol Volume, ok bool) {
	l := node.Layout()
	s := &v.VolumeSource
	switch {
	case s.EmptyDir != nil:
		return Volume{HostPath: l.VolumeDir(pod.UID, PluginEmptyDir, v.Name), SELinuxRelabel: true}, true
	case s.HostPath != nil:
		return Volume{HostPath: s.HostPath.Path}, true
	case s.DownwardAPI != nil:
		return Volume{HostPath: l.VolumeDir(pod.UID, PluginDownwardAPI, v.Name), ReadOnly: true, SELinuxRelabel: true}, true
	case s.Projected != nil:
		return Volume{HostPath: l.VolumeDir(pod.UID, PluginProjected, v.Name), ReadOnly: true, SELinuxRelabel: true}, true
	case s.ConfigMap != nil:
		return Volume{HostPath: l.VolumeDir(pod.UID, PluginConfigMap, v.Name), ReadOnly: true, SELinuxRelabel: true}, true
	case s.Secret != nil:
		return Volume{HostPath: l.VolumeDir(pod.UID, PluginSecret, v.Name), ReadOnly: true, SELinuxRelabel: true}, true
	}
	return Volume{}, false
}
