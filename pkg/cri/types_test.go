package cri

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A sandbox's pod is its UID; a sandbox without one is a pod of its own,
// and so is one whose UID is written like such a key: keys of different
// pods never collide.
func TestKey(t *testing.T) {
	tests := []struct {
		name string
		sb   Sandbox
		want string
	}{
		{"a UID", Sandbox{ID: "abc", UID: "u"}, "u"},
		{"no UID", Sandbox{ID: "abc"}, "sandbox:abc"},
		{"a UID written like a sandbox's key", Sandbox{ID: "abc", UID: "sandbox:def"}, "sandbox:abc"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.sb.Key(), tt.name)
		assert.Equal(t, "sandbox:abc", tt.sb.OwnKey(), tt.name)
	}
}
