package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestExpandCommand(t *testing.T) {
	env := []corev1.EnvVar{
		{Name: "A", Value: "script"},
		{Name: "EMPTY", Value: ""},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{}},
	}
	tests := []struct{ in, want string }{
		{"some $(A) $(B)", "some script $(B)"}, // kubelet's TestProbe case
		{"$(A)$(A)", "scriptscript"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"cost: 5$", "cost: 5$"},
		{"$x $(A)", "$x script"},
		{"$(EMPTY)-", "-"},
		{"[$(SECRET)]", "[]"},
		{"$(A", "$(A"},
		{"$(", "$("},
		{"no vars", "no vars"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		assert.Equal(t, []string{tt.want}, ExpandCommand([]string{tt.in}, env), "expand %q", tt.in)
	}
	assert.Nil(t, ExpandCommand(nil, env))
}
