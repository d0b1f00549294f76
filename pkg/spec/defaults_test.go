package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

func p[T any](v T) *T { return &v }

// Rows of pkg/apis/core/v1's TestSetDefaultPodSpec / image pull policy tests.
func TestDefaultPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"docker.io/library/nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"localhost:5000/app", corev1.PullAlways},
		{"localhost:5000/app:v1", corev1.PullIfNotPresent},
		{"registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"registry.example/app:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"registry.example/app@sha256:0123", corev1.PullIfNotPresent}, // invalid digest: does not parse
		{"Nginx", corev1.PullIfNotPresent}, // upper case: does not parse
		{"", corev1.PullIfNotPresent},
		{"[::1]:5000/app", corev1.PullAlways},
	} {
		if got := defaultPullPolicy(tc.image); got != tc.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
		}
	}
}

func TestApplyAPIDefaults(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name  string
		pod   corev1.Pod
		check func(t *testing.T, pod *corev1.Pod)
	}{
		{"pod spec", corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}, func(t *testing.T, pod *corev1.Pod) {
			s := pod.Spec
			if s.DNSPolicy != corev1.DNSClusterFirst || s.RestartPolicy != corev1.RestartPolicyAlways || s.SchedulerName != "default-scheduler" ||
				s.SecurityContext == nil || *s.TerminationGracePeriodSeconds != 30 || !*s.EnableServiceLinks {
				t.Errorf("spec defaults: %+v", s)
			}
			c := s.Containers[0]
			if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile || c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("container defaults: %+v", c)
			}
		}},
		{"ports under hostNetwork", corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true,
			InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}},
			Containers:     []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 443, HostPort: 8443}}}}}},
			func(t *testing.T, pod *corev1.Pod) {
				want := []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: "TCP"}, {ContainerPort: 443, HostPort: 8443, Protocol: "TCP"}}
				if !reflect.DeepEqual(pod.Spec.Containers[0].Ports, want) {
					t.Errorf("ports %+v", pod.Spec.Containers[0].Ports)
				}
				if pp := pod.Spec.InitContainers[0].Ports[0]; pp.HostPort != 53 || pp.Protocol != corev1.ProtocolUDP {
					t.Errorf("init ports %+v", pp)
				}
			}},
		{"ports off hostNetwork", corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
			func(t *testing.T, pod *corev1.Pod) {
				if pp := pod.Spec.Containers[0].Ports[0]; pp.HostPort != 0 || pp.Protocol != corev1.ProtocolTCP {
					t.Errorf("ports %+v", pp)
				}
			}},
		{"requests from limits", corev1.Pod{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, Requests: corev1.ResourceList{"cpu": q("100m")}}}},
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1Gi")}}}}}},
			func(t *testing.T, pod *corev1.Pod) {
				r := pod.Spec.Containers[0].Resources.Requests
				if r.Cpu().String() != "100m" || r.Memory().String() != "1Gi" {
					t.Errorf("requests %v", r)
				}
				if pod.Spec.InitContainers[0].Resources.Requests.Memory().String() != "1Gi" {
					t.Errorf("init requests %v", pod.Spec.InitContainers[0].Resources.Requests)
				}
			}},
		{"milli rounding", corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("0.0001")}}}}}},
			func(t *testing.T, pod *corev1.Pod) {
				if got := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != 1 {
					t.Errorf("cpu %dm, want 1m", got)
				}
			}},
		{"pod-level requests", corev1.Pod{Spec: corev1.PodSpec{
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("2"), "memory": q("2Gi")}},
			Containers: []corev1.Container{
				{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}}},
				{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("250m")}}},
			}}},
			func(t *testing.T, pod *corev1.Pod) {
				r := pod.Spec.Resources.Requests
				if r.Cpu().String() != "750m" || r.Memory().String() != "2Gi" {
					t.Errorf("pod requests %v", r)
				}
			}},
		{"pod-level hugepage limits", corev1.Pod{Spec: corev1.PodSpec{
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}},
			Containers: []corev1.Container{
				{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-2Mi": q("4Mi")}}},
				{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-2Mi": q("2Mi")}}},
			}}},
			func(t *testing.T, pod *corev1.Pod) {
				if got := pod.Spec.Resources.Limits["hugepages-2Mi"]; got.String() != "6Mi" {
					t.Errorf("pod hugepage limit %v", got.String())
				}
			}},
		{"probes and handlers", corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}},
			Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
		}}}},
			func(t *testing.T, pod *corev1.Pod) {
				c := pod.Spec.Containers[0]
				l := c.LivenessProbe
				if l.TimeoutSeconds != 1 || l.PeriodSeconds != 10 || l.SuccessThreshold != 1 || l.FailureThreshold != 3 || l.HTTPGet.Path != "/" || l.HTTPGet.Scheme != "HTTP" {
					t.Errorf("liveness %+v", l)
				}
				if c.ReadinessProbe.GRPC.Service == nil || *c.ReadinessProbe.GRPC.Service != "" {
					t.Errorf("grpc service %v", c.ReadinessProbe.GRPC.Service)
				}
				if h := c.Lifecycle.PreStop.HTTPGet; h.Path != "/" || h.Scheme != "HTTP" {
					t.Errorf("preStop %+v", h)
				}
			}},
		{"env", corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}},
		}}}}},
			func(t *testing.T, pod *corev1.Pod) {
				e := pod.Spec.Containers[0].Env
				if e[0].ValueFrom.FieldRef.APIVersion != "v1" || e[1].ValueFrom.FileKeyRef.Optional == nil || *e[1].ValueFrom.FileKeyRef.Optional {
					t.Errorf("env %+v %+v", e[0].ValueFrom.FieldRef, e[1].ValueFrom.FileKeyRef)
				}
			}},
		{"volumes", corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "none"},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
			}}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
			{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "tools:latest"}}},
			{Name: "img2", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "tools"}}},
		}}},
			func(t *testing.T, pod *corev1.Pod) {
				v := pod.Spec.Volumes
				if v[0].EmptyDir == nil {
					t.Error("a volume without source is not an emptyDir")
				}
				if v[1].HostPath.Type == nil || *v[1].HostPath.Type != corev1.HostPathUnset {
					t.Errorf("hostPath type %v", v[1].HostPath.Type)
				}
				if *v[2].DownwardAPI.DefaultMode != 0o644 || v[2].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" {
					t.Errorf("downwardAPI %+v", v[2].DownwardAPI)
				}
				pj := v[3].Projected
				if *pj.DefaultMode != 0o644 || pj.Sources[0].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" || *pj.Sources[1].ServiceAccountToken.ExpirationSeconds != 3600 {
					t.Errorf("projected %+v", pj)
				}
				if *v[4].ConfigMap.DefaultMode != 0o644 || *v[5].Secret.DefaultMode != 0o644 {
					t.Error("configMap or secret default mode")
				}
				// An image volume's pull policy follows its tag as a container's does.
				if v[6].Image.PullPolicy != corev1.PullAlways || v[7].Image.PullPolicy != corev1.PullAlways {
					t.Errorf("image volumes %s %s", v[6].Image.PullPolicy, v[7].Image.PullPolicy)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.DeepCopy()
			ApplyAPIDefaults(pod)
			tc.check(t, pod)
			again := pod.DeepCopy()
			ApplyAPIDefaults(again)
			if !reflect.DeepEqual(pod, again) {
				t.Error("ApplyAPIDefaults is not idempotent")
			}
		})
	}
}

