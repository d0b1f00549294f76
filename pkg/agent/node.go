package agent

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// nodeReporter is what the state API serves of the node's keepers (nil:
// the agent keeps nothing on the node, having no pod sync).
func (a *Agent) nodeReporter() api.NodeReporter {
	if a.ContainerLogs == nil {
		return nil
	}
	return a
}

// NodeReport is what the agent keeps on the node (api.NodeReporter): the
// DiskPressure condition, the image filesystem, the container logs, what
// was reclaimed since the agent started, and the settings in force; each
// read from its part, without asking the runtime.
func (a *Agent) NodeReport() api.NodeReport {
	r := api.NodeReport{Node: a.cfg.NodeName, Reclaimed: api.Reclaimed{Since: a.started}}
	if l := a.ContainerLogs; l != nil {
		for _, c := range l.AllLogBytes() {
			r.ContainerLogs.TotalBytes += c.Bytes
			r.ContainerLogs.Containers = append(r.ContainerLogs.Containers, api.ContainerLog{Namespace: c.Namespace, Pod: c.Pod, PodUID: c.PodUID,
				Container: c.Container, ContainerID: c.ContainerID, Bytes: c.Bytes})
		}
		cfg := l.Settings()
		r.Settings.ContainerLogMaxSize = resource.NewQuantity(cfg.MaxSize, resource.BinarySI).String()
		r.Settings.ContainerLogMaxFiles = cfg.MaxFiles
	}
	if g := a.GC; g != nil {
		r.Reclaimed.ContainersRemoved, r.Reclaimed.SandboxesRemoved = g.Removed()
		p := g.Policy()
		r.Settings.ContainerGC = &api.ContainerGCSettings{MinimumContainerTTLDuration: p.MinAge.String(),
			MaximumDeadContainersPerContainer: p.MaxPerPodContainer, MaximumDeadContainers: p.MaxContainers}
	}
	if g := a.ImageGC; g != nil {
		age, space := g.Removed()
		r.Reclaimed.ImagesRemoved = age + space
		if m, ok := g.LastImageFs(); ok {
			r.ImageFs = &api.ImageFs{Mountpoint: m.Mountpoint, CapacityBytes: m.Capacity, AvailableBytes: m.Available, UsedBytes: m.Used, MeasuredAt: m.At}
		}
		cfg := g.Settings()
		r.Settings.ImageGC = &api.ImageGCSettings{ImageGCHighThresholdPercent: cfg.HighThresholdPercent, ImageGCLowThresholdPercent: cfg.LowThresholdPercent,
			ImageMinimumGCAge: cfg.MinAge.String(), ImageMaximumGCAge: cfg.MaxAge.String()}
	}
	if e := a.Eviction; e != nil {
		r.DiskPressure = api.DiskPressureCondition(e.DiskPressure())
		r.Reclaimed.PodsEvicted = e.Evictions()
		cfg := e.Settings()
		r.Settings.LocalStorageLimits = spec.LocalStorageIgnore
		if e.Enforced() {
			r.Settings.LocalStorageLimits = spec.LocalStorageEnforce
		}
		for _, t := range cfg.EvictionHard {
			r.Settings.EvictionHard = append(r.Settings.EvictionHard, t.String())
		}
	}
	return r
}
