package podconfig

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/dump"
)

// Labels kubelet puts on sandboxes and containers (k8s.io/kubelet's
// pkg/types) and annotations it puts on containers (kuberuntime's
// labels.go).
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationPodDeletionGracePeriod    = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationRestartCount              = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler            = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts            = "io.kubernetes.container.ports"
)

// sandboxLabels is newPodLabels: the pod's labels plus its name,
// namespace and UID.
func sandboxLabels(pod *corev1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	return labels
}

// sandboxAnnotations is newPodAnnotations: the pod's annotations, as they
// are (nil stays nil).
func sandboxAnnotations(pod *corev1.Pod) map[string]string {
	if pod.Annotations == nil {
		return nil
	}
	out := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		out[k] = v
	}
	return out
}

// containerLabels is newContainerLabels.
func containerLabels(c *corev1.Container, pod *corev1.Pod) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

// containerAnnotations is newContainerAnnotations (no device plugin
// annotations: the agent has no device manager).
func containerAnnotations(c *corev1.Container, pod *corev1.Pod, restartCount int) (map[string]string, error) {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(ContainerHash(c), 16),
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		raw, err := json.Marshal(c.Lifecycle.PreStop)
		if err != nil {
			return nil, fmt.Errorf("preStop handler of container %q: %w", c.Name, err)
		}
		a[AnnotationPreStopHandler] = string(raw)
	}
	if len(c.Ports) > 0 {
		raw, err := json.Marshal(c.Ports)
		if err != nil {
			return nil, fmt.Errorf("ports of container %q: %w", c.Name, err)
		}
		a[AnnotationContainerPorts] = string(raw)
	}
	return a, nil
}

// ContainerHash is kubelet's HashContainer (pkg/kubelet/container): fnv32a
// over k8s.io/utils/dump.ForHash of the JSON of {"image", "name"}. Kubelet
// writes it in hex as io.kubernetes.container.hash and restarts a container
// whose hash no longer matches its spec.
func ContainerHash(c *corev1.Container) uint64 {
	data, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}

// RestartCount reads io.kubernetes.container.restartCount as kubelet does
// (getIntValueFromLabel): 0 when absent or not a number.
func RestartCount(annotations map[string]string) int {
	n, err := strconv.Atoi(annotations[AnnotationRestartCount])
	if err != nil {
		return 0
	}
	return n
}

// Hash reads io.kubernetes.container.hash (hex); 0 when absent or invalid.
func Hash(annotations map[string]string) uint64 {
	n, err := strconv.ParseUint(annotations[AnnotationContainerHash], 16, 64)
	if err != nil {
		return 0
	}
	return n
}

// PodUID reads io.kubernetes.pod.uid from a sandbox's or container's labels.
func PodUID(labels map[string]string) string { return labels[LabelPodUID] }

// PodName reads io.kubernetes.pod.name.
func PodName(labels map[string]string) string { return labels[LabelPodName] }

// PodNamespace reads io.kubernetes.pod.namespace.
func PodNamespace(labels map[string]string) string { return labels[LabelPodNamespace] }

// ContainerName reads io.kubernetes.container.name.
func ContainerName(labels map[string]string) string { return labels[LabelContainerName] }
