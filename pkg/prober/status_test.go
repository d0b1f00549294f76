package prober

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

func TestPodPhase(t *testing.T) {
	run := containerStatus{state: cri.StateRunning}
	created := containerStatus{state: cri.StateCreated}
	ok := containerStatus{state: cri.StateExited, exitCode: 0}
	bad := containerStatus{state: cri.StateExited, exitCode: 1}
	const (
		always    = corev1.RestartPolicyAlways
		onFailure = corev1.RestartPolicyOnFailure
		never     = corev1.RestartPolicyNever
	)
	tests := []struct {
		name       string
		containers []containerStatus
		policy     corev1.RestartPolicy
		ready      bool
		want       corev1.PodPhase
	}{
		{"running", []containerStatus{run}, always, true, corev1.PodRunning},
		{"created only", []containerStatus{created}, always, true, corev1.PodPending},
		{"always: exited containers restart", []containerStatus{bad}, always, true, corev1.PodRunning},
		{"always: all exited 0 still restart", []containerStatus{ok}, always, true, corev1.PodRunning},
		{"onFailure: a failure restarts", []containerStatus{bad}, onFailure, true, corev1.PodRunning},
		{"onFailure: all succeeded", []containerStatus{ok, ok}, onFailure, true, corev1.PodSucceeded},
		{"never: one still running", []containerStatus{run, bad}, never, true, corev1.PodRunning},
		{"never: all exited, one failed", []containerStatus{ok, bad}, never, true, corev1.PodFailed},
		{"never: all succeeded", []containerStatus{ok}, never, true, corev1.PodSucceeded},
		{"sandbox stopped, nothing running, a failure", []containerStatus{bad}, always, false, corev1.PodFailed},
		{"sandbox stopped, all succeeded", []containerStatus{ok}, always, false, corev1.PodSucceeded},
		{"sandbox stopped, no containers", nil, always, false, corev1.PodFailed},
		{"sandbox stopped, still running (terminating)", []containerStatus{run}, always, false, corev1.PodRunning},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, podPhase(tt.containers, tt.policy, tt.ready), tt.name)
	}
}
