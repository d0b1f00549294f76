package netprobe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProcs(t *testing.T) {
	for _, tt := range []struct{ cpus, want int }{{1, 4}, {2, 4}, {3, 6}, {8, 16}} {
		assert.Equal(t, tt.want, Procs(tt.cpus), "%d CPUs", tt.cpus)
	}
}
