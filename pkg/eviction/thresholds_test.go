package eviction

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubelet's parseThresholdStatements (TestParseThresholdConfig's hard
// rows): signals it knows, percentages within 0..100% (0% and 100%
// dropped), positive quantities.
func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    []string
		wantErr string
	}{
		{name: "kubelet's defaults", in: DefaultEvictionHard,
			want: []string{"imagefs.available<15%", "imagefs.inodesFree<5%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}},
		{name: "a quantity", in: map[string]string{"nodefs.available": "1Gi"}, want: []string{"nodefs.available<1Gi"}},
		{name: "0% and 100% are dropped", in: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%"}},
		{name: "none", in: nil},
		{name: "unknown signal", in: map[string]string{"disk.available": "10%"}, wantErr: "unsupported eviction signal disk.available"},
		{name: "negative percentage", in: map[string]string{"nodefs.available": "-5%"}, wantErr: "must be >= 0%"},
		{name: "over 100%", in: map[string]string{"nodefs.available": "150%"}, wantErr: "must be <= 100%"},
		{name: "zero quantity", in: map[string]string{"nodefs.available": "0"}, wantErr: "must be positive"},
		{name: "not a quantity", in: map[string]string{"nodefs.available": "lots"}, wantErr: "nodefs.available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var s []string
			for _, th := range got {
				s = append(s, th.String())
			}
			assert.Equal(t, tt.want, s)
		})
	}
}

// --eviction-hard is kubelet's LangleSeparatedMapStringString.
func TestParseEvictionHard(t *testing.T) {
	m, err := ParseEvictionHard("nodefs.available<10%, imagefs.available<15%")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"nodefs.available": "10%", "imagefs.available": "15%"}, m)
	assert.Equal(t, "imagefs.available<15%,nodefs.available<10%", FormatEvictionHard(m))
	m, err = ParseEvictionHard("")
	require.NoError(t, err)
	assert.Empty(t, m)
	_, err = ParseEvictionHard("nodefs.available=10%")
	assert.ErrorContains(t, err, "expect string<string")
}

func TestThresholdValue(t *testing.T) {
	th, err := ParseThresholds(map[string]string{"nodefs.available": "10%", "imagefs.available": "1Ki"})
	require.NoError(t, err)
	assert.Equal(t, int64(1024), th[0].Value(1<<30), "a quantity, whatever the capacity")
	assert.Equal(t, int64(100), th[1].Value(1000))
}
