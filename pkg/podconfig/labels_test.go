package podconfig

import (
	"reflect"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Rows of kuberuntime's TestContainerLabels and TestContainerAnnotations.
func TestContainerLabelsAndAnnotations(t *testing.T) {
	deletionGrace, terminationGrace := int64(10), int64(10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: "test_pod_namespace", UID: "test_pod_uid", DeletionGracePeriodSeconds: &deletionGrace},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &terminationGrace},
	}
	c := &corev1.Container{
		Name: "test_container", Image: "busybox",
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP}},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec:    &corev1.ExecAction{Command: []string{"action1", "action2"}},
			HTTPGet: &corev1.HTTPGetAction{Path: "path", Host: "host", Port: intstr.FromInt32(8080), Scheme: "scheme"},
		}},
	}
	labels := containerLabels(c, pod)
	wantLabels := map[string]string{
		"io.kubernetes.pod.name": "test_pod", "io.kubernetes.pod.namespace": "test_pod_namespace",
		"io.kubernetes.pod.uid": "test_pod_uid", "io.kubernetes.container.name": "test_container",
	}
	if !reflect.DeepEqual(labels, wantLabels) {
		t.Errorf("labels %v", labels)
	}
	if PodName(labels) != "test_pod" || PodNamespace(labels) != "test_pod_namespace" || PodUID(labels) != "test_pod_uid" || ContainerName(labels) != "test_container" {
		t.Error("label readers")
	}
	a, err := containerAnnotations(c, pod, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"io.kubernetes.container.hash":                     strconv.FormatUint(ContainerHash(c), 16),
		"io.kubernetes.container.restartCount":             "3",
		"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
		"io.kubernetes.container.terminationMessagePolicy": "File",
		"io.kubernetes.pod.deletionGracePeriod":            "10",
		"io.kubernetes.pod.terminationGracePeriod":         "10",
		"io.kubernetes.container.preStopHandler":           `{"exec":{"command":["action1","action2"]},"httpGet":{"path":"path","port":8080,"host":"host","scheme":"scheme"}}`,
		"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":80,"protocol":"TCP"},{"name":"dns","hostPort":53,"containerPort":53,"protocol":"UDP"}]`,
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("annotations\n%v\nwant\n%v", a, want)
	}
	if RestartCount(a) != 3 || Hash(a) != ContainerHash(c) {
		t.Error("annotation readers")
	}
	// Without the optional fields.
	plain := &corev1.Container{Name: "c", Image: "i"}
	a, _ = containerAnnotations(plain, &corev1.Pod{}, 0)
	if len(a) != 4 {
		t.Errorf("plain annotations %v", a)
	}
}

func TestReaders(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
	}{{"", 0}, {"7", 7}, {"x", 0}, {"-1", -1}} {
		a := map[string]string{}
		if tc.v != "" {
			a[AnnotationRestartCount] = tc.v
		}
		if got := RestartCount(a); got != tc.want {
			t.Errorf("RestartCount(%q) = %d", tc.v, got)
		}
	}
	if Hash(map[string]string{AnnotationContainerHash: "zz"}) != 0 || Hash(nil) != 0 || Hash(map[string]string{AnnotationContainerHash: "ff"}) != 255 {
		t.Error("Hash reader")
	}
}

// ContainerHash depends on the name and image only; kubelet's own values
// for other containers are in testdata/kubelet/hashes.json.
func TestContainerHash(t *testing.T) {
	a := &corev1.Container{Name: "app", Image: "registry.example/web:2.4"}
	if got := strconv.FormatUint(ContainerHash(a), 16); got != "d0db312d" {
		t.Errorf("ContainerHash = %s, HashContainer: d0db312d", got)
	}
	b := a.DeepCopy()
	b.Args = []string{"changed"}
	b.Env = []corev1.EnvVar{{Name: "X", Value: "y"}}
	if ContainerHash(b) != ContainerHash(a) {
		t.Error("the hash depends on more than the name and image")
	}
	b.Image = "registry.example/web:2.5"
	if ContainerHash(b) == ContainerHash(a) {
		t.Error("the hash ignores the image")
	}
}

func TestSandboxLabelsAndAnnotations(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", Labels: map[string]string{"a": "b", "io.kubernetes.pod.name": "spoof"}}}
	want := map[string]string{"a": "b", "io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "n", "io.kubernetes.pod.uid": "u"}
	if got := sandboxLabels(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("labels %v", got)
	}
	if sandboxAnnotations(pod) != nil {
		t.Error("nil annotations are not kept nil")
	}
	pod.Annotations = map[string]string{"k": "v"}
	if got := sandboxAnnotations(pod); !reflect.DeepEqual(got, pod.Annotations) {
		t.Errorf("annotations %v", got)
	}
}
