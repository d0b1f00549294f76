package eviction

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func storageLimit(s string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(s)}}
}

// kubelet's localStorageEviction (TestStorageLimitEvictions and the
// messages of helpers.go): an emptyDir past its sizeLimit first, then the
// pod's total past its containers' limits, then a container past its own.
func TestLocalStorageEvictions(t *testing.T) {
	const mi = 1 << 20
	scratch := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: quantity("1Mi")}}}
	ram := corev1.Volume{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: quantity("1Mi")}}}
	plain := corev1.Volume{Name: "plain", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	pod := func(vols []corev1.Volume, containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: vols, Containers: containers}}
	}
	app := corev1.Container{Name: "app", Resources: storageLimit("1Mi")}
	side := corev1.Container{Name: "side", Resources: storageLimit("1Mi")}
	bare := corev1.Container{Name: "bare"}
	tests := []struct {
		name      string
		usage     PodUsage
		dedicated bool
		want      Eviction
		wantNone  bool
	}{
		{name: "an emptyDir past its sizeLimit", usage: PodUsage{Pod: pod([]corev1.Volume{scratch}, bare), Volumes: map[string]int64{"scratch": 2 * mi}},
			want: Eviction{Signal: "emptydirfs.limit", Message: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `}},
		{name: "an emptyDir at its sizeLimit: kept", usage: PodUsage{Pod: pod([]corev1.Volume{scratch}, bare), Volumes: map[string]int64{"scratch": mi}}, wantNone: true},
		{name: "a Memory emptyDir past its sizeLimit", usage: PodUsage{Pod: pod([]corev1.Volume{ram}, bare), Volumes: map[string]int64{"ram": 2 * mi}},
			want: Eviction{Signal: "emptydirfs.limit", Message: `Usage of EmptyDir volume "ram" exceeds the limit "1Mi". `}},
		{name: "no sizeLimit: kept", usage: PodUsage{Pod: pod([]corev1.Volume{plain}, bare), Volumes: map[string]int64{"plain": 100 * mi}}, wantNone: true},
		{name: "a container's writable layer past its limit", usage: PodUsage{Pod: pod(nil, app), Containers: map[string]ContainerUsage{"app": {WritableLayer: 2 * mi}}},
			want: Eviction{Signal: "ephemeralpodfs.limit", Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "}},
		{name: "one of two containers past its limit, the pod within its total", usage: PodUsage{Pod: pod(nil, app, side),
			Containers: map[string]ContainerUsage{"app": {WritableLayer: mi / 2}, "side": {WritableLayer: mi, Logs: mi / 4}}},
			want: Eviction{Signal: "ephemeralcontainerfs.limit", Message: `Container side exceeded its local ephemeral storage limit "1Mi". `}},
		{name: "a dedicated image filesystem: the logs alone count for the container", usage: PodUsage{Pod: pod(nil, app, side),
			Containers: map[string]ContainerUsage{"app": {WritableLayer: mi / 2}, "side": {WritableLayer: mi, Logs: mi / 4}}}, dedicated: true, wantNone: true},
		{name: "the pod's total: a disk emptyDir counts", usage: PodUsage{Pod: pod([]corev1.Volume{plain}, app), Volumes: map[string]int64{"plain": mi},
			Containers: map[string]ContainerUsage{"app": {Logs: mi / 2}}},
			want: Eviction{Signal: "ephemeralpodfs.limit", Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "}},
		{name: "a container not running: not measured", usage: PodUsage{Pod: pod(nil, app, side), Containers: map[string]ContainerUsage{"app": {Logs: mi / 2}}}, wantNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LocalStorageEvictions(tt.usage, tt.dedicated)
			assert.Equal(t, !tt.wantNone, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Only what a limit needs is walked.
func TestMeasuredVolumes(t *testing.T) {
	scratch := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: quantity("1Mi")}}}
	plain := corev1.Volume{Name: "plain", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	host := corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}
	names := func(p *corev1.Pod) []string {
		var s []string
		for _, v := range measuredVolumes(p) {
			s = append(s, v.Name)
		}
		return s
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{scratch, plain, host}, Containers: []corev1.Container{{Name: "app"}}}}
	assert.Equal(t, []string{"scratch"}, names(p))
	assert.True(t, hasLocalStorageLimits(p))
	p.Spec.Containers[0].Resources = storageLimit("1Gi")
	assert.Equal(t, []string{"scratch", "plain"}, names(p), "a total limit: every disk emptyDir")
	assert.False(t, hasLocalStorageLimits(&corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{plain, host}, Containers: []corev1.Container{{Name: "app"}}}}))
}
