package credential

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHeader(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"cookie", true},
		{"X-Api-Key", true},
		{"X-Auth-Token", true},
		{"X-SESSION-ID", true},
		{"Proxy-Authorization", true},
		{"Accept", false},
		{"Host", false},
		{"User-Agent", false},
		{"", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Header(tt.name), tt.name)
	}
	assert.Zero(t, testing.AllocsPerRun(10, func() { Header("X-Custom-Header") }), "no allocation: it runs on every HTTP probe")
}