func TestStaticPod(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	manifest := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
			Spec: corev1.PodSpec{
				Containers:  []corev1.Container{{Name: "etcd", Image: "etcd:3.5"}},
				Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			},
		}
	}
	pod := manifest()
	StaticPod(pod, "Node-1", "/etc/kubernetes/manifests/etcd.yaml", seen)
	if pod.Name != "etcd-node-1" || pod.Namespace != "default" || pod.Spec.NodeName != "Node-1" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("identity: %s/%s node %s phase %s", pod.Namespace, pod.Name, pod.Spec.NodeName, pod.Status.Phase)
	}
	if len(pod.UID) != 32 {
		t.Errorf("UID %q is not 32 hex digits", pod.UID)
	}
	wantAnn := map[string]string{
		"kubernetes.io/config.hash":   string(pod.UID),
		"kubernetes.io/config.source": "file",
		"kubernetes.io/config.seen":   "2026-01-02T03:04:05.000000006Z",
	}
	if !reflect.DeepEqual(pod.Annotations, wantAnn) {
		t.Errorf("annotations %v, want %v", pod.Annotations, wantAnn)
	}
	wantTol := []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}, {Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	if !reflect.DeepEqual(pod.Spec.Tolerations, wantTol) {
		t.Errorf("tolerations %+v", pod.Spec.Tolerations)
	}
	if pod.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Error("API defaults not applied")
	}

	// The UID is a hash of the manifest, its node and its path: the same
	// for the same inputs (and any seen time), different otherwise.
	same := manifest()
	StaticPod(same, "Node-1", "/etc/kubernetes/manifests/etcd.yaml", seen.Add(time.Hour))
	other := manifest()
	StaticPod(other, "Node-1", "/etc/kubernetes/manifests/etcd2.yaml", seen)
	changed := manifest()
	changed.Spec.Containers[0].Image = "etcd:3.6"
	StaticPod(changed, "Node-1", "/etc/kubernetes/manifests/etcd.yaml", seen)
	if same.UID != pod.UID || other.UID == pod.UID || changed.UID == pod.UID {
		t.Errorf("UIDs %s %s %s %s", pod.UID, same.UID, other.UID, changed.UID)
	}

	// A given UID and an existing NoExecute toleration are kept.
	given := manifest()
	given.UID = "given"
	given.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: p(int64(5))}}
	StaticPod(given, "n", "f", seen)
	if given.UID != "given" || given.Annotations["kubernetes.io/config.hash"] != "given" {
		t.Errorf("given UID: %s %v", given.UID, given.Annotations)
	}
	if len(given.Spec.Tolerations) != 1 || given.Spec.Tolerations[0].TolerationSeconds != nil {
		t.Errorf("the NoExecute toleration is not kubelet's: %+v", given.Spec.Tolerations)
	}
	if _, err := json.Marshal(given); err != nil {
		t.Fatal(err)
	}
}

