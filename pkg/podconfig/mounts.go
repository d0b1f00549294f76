package podconfig

import (
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
	mountHosts := ShouldMountHostsFile(pod, in.PodIPs)
	for i, vm := range c.VolumeMounts {
		mountHosts = mountHosts && vm.MountPath != EtcHostsPath
		vol, ok := in.Volumes[vm.Name]
		if !ok || (vol.HostPath == "" && vol.Image == nil) {
			return nil, configErrorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if subPath, err = expandSubPath(vm.SubPathExpr, env); err != nil {
				return nil, &ConfigError{Message: err.Error()}
			}
		}
		if subPath != "" {
			if filepath.IsAbs(subPath) {
				return nil, configErrorf("error SubPath `%s` must not be an absolute path", subPath)
			}
			if err := noBacksteps(subPath); err != nil {
				return nil, configErrorf("unable to provision SubPath `%s`: %v", subPath, err)
			}
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath}
		if vol.Image != nil {
			m.Image = vol.Image
			m.ImageSubPath = subPath
		} else {
			m.HostPath = vol.HostPath
			if subPath != "" {
				// Kubelet bind-mounts the subPath to SubPathBindTarget and
				// hands that over; the host side says where it put it.
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
		var err error
		if m.Propagation, err = propagation(vm.MountPropagation); err != nil {
			return nil, &ConfigError{Message: err.Error()}
		}
		if m.RecursiveReadOnly, err = recursiveReadOnly(vm, node.RuntimeSupportsRRO); err != nil {
			return nil, configErrorf("failed to resolve recursive read-only mode: %v", err)
		}
		m.Readonly = vm.ReadOnly || vol.ReadOnly
		m.SelinuxRelabel = vol.SELinuxRelabel && node.SELinuxEnabled
		out = append(out, m)
	}
	if mountHosts {
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

// noBacksteps is pkg/volume/validation's ValidatePathNoBacksteps.
func noBacksteps(p string) error {
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
