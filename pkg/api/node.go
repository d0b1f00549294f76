package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// NodeReporter says what the agent keeps on the node (the agent fills the
// report from its log manager, garbage collections and eviction manager,
// which the API does not import).
type NodeReporter interface {
	NodeReport() NodeReport
}

// NodeReport is GET /api/v1/node: what the agent keeps on the node and
// what it reclaimed since it started, and the settings in force. It is
// made at each request (the log bytes move without the pods changing,
// so it is not the pod list's, which is cached by the pods' state).
type NodeReport struct {
	// Node is the node's name (run --node-name).
	Node string `json:"node,omitempty"`
	// DiskPressure is kubelet's DiskPressure node condition (nil: no
	// eviction manager, the agent makes no pods).
	DiskPressure *Condition `json:"diskPressure,omitempty"`
	// ImageFs is the runtime's image filesystem as the image garbage
	// collection last measured it (nil: it does not run, or has not
	// measured yet).
	ImageFs *ImageFs `json:"imageFs,omitempty"`
	// Reclaimed is what the agent removed since it started.
	Reclaimed Reclaimed `json:"reclaimed"`
	// ContainerLogs are the log files of the containers the agent keeps.
	ContainerLogs ContainerLogs `json:"containerLogs"`
	// Settings are what bounds them.
	Settings NodeSettings `json:"settings"`
}

// ImageFs is the filesystem of the runtime's images (CRI ImageFsInfo's
// mountpoint, measured with statfs).
type ImageFs struct {
	Mountpoint     string    `json:"mountpoint"`
	CapacityBytes  int64     `json:"capacityBytes"`
	AvailableBytes int64     `json:"availableBytes"`
	UsedBytes      int64     `json:"usedBytes"` // by the runtime's images
	MeasuredAt     time.Time `json:"measuredAt"`
}

// Reclaimed counts what the agent removed since Since (its start).
type Reclaimed struct {
	Since time.Time `json:"since"`
	// ImagesRemoved are the images the image garbage collection removed
	// (kubelet_image_garbage_collected_total, both reasons).
	ImagesRemoved uint64 `json:"imagesRemoved"`
	// ContainersRemoved and SandboxesRemoved are the dead instances and
	// sandboxes the container garbage collection removed.
	ContainersRemoved uint64 `json:"containersRemoved"`
	SandboxesRemoved  uint64 `json:"sandboxesRemoved"`
	// PodsEvicted are the pods evicted for their local storage
	// (kubelet_evictions).
	PodsEvicted uint64 `json:"podsEvicted"`
}

// ContainerLogs are the log files of the running containers the agent
// manages, as the log manager last saw them (every
// containerLogMonitorInterval).
type ContainerLogs struct {
	TotalBytes int64          `json:"totalBytes"`
	Containers []ContainerLog `json:"containers"`
}

// ContainerLog is what one container's log files hold (its current file
// and its rotated ones).
type ContainerLog struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	PodUID      string `json:"podUid"`
	Container   string `json:"container"`
	ContainerID string `json:"containerId"`
	Bytes       int64  `json:"bytes"`
}

// NodeSettings are the settings in force, under kubelet's configuration
// names (its flags' for the container garbage collection, which has no
// configuration keys); a part that does not run is omitted.
type NodeSettings struct {
	// ContainerLogMaxSize is a quantity (10Mi; negative: no rotation).
	ContainerLogMaxSize  string `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles int    `json:"containerLogMaxFiles,omitempty"`
	// ContainerGC is the container garbage collection's policy.
	ContainerGC *ContainerGCSettings `json:"containerGC,omitempty"`
	ImageGC     *ImageGCSettings     `json:"imageGC,omitempty"`
	// LocalStorageLimits is ignore (kubelet's for a static pod) or
	// enforce (run --local-storage-limits).
	LocalStorageLimits string `json:"localStorageLimits,omitempty"`
	// EvictionHard are the hard eviction thresholds, as --eviction-hard
	// writes them (nodefs.available<10%).
	EvictionHard []string `json:"evictionHard,omitempty"`
}

// ContainerGCSettings is kubelet's container GC policy.
type ContainerGCSettings struct {
	MinimumContainerTTLDuration       string `json:"minimumContainerTTLDuration"`
	MaximumDeadContainersPerContainer int    `json:"maximumDeadContainersPerContainer"`
	MaximumDeadContainers             int    `json:"maximumDeadContainers"`
}

// ImageGCSettings is kubelet's image GC policy.
type ImageGCSettings struct {
	ImageGCHighThresholdPercent int    `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent  int    `json:"imageGCLowThresholdPercent"`
	ImageMinimumGCAge           string `json:"imageMinimumGCAge"`
	ImageMaximumGCAge           string `json:"imageMaximumGCAge"`
}