// Rows of pkg/api/pod's TestHasAPIReferences.
func TestStaticPodAPIReferences(t *testing.T) {
	withVolume := func(v corev1.VolumeSource) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "v", VolumeSource: v}}}}
	}
	withEnv := func(e corev1.EnvVar) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b", Env: []corev1.EnvVar{{Name: "X", Value: "x"}, e}}},
		}}
	}
	for _, tc := range []struct {
		name          string
		pod           *corev1.Pod
		field, object string
	}{
		{"none", &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, Volumes: []corev1.Volume{
			{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{}}}}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "x"}}},
		}}}, "", ""},
		{"service account", &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "sa"}}, "spec.serviceAccountName", "serviceaccounts"},
		{"image pull secret", &corev1.Pod{Spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}}}}, "spec.imagePullSecrets[0]", "secrets"},
		{"secret key ref", withEnv(corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}),
			"spec.containers[1].env[1].valueFrom.secretKeyRef", "secrets"},
		{"configmap key ref", withEnv(corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "k"}}}),
			"spec.containers[1].env[1].valueFrom.configMapKeyRef", "configmaps"},
		{"envFrom configmap", &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}}},
			"spec.initContainers[0].envFrom[0].configMapRef", "configmaps"},
		{"secret volume", withVolume(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}), "spec.volumes[1].secret", "secrets"},
		{"configmap volume", withVolume(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}), "spec.volumes[1].configMap", "configmaps"},
		{"cephfs secret", withVolume(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{SecretRef: &corev1.LocalObjectReference{Name: "s"}}}), "spec.volumes[1].cephfs.secretRef", "secrets"},
		{"pvc", withVolume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}), "spec.volumes[1].persistentVolumeClaim", "persistentvolumeclaims"},
		{"ephemeral", withVolume(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}), "spec.volumes[1].ephemeral", "persistentvolumeclaims (via ephemeral volumes)"},
		{"csi", withVolume(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}), "spec.volumes[1].csi", "csidrivers (via CSI volumes)"},
		{"glusterfs", withVolume(corev1.VolumeSource{Glusterfs: &corev1.GlusterfsVolumeSource{}}), "spec.volumes[1].glusterfs", "endpoints (via glusterFS volumes)"},
		{"azureFile without secret", withVolume(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{}}), "spec.volumes[1].azureFile", "secrets (via azureFile volumes)"},
		{"projected token", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}}}}}),
			"spec.volumes[1].projected.sources[0].serviceAccountToken", "serviceaccounts (via projected volumes)"},
		{"projected secret", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{}}, {Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}),
			"spec.volumes[1].projected.sources[1].secret", "secrets"},
		{"cluster trust bundle", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{}}}}}),
			"spec.volumes[1].projected.sources[0].clusterTrustBundle", "clustertrustbundles"},
		{"pod certificate", withVolume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{}}}}}),
			"spec.volumes[1].projected.sources[0].podCertificate", "podcertificates"},
		{"resource claims", &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "c"}}}}, "spec.resourceClaims", "resourceclaims"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field, object := StaticPodAPIReferences(tc.pod)
			if field != tc.field || object != tc.object {
				t.Errorf("got (%q, %q), want (%q, %q)", field, object, tc.field, tc.object)
			}
		})
	}
}

