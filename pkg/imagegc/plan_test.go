package imagegc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func set(ids ...string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// Kubelet's TestDetectImages*: first detection, a new image, a container
// gone (its image keeps its last use), images gone (forgotten), sizes and
// pinning as listed.
func TestDetect(t *testing.T) {
	type step struct {
		images []Image
		inUse  map[string]bool
		now    time.Time
	}
	tests := []struct {
		name  string
		steps []step
		want  Records
	}{
		{
			name:  "initial detect: in use ones (with or without a name) last used now",
			steps: []step{{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 2048}, {ID: "i2", Size: 2048}}, inUse: set("i1", "i2"), now: at(0)}},
			want: Records{
				"i0": {FirstDetected: at(0), Size: 1024},
				"i1": {FirstDetected: at(0), LastUsed: at(0), Size: 2048},
				"i2": {FirstDetected: at(0), LastUsed: at(0), Size: 2048},
			},
		},
		{
			name: "with new image: first detected at the second detection, sizes as listed",
			steps: []step{
				{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 2048}}, inUse: set("i1"), now: at(0)},
				{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 1024}, {ID: "i2", Size: 1024}}, inUse: set("i1"), now: at(1)},
			},
			want: Records{
				"i0": {FirstDetected: at(0), Size: 1024},
				"i1": {FirstDetected: at(0), LastUsed: at(1), Size: 1024},
				"i2": {FirstDetected: at(1), Size: 1024},
			},
		},
		{
			name: "container stopped: its image keeps its last use",
			steps: []step{
				{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 2048}}, inUse: set("i1"), now: at(0)},
				{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 2048}}, inUse: set(), now: at(9)},
			},
			want: Records{
				"i0": {FirstDetected: at(0), Size: 1024},
				"i1": {FirstDetected: at(0), LastUsed: at(0), Size: 2048},
			},
		},
		{
			name: "with removed images: forgotten",
			steps: []step{
				{images: []Image{{ID: "i0", Size: 1024}, {ID: "i1", Size: 2048}}, inUse: set("i1"), now: at(0)},
				{images: nil, inUse: set(), now: at(9)},
			},
			want: Records{},
		},
		{
			name:  "pinned as listed",
			steps: []step{{images: []Image{{ID: "pause", Size: 1024, Pinned: true}}, inUse: set(), now: at(0)}},
			want:  Records{"pause": {FirstDetected: at(0), Size: 1024, Pinned: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := Records{}
			for _, s := range tt.steps {
				before := clone(records)
				next := Detect(records, s.images, s.inUse, s.now)
				assert.Equal(t, before, records, "Detect changed its input")
				records = next
			}
			assert.Equal(t, tt.want, records)
		})
	}
}

func clone(r Records) Records {
	out := Records{}
	for k, v := range r {
		out[k] = v
	}
	return out
}

func ids(cands []Candidate) []string {
	out := []string{}
	for _, c := range cands {
		out = append(out, c.ID)
	}
	return out
}

// Kubelet's TestFreeSpace* and the pinned-image tests: in use and pinned
// images are never candidates; least recently used first, ties broken by
// the earliest detected.
func TestEvictionOrder(t *testing.T) {
	tests := []struct {
		name    string
		records Records
		inUse   map[string]bool
		want    []string
	}{
		{"images in use are ignored", Records{"i0": {}, "i1": {}}, set("i1"), []string{"i0"}},
		{"pinned images are ignored", Records{"1": {Pinned: true}, "2": {}}, set(), []string{"2"}},
		{"all pinned", Records{"1": {Pinned: true}, "2": {Pinned: true}}, set(), []string{}},
		{"least recently used first", Records{"i0": {LastUsed: at(5)}, "i1": {LastUsed: at(3)}, "i2": {LastUsed: at(4)}}, set(), []string{"i1", "i2", "i0"}},
		{"ties broken by detected time", Records{"i0": {FirstDetected: at(2), LastUsed: at(5)}, "i1": {FirstDetected: at(1), LastUsed: at(5)}}, set(), []string{"i1", "i0"}},
		{"never used before used", Records{"used": {FirstDetected: at(0), LastUsed: at(1)}, "never": {FirstDetected: at(3)}}, set(), []string{"never", "used"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ids(EvictionOrder(tt.records, tt.inUse)))
		})
	}
}

// Kubelet's TestGarbageCollectImageTooOld and …MaxAgeDisabled: nothing
// is old until the maximum age has passed since collection began; then
// an image unused for longer is.
func TestTooOld(t *testing.T) {
	cands := []Candidate{{ID: "a", Record: Record{LastUsed: at(0)}}, {ID: "b", Record: Record{LastUsed: at(50)}}}
	tests := []struct {
		name      string
		maxAge    time.Duration
		now       time.Time
		old, rest []string
	}{
		{"disabled", 0, at(1 << 30), []string{}, []string{"a", "b"}},
		{"just used, at the start", time.Minute, at(0), []string{}, []string{"a", "b"}},
		{"max age not yet past since collection began", time.Minute, at(60), []string{}, []string{"a", "b"}},
		{"one unused past it", time.Minute, at(61), []string{"a"}, []string{"b"}},
		{"both", time.Minute, at(111), []string{"a", "b"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, rest := TooOld(cands, tt.maxAge, tt.now, at(0))
			assert.Equal(t, tt.old, ids(old))
			assert.Equal(t, tt.rest, ids(rest))
		})
	}
}

