package imagegc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image is an image the runtime lists, as the collector reads it.
type Image struct {
	ID     string
	Size   int64
	Pinned bool
}

// Record is what the collector knows of an image (kubelet's imageRecord):
// when it was first seen, when it was last seen in use, its size and
// whether it is pinned. It is kept in memory only, as kubelet keeps it:
// after the agent's restart every image is first seen again, so none is
// removed for space before the minimum age has passed again, and the
// maximum age counts from the restart.
type Record struct {
	FirstDetected time.Time
	LastUsed      time.Time
	Size          int64
	Pinned        bool
}

// Records are the records by image ID. A function here never changes the
// Records it is given.
type Records map[string]Record

// Candidate is an image that may be removed, with its record.
type Candidate struct {
	ID string
	Record
}

// Images reads the runtime's listing: an image tagged with the runtime's
// sandbox image (containerd's sandbox_image; "" if unknown) counts as
// pinned, as containerd 1.7 and later pin it themselves (1.6 does not,
// and kubelet 1.36 keeps pinned images only).
func Images(list []*runtimeapi.Image, sandboxImage string) []Image {
	sandbox := normalize(sandboxImage)
	out := make([]Image, 0, len(list))
	for _, img := range list {
		pinned := img.GetPinned()
		if sandbox != "" && slices.ContainsFunc(img.GetRepoTags(), func(tag string) bool { return normalize(tag) == sandbox }) {
			pinned = true
		}
		out = append(out, Image{ID: img.GetId(), Size: int64(img.GetSize()), Pinned: pinned})
	}
	return out
}

// normalize is containerd's name of ref ("pause:3.6" is
// "docker.io/library/pause:3.6"); a reference that does not parse stays
// as it is.
func normalize(ref string) string {
	if ref == "" {
		return ""
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ref
	}
	return named.String()
}

// InUse is the set of images the runtime's containers use, running or
// not (kubelet's GetPods(all) over every container): each container's
// image ID (CRI's image_id, else its image ref, as kubelet's
// toKubeContainer reads it).
func InUse(containers []*runtimeapi.Container) map[string]bool {
	out := make(map[string]bool, len(containers))
	for _, c := range containers {
		id := c.GetImageRef()
		if c.GetImageId() != "" {
			id = c.GetImageId()
		}
		out[id] = true
	}
	return out
}

// Detect is kubelet's detectImages: the records of the images listed,
// a new image first detected now, one in use last used now, sizes and
// pinning as listed; images no longer listed are forgotten.
func Detect(prev Records, images []Image, inUse map[string]bool, now time.Time) Records {
	next := make(Records, len(images))
	for _, img := range images {
		r, ok := prev[img.ID]
		if !ok {
			r = Record{FirstDetected: now}
		}
		if inUse[img.ID] {
			r.LastUsed = now
		}
		r.Size, r.Pinned = img.Size, img.Pinned
		next[img.ID] = r
	}
	return next
}

// EvictionOrder is kubelet's imagesInEvictionOrder: the images neither in
// use nor pinned, least recently used first, ties broken by the earliest
// detected.
func EvictionOrder(records Records, inUse map[string]bool) []Candidate {
	var out []Candidate
	for _, id := range slices.Sorted(maps.Keys(records)) {
		r := records[id]
		if inUse[id] || r.Pinned {
			continue
		}
		out = append(out, Candidate{ID: id, Record: r})
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if a.LastUsed.Equal(b.LastUsed) {
			return a.FirstDetected.Compare(b.FirstDetected)
		}
		return a.LastUsed.Compare(b.LastUsed)
	})
	return out
}

// TooOld is kubelet's freeOldImages decision: with a maximum age, once it
// has passed since collection began (so that images are not removed
// before the agent could see them used), the candidates unused for
// longer are old; the others are left, in order.
func TooOld(cands []Candidate, maxAge time.Duration, now, began time.Time) (old, rest []Candidate) {
	if maxAge == 0 || now.Sub(began) <= maxAge {
		return nil, cands
	}
	for _, c := range cands {
		if now.Sub(c.LastUsed) > maxAge {
			old = append(old, c)
		} else {
			rest = append(rest, c)
		}
	}
	return old, rest
}

// Usage is the image filesystem as kubelet's CRI stats provider sees it:
// the runtime's used bytes (ImageFsInfo) and where its images live, and
// that filesystem's capacity and available bytes (statfs).
type Usage struct {
	Mountpoint string
	Used       int64
	Capacity   int64
	Available  int64
}

// ErrInvalidCapacity is kubelet's error (and InvalidDiskCapacity event)
// for an image filesystem whose capacity is unknown.
var ErrInvalidCapacity = errors.New("invalid capacity 0 on image filesystem")

// Goal is what kubelet's GarbageCollect sets out to free: the usage in
// percent and, at or above the high threshold, the bytes to free to be at
// the low threshold (0: nothing to do).
type Goal struct {
	UsagePercent int
	ToFree       int64
}

// SpaceGoal is kubelet's arithmetic of GarbageCollect: usage is 100 minus
// the available share (available beyond capacity counts as capacity); at
// or above the high threshold, free down to the low.
func SpaceGoal(u Usage, cfg Config) (Goal, error) {
	available := min(u.Available, u.Capacity)
	if u.Capacity <= 0 {
		return Goal{}, ErrInvalidCapacity
	}
	g := Goal{UsagePercent: 100 - int(available*100/u.Capacity)}
	if g.UsagePercent >= cfg.HighThresholdPercent {
		g.ToFree = u.Capacity*int64(100-cfg.LowThresholdPercent)/100 - available
	}
	return g, nil
}

// Freeable is kubelet's freeSpace filter: the candidates that may be
// removed for space, in order: none used at or after now (in use now)
// and none first detected less than the minimum age ago (it may have
// just been pulled for a container about to start).
func Freeable(cands []Candidate, minAge time.Duration, now time.Time) []Candidate {
	var out []Candidate
	for _, c := range cands {
		if !c.LastUsed.Before(now) || now.Sub(c.FirstDetected) < minAge {
			continue
		}
		out = append(out, c)
	}
	return out
}

// freeDiskSpaceFailed is kubelet's FreeDiskSpaceFailed message.
func freeDiskSpaceFailed(usagePercent int, capacity, freed int64) string {
	return fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
		"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
		usagePercent, formatSize(capacity), freed)
}

// formatSize is kubelet's human-readable size.
func formatSize(bytes int64) string {
	const (
		kiB = 1024
		miB = 1024 * kiB
		giB = 1024 * miB
		tiB = 1024 * giB
	)
	size := float64(bytes)
	switch {
	case size < kiB:
		return fmt.Sprintf("%d B", bytes)
	case size < miB:
		return fmt.Sprintf("%.1f KiB", size/kiB)
	case size < giB:
		return fmt.Sprintf("%.1f MiB", size/miB)
	case size < tiB:
		return fmt.Sprintf("%.1f GiB", size/giB)
	default:
		return fmt.Sprintf("%.1f TiB", size/tiB)
	}
}