// Kubelet's DiskPressure node condition (nodestatus.PressureCondition).
const (
	ConditionDiskPressure    = "DiskPressure"
	reasonHasDiskPressure    = "KubeletHasDiskPressure"
	reasonHasNoDiskPressure  = "KubeletHasNoDiskPressure"
	messageHasDiskPressure   = "kubelet has disk pressure"
	messageHasNoDiskPressure = "kubelet has no disk pressure"
)

// DiskPressureCondition is kubelet's DiskPressure condition, true or
// false since transition (when it last changed, its first observation
// included, as kubelet sets lastTransitionTime; zero: not observed yet,
// none).
func DiskPressureCondition(pressure bool, transition time.Time) *Condition {
	if pressure {
		return &Condition{Type: ConditionDiskPressure, Status: "True", Reason: reasonHasDiskPressure, Message: messageHasDiskPressure,
			LastTransitionTime: timeOrNil(transition)}
	}
	return &Condition{Type: ConditionDiskPressure, Status: "False", Reason: reasonHasNoDiskPressure, Message: messageHasNoDiskPressure,
		LastTransitionTime: timeOrNil(transition)}
}

func (s *Server) getNode(w http.ResponseWriter, _ *http.Request) {
	r := s.nodeReport.NodeReport()
	if r.ContainerLogs.Containers == nil {
		r.ContainerLogs.Containers = []ContainerLog{}
	}
	writeJSON(w, http.StatusOK, r)
}

// UsedPercent is how full the image filesystem is, as kubelet's image
// garbage collection reckons it (100 - available / capacity).
func (f ImageFs) UsedPercent() int {
	if f.CapacityBytes <= 0 {
		return 0
	}
	return int(100 - f.AvailableBytes*100/f.CapacityBytes)
}

// Size is a number of bytes as people read it (1.5MiB, 512B).
func Size(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"Ki", "Mi", "Gi", "Ti", "Pi"} {
		v /= unit
		suffix = s
		if v < unit && v > -unit {
			break
		}
	}
	return fmt.Sprintf("%.1f%sB", v, suffix)
}

// NodeLine is a line of the node report as `cri-prober status` and the
// status page show it: a label and its text; Bad marks what needs a look
// (disk pressure).
type NodeLine struct {
	Label, Text string
	Bad         bool
}

// Lines is the node report in a few lines, at now: disk pressure, the
// image filesystem, the container logs, what was reclaimed and the
// limits in force.
func (r NodeReport) Lines(now time.Time) []NodeLine {
	var out []NodeLine
	if c := r.DiskPressure; c != nil {
		text := c.Status
		if c.LastTransitionTime != nil {
			text += " for " + Age(*c.LastTransitionTime, now)
		}
		out = append(out, NodeLine{Label: "DiskPressure", Text: text, Bad: c.Status == "True"})
	}
	if f := r.ImageFs; f != nil {
		out = append(out, NodeLine{Label: "Image filesystem", Text: fmt.Sprintf("%s %d%% used, %s available of %s, images %s (measured %s ago)",
			Shown(f.Mountpoint, shownLine), f.UsedPercent(), Size(f.AvailableBytes), Size(f.CapacityBytes), Size(f.UsedBytes), Age(f.MeasuredAt, now))})
	}
	s := r.Settings
	logs := fmt.Sprintf("%s in %d container%s", Size(r.ContainerLogs.TotalBytes), len(r.ContainerLogs.Containers), plural(len(r.ContainerLogs.Containers)))
	if strings.HasPrefix(s.ContainerLogMaxSize, "-") {
		logs += " (not rotated)"
	} else if s.ContainerLogMaxSize != "" {
		logs += fmt.Sprintf(" (each at most %s × %d files)", s.ContainerLogMaxSize, s.ContainerLogMaxFiles)
	}
	out = append(out, NodeLine{Label: "Container logs", Text: logs})
	rc := r.Reclaimed
	out = append(out, NodeLine{Label: "Reclaimed", Text: fmt.Sprintf("%d image%s, %d container%s, %d sandbox%s removed, %d pod%s evicted since the agent started %s ago",
		rc.ImagesRemoved, plural(int(rc.ImagesRemoved)), rc.ContainersRemoved, plural(int(rc.ContainersRemoved)), rc.SandboxesRemoved,
		pluralES(int(rc.SandboxesRemoved)), rc.PodsEvicted, plural(int(rc.PodsEvicted)), Age(rc.Since, now))})
	var limits []string
	if s.LocalStorageLimits != "" {
		limits = append(limits, "local storage limits "+s.LocalStorageLimits)
	}
	if len(s.EvictionHard) > 0 {
		limits = append(limits, "eviction-hard "+strings.Join(s.EvictionHard, ","))
	}
	if g := s.ImageGC; g != nil {
		limits = append(limits, fmt.Sprintf("image GC at %d%% down to %d%%", g.ImageGCHighThresholdPercent, g.ImageGCLowThresholdPercent))
	}
	if len(limits) > 0 {
		out = append(out, NodeLine{Label: "Limits", Text: strings.Join(limits, " · ")})
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralES(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}