// Kubelet's GarbageCollect arithmetic: below the high threshold nothing
// (TestGarbageCollectBelowLowThreshold), at or above it free down to the
// low (…BelowSuccess, …NotEnoughFreed), capacity 0 an error.
func TestSpaceGoal(t *testing.T) {
	cfg := Config{HighThresholdPercent: 90, LowThresholdPercent: 80}
	tests := []struct {
		name    string
		usage   Usage
		want    Goal
		wantErr error
	}{
		{"40% used", Usage{Capacity: 1000, Available: 600}, Goal{UsagePercent: 40}, nil},
		{"95% used", Usage{Capacity: 1000, Available: 50}, Goal{UsagePercent: 95, ToFree: 150}, nil},
		{"at the high threshold", Usage{Capacity: 1000, Available: 100}, Goal{UsagePercent: 90, ToFree: 100}, nil},
		{"just below", Usage{Capacity: 1000, Available: 101}, Goal{UsagePercent: 90, ToFree: 99}, nil},
		{"available beyond capacity", Usage{Capacity: 1000, Available: 2000}, Goal{UsagePercent: 0}, nil},
		{"no capacity", Usage{Available: 10}, Goal{}, ErrInvalidCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SpaceGoal(tt.usage, cfg)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Kubelet's freeSpace filter (TestGarbageCollectImageNotOldEnough,
// TestDeleteUnusedImagesLimitByImageLiveTime): an image used now, or
// first seen less than the minimum age ago, is kept.
func TestFreeable(t *testing.T) {
	cands := []Candidate{
		{ID: "old", Record: Record{FirstDetected: at(0)}},
		{ID: "young", Record: Record{FirstDetected: at(100)}},
		{ID: "used now", Record: Record{FirstDetected: at(0), LastUsed: at(120)}},
	}
	assert.Equal(t, []string{"old"}, ids(Freeable(cands, time.Minute, at(120))))
	assert.Equal(t, []string{"old", "young"}, ids(Freeable(cands, 20*time.Second, at(120))))
	assert.Equal(t, []string{}, ids(Freeable(cands, time.Minute, at(30))))
}

// The runtime's sandbox image is pinned whatever the runtime says
// (containerd 1.6 does not pin it), matched by its normalized name; a
// container's image is its image_id, else its image ref.
func TestImagesAndInUse(t *testing.T) {
	list := []*runtimeapi.Image{
		{Id: "sha256:p", Size: 10, RepoTags: []string{"docker.io/library/pause:3.6"}},
		{Id: "sha256:a", Size: 20, RepoTags: []string{"localhost/app:1"}},
		{Id: "sha256:b", Size: 30, Pinned: true},
	}
	assert.Equal(t, []Image{{ID: "sha256:p", Size: 10, Pinned: true}, {ID: "sha256:a", Size: 20}, {ID: "sha256:b", Size: 30, Pinned: true}}, Images(list, "pause:3.6"))
	assert.Equal(t, []Image{{ID: "sha256:p", Size: 10}, {ID: "sha256:a", Size: 20}, {ID: "sha256:b", Size: 30, Pinned: true}}, Images(list, ""))

	containers := []*runtimeapi.Container{{ImageRef: "sha256:a"}, {ImageRef: "localhost/app:2", ImageId: "sha256:c"}}
	assert.Equal(t, set("sha256:a", "sha256:c"), InUse(containers))
}

// Kubelet's TestValidateImageGCPolicy, with its configuration's rules.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", DefaultConfig(), ""},
		{"low below high", Config{HighThresholdPercent: 2, LowThresholdPercent: 1}, ""},
		{"high below 0", Config{HighThresholdPercent: -1, LowThresholdPercent: -2}, "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) -1 must be between 0 and 100, inclusive"},
		{"high above 100", Config{HighThresholdPercent: 101, LowThresholdPercent: 80}, "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
		{"low above 100", Config{HighThresholdPercent: 100, LowThresholdPercent: 101}, "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 101 must be between 0 and 100, inclusive"},
		{"low above high", Config{HighThresholdPercent: 1, LowThresholdPercent: 2}, "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 2 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 1"},
		{"low equal to high", Config{HighThresholdPercent: 80, LowThresholdPercent: 80}, "must be less than"},
		{"negative min age", Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second}, "invalid configuration: imageMinimumGCAge (--image-minimum-gc-age) -1s must not be negative"},
		{"negative max age", Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: -time.Second}, "invalid configuration: imageMaximumGCAge (--image-maximum-gc-age) -1s must not be negative"},
		{"max age not above min age", Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: time.Minute}, "invalid configuration: imageMaximumGCAge (--image-maximum-gc-age) 1m0s must be greater than imageMinimumGCAge (--image-minimum-gc-age) 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// Kubelet's TestGarbageCollectNotEnoughFreed's message.
func TestFreeDiskSpaceFailedMessage(t *testing.T) {
	assert.Equal(t, "Insufficient free disk space on the node's image filesystem (95% of 10.0 GiB used). "+
		"Failed to free sufficient space by deleting unused images (freed 524288000 bytes). "+
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
		freeDiskSpaceFailed(95, 10<<30, 500<<20))
	assert.Equal(t, "512 B", formatSize(512))
	assert.Equal(t, "1.5 KiB", formatSize(1536))
	assert.Equal(t, "48.0 MiB", formatSize(48<<20))
}
