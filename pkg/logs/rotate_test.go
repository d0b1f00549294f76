package logs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The rows port kubelet's container_log_manager_test.go: TestRotateLogs,
// TestCleanupUnusedLog, TestRemoveExcessLog, TestGetAllLogs, as decisions.
func TestPlan(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const ts = "20260304-050607"
	for _, tc := range []struct {
		name    string
		size    int64
		rotated []string
		policy  Policy
		want    Rotation
	}{{
		name:   "under the size: nothing (container-not-need-rotate)",
		size:   5,
		policy: Policy{MaxSize: 10, MaxFiles: 3},
	}, {
		name:   "at the size: rotated, nothing else there (container-need-rotate)",
		size:   10,
		policy: Policy{MaxSize: 10, MaxFiles: 3},
		want:   Rotation{Rotate: "0.log." + ts},
	}, {
		name:    "excess removed oldest first, the rest compressed (container-has-excess-log)",
		size:    20,
		rotated: []string{"0.log.00000000-000001", "0.log.00000000-000000.gz"},
		policy:  Policy{MaxSize: 10, MaxFiles: 3},
		want:    Rotation{Remove: []string{"0.log.00000000-000000.gz"}, Compress: []string{"0.log.00000000-000001"}, Rotate: "0.log." + ts},
	}, {
		name:    "unused: temporary files and files already compressed (TestCleanupUnusedLog)",
		size:    10,
		rotated: []string{"0.log.1.tmp", "0.log.2", "0.log.2.gz"},
		policy:  Policy{MaxSize: 10, MaxFiles: 5},
		want:    Rotation{Remove: []string{"0.log.1.tmp", "0.log.2"}, Rotate: "0.log." + ts},
	}, {
		name:    "MaxFiles 2: every rotated file removed (TestRemoveExcessLog)",
		size:    10,
		rotated: []string{"0.log.3", "0.log.1", "0.log.2", "0.log.4"},
		policy:  Policy{MaxSize: 10, MaxFiles: 2},
		want:    Rotation{Remove: []string{"0.log.1", "0.log.2", "0.log.3", "0.log.4"}, Rotate: "0.log." + ts},
	}, {
		name:    "MaxFiles 3: the newest rotated file kept, compressed",
		size:    10,
		rotated: []string{"0.log.3", "0.log.1", "0.log.2", "0.log.4"},
		policy:  Policy{MaxSize: 10, MaxFiles: 3},
		want:    Rotation{Remove: []string{"0.log.1", "0.log.2", "0.log.3"}, Compress: []string{"0.log.4"}, Rotate: "0.log." + ts},
	}, {
		name:    "MaxFiles beyond the files: all kept and compressed",
		size:    10,
		rotated: []string{"0.log.3", "0.log.1", "0.log.2", "0.log.4"},
		policy:  Policy{MaxSize: 10, MaxFiles: 6},
		want:    Rotation{Compress: []string{"0.log.1", "0.log.2", "0.log.3", "0.log.4"}, Rotate: "0.log." + ts},
	}, {
		name:    "compressed files are kept as they are",
		size:    11,
		rotated: []string{"0.log.20260304-050500.gz", "0.log.20260304-050600"},
		policy:  Policy{MaxSize: 10, MaxFiles: 5},
		want:    Rotation{Compress: []string{"0.log.20260304-050600"}, Rotate: "0.log." + ts},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Plan("0.log", tc.size, tc.rotated, tc.policy, now))
		})
	}
}

// TestInUse is kubelet's TestGetAllLogs.
func TestInUse(t *testing.T) {
	got := InUse([]string{
		"test-log.11111111-111111.gz",
		"test-log.00000000-000000.gz",
		"test-log.19900322-000000.gz",
		"test-log.19900322-111111.gz",
		"test-log.19880620-000000", // unused
		"test-log.19880620-000000.gz",
		"test-log.19880620-111111.gz",
		"test-log.20180101-000000",
		"test-log.20180101-000000.tmp", // temporary
	})
	assert.Equal(t, []string{
		"test-log.00000000-000000.gz",
		"test-log.11111111-111111.gz",
		"test-log.19880620-000000.gz",
		"test-log.19880620-111111.gz",
		"test-log.19900322-000000.gz",
		"test-log.19900322-111111.gz",
		"test-log.20180101-000000",
	}, got)
}