func TestContainerAggregates(t *testing.T) {
	q := resource.MustParse
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "side", RestartPolicy: p(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}}},
			{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("3"), "memory": q("1Gi")}}},
		},
		Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("2Gi")}}},
		},
	}}
	got := ContainerRequests(pod)
	// Regular 500m + sidecar 1 = 1500m; the init container needs 3 + the sidecar started before it = 4.
	if got.Cpu().String() != "4" || got.Memory().String() != "2Gi" {
		t.Errorf("requests %v", got)
	}
}

// TestStaticPodOracle compares ApplyAPIDefaults and StaticPod with what
// kubelet v1.36.3's file source made of the same manifests
// (testdata/kubelet/static.json, from tryDecodeSinglePod with applyDefaults
// on node "node-a": testdata/kubelet/oracle_test.go.txt, run as
// pkg/kubelet/config/zz_podconfig_oracle_test.go with ORACLE_MANIFESTS and
// ORACLE_OUT). Kubelet's generated UIDs cannot match (see StaticPod); the
// source and first-seen annotations come later in kubelet.
func TestStaticPodOracle(t *testing.T) {
	data, err := os.ReadFile("testdata/kubelet/static.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			manifest, err := os.ReadFile(filepath.Join("testdata/kubelet/manifests", name))
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(manifest, pod); err != nil {
				t.Fatal(err)
			}
			if msg, ok := w["error"].(string); ok {
				if _, resource := StaticPodAPIReferences(pod); resource == "" || msg != "static pods may not reference "+resource {
					t.Errorf("references %q, kubelet: %s", resource, msg)
				}
				return
			}
			given := pod.UID != ""
			StaticPod(pod, "node-a", "/etc/kubernetes/manifests/"+name, time.Now())
			if f, r := StaticPodAPIReferences(pod); r != "" {
				t.Errorf("reference %s at %s in a pod kubelet accepts", r, f)
			}
			raw, _ := json.Marshal(pod)
			var got map[string]any
			_ = json.Unmarshal(raw, &got)
			for _, m := range []map[string]any{got, w} {
				meta := m["metadata"].(map[string]any)
				ann := meta["annotations"].(map[string]any)
				delete(ann, "kubernetes.io/config.source")
				delete(ann, "kubernetes.io/config.seen")
				if !given {
					delete(meta, "uid")
					delete(ann, "kubernetes.io/config.hash")
				}
			}
			for _, d := range jsonDiff("", got, w) {
				t.Error(d)
			}
		})
	}
}

// jsonDiff lists where two decoded JSON values differ.
func jsonDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k := range am {
			out = append(out, jsonDiff(path+"."+k, am[k], bm[k])...)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, jsonDiff(path+"."+k, nil, bm[k])...)
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: ours %v, kubelet's %v", path, a, b)}
	}
	return nil
}
