package podconfig

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerInput is what kubelet has in hand when it makes a container's
// config: the pod and container, the start's attempt, the sandbox's IPs,
// the pulled image and what the host side prepared.
type ContainerInput struct {
	// Pod is defaulted (spec.ApplyAPIDefaults) with its static identity
	// applied (spec.StaticPod).
	Pod *corev1.Pod
	// Container is one of Pod.Spec.InitContainers or Pod.Spec.Containers.
	Container *corev1.Container
	// RestartCount is the attempt: 0 for the first start, then the
	// previous container's restartCount + 1.
	RestartCount int
	// PodIP and PodIPs are the sandbox's IPs as the runtime reports them
	// (PodSandboxStatus network ip, then additional IPs; kubelet passes
	// them unsorted, containerd reports none on the host network); PodIP
	// is the first.
	PodIP  string
	PodIPs []string
	// Image is the image the runtime resolved for Container.Image.
	Image ImageInfo
	// Volumes are the pod's volumes prepared on the host, by name
	// (VolumeFor says how kubelet's plugins present each type).
	Volumes map[string]Volume
	// SubPaths are the host paths prepared for volumeMounts with a subPath
	// (or subPathExpr), by index in Container.VolumeMounts: kubelet
	// bind-mounts <volume>/<subPath> to Layout.SubPathBindTarget and mounts
	// that (SubPathMounts lists them; pkg/podfs PrepareContainer prepares
	// them and fills this in). A mount without an entry gets
	// <volume>/<subPath>, unchecked: not kubelet's way.
	SubPaths map[int]string
	// TerminationMessageHostPath is the file the host side made for this
	// start under Layout.ContainerDir (kubelet: an empty file, mode 0666,
	// named with 8 random hex digits); "" when the container's
	// terminationMessagePath is empty or the file could not be made.
	TerminationMessageHostPath string
	// ReadEnvFile reads an env file of a fileKeyRef: path inside the
	// volume whose host path is volumeDir, joined without leaving it
	// (kubelet's securejoin); pkg/podfs ReadEnvFile. Nil: fileKeyRef
	// variables fail as an unreadable file does.
	ReadEnvFile func(volumeDir, path string) ([]byte, error)
}

// Volume is a pod volume as the host side prepared it.
type Volume struct {
	// HostPath is the volume's directory (or file) on the host.
	HostPath string
	// ReadOnly is the volume itself read-only (downwardAPI, projected,
	// configMap, secret): its mounts are read-only whatever they ask.
	ReadOnly bool
	// SELinuxRelabel is the plugin managing the volume and supporting
	// relabelling (emptyDir, downwardAPI, projected...): its mounts ask
	// the runtime to relabel when SELinux is enabled on the node.
	SELinuxRelabel bool
	// Image is set for an image volume: the runtime mounts the image.
	Image *runtimeapi.ImageSpec
}

// ImageInfo is the image the runtime resolved, from its ImageStatus.
type ImageInfo struct {
	// Ref is the image ID (kubelet's imageRef): the config's Image.
	Ref string
	// UID and Username are the image's user (ImageStatus uid/username):
	// the container runs as it without a runAsUser; neither means root.
	UID      *int64
	Username string
}

// Container is the ContainerConfig kubelet's generateContainerConfig
// makes (pkg/kubelet/kuberuntime, with GenerateRunContainerOptions of
// kubelet_pods.go): metadata and attempt, image, $(VAR)-expanded command
// and args, working directory, labels and annotations, mounts, log path,
// stdin and tty, environment, and the Linux resources and security
// context. A config kubelet would refuse is a *ConfigError carrying
// kubelet's message; other errors are the caller's (no pod or container).
// The stop signal stays unset: gate ContainerStopSignals is off in 1.36.
func Container(in ContainerInput, node Node) (*runtimeapi.ContainerConfig, error) {
	if in.Pod == nil || in.Container == nil {
		return nil, errors.New("container config: no pod or no container")
	}
	cfg, err := container(in, node)
	if err != nil {
		var ce *ConfigError
		if !errors.As(err, &ce) {
			// Kubelet reports every failure here as CreateContainerConfigError
			// with the error's text.
			err = &ConfigError{Message: err.Error()}
		}
		return nil, err
	}
	return cfg, nil
}

func container(in ContainerInput, node Node) (*runtimeapi.ContainerConfig, error) {
	pod, c := in.Pod, in.Container
	// Kubelet makes the hostname first, for the hosts file the host side
	// writes (HostsFile); an invalid one fails the container here too.
	if _, _, err := HostnameAndDomain(pod, node); err != nil {
		return nil, err
	}
	env, err := environment(in, node)
	if err != nil {
		return nil, err
	}
	ms, err := mounts(in, node, env)
	if err != nil {
		return nil, err
	}
	if err := verifyRunAsNonRoot(pod, c, in.Image); err != nil {
		return nil, err
	}
	mapping := envMapping(env)
	var command, args []string
	for _, s := range c.Command {
		command = append(command, Expand(s, mapping))
	}
	for _, s := range c.Args {
		args = append(args, Expand(s, mapping))
	}
	annotations, err := containerAnnotations(c, pod, in.RestartCount)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: in.Image.Ref, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(c, pod),
		Annotations: annotations,
		Devices:     []*runtimeapi.Device{},
		CDIDevices:  []*runtimeapi.CDIDevice{},
		Mounts:      ms,
		LogPath:     ContainerLogPath(c.Name, in.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	res, err := containerResources(pod, c, node)
	if err != nil {
		return nil, err
	}
	sc, err := containerSecurityContext(pod, c, in.Image, node)
	if err != nil {
		return nil, err
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: sc}
	cfg.Envs = make([]*runtimeapi.KeyValue, len(env))
	for i, e := range env {
		cfg.Envs[i] = &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)}
	}
	return cfg, nil
}

// Env is the container's environment as kubelet resolves it
// (makeEnvironmentVariables), for callers that need it without a config
// (exec probes, $(VAR) in hooks). Errors are *ConfigError.
func Env(in ContainerInput, node Node) ([]EnvVar, error) {
	if in.Pod == nil || in.Container == nil {
		return nil, fmt.Errorf("container environment: no pod or no container")
	}
	return environment(in, node)
}
