package logs

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// managerMetrics are the log manager's series, by container as the
// restarter's are; a container no longer kept has its series deleted.
type managerMetrics struct {
	bytes     *prometheus.GaugeVec
	used      *prometheus.GaugeVec
	rotations *prometheus.CounterVec

	mu     sync.Mutex
	labels map[string]prometheus.Labels // seriesKey → its series' labels
}

var containerLabels = []string{"namespace", "pod", "pod_uid", "container"}

func newManagerMetrics(reg prometheus.Registerer) *managerMetrics {
	m := &managerMetrics{
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cri_prober_container_log_bytes",
			Help: "Bytes of a running container's log files on the node (its current file and its rotated ones), as the log manager last saw them, for the containers the agent manages.",
		}, containerLabels),
		// kubelet's, from its log metrics collector: the disk space (the
		// allocated blocks) of the container's log directory, every
		// instance's files, where the series above counts the bytes of the
		// running instance's files.
		used: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubelet_container_log_filesystem_used_bytes",
			Help: "Bytes used by the container's logs on the filesystem.",
		}, []string{"uid", "namespace", "pod", "container"}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_container_log_rotations_total",
			Help: "Rotations of a container's log file (renamed, the runtime asked to reopen it), for the containers the agent manages.",
		}, containerLabels),
		labels: map[string]prometheus.Labels{},
	}
	if reg != nil {
		reg.MustRegister(m.bytes, m.used, m.rotations)
	}
	return m
}

func (m *managerMetrics) of(t Target) prometheus.Labels {
	l := prometheus.Labels{"namespace": t.Namespace, "pod": t.Pod, "pod_uid": t.PodUID, "container": t.Container.Name}
	m.mu.Lock()
	m.labels[seriesKey(t)] = l
	m.mu.Unlock()
	return l
}

func (m *managerMetrics) setBytes(t Target, n, used int64) {
	l := m.of(t)
	m.bytes.With(l).Set(float64(n))
	m.used.With(usedLabels(l)).Set(float64(used))
}

// usedLabels are kubelet's labels of its log series.
func usedLabels(l prometheus.Labels) prometheus.Labels {
	return prometheus.Labels{"uid": l["pod_uid"], "namespace": l["namespace"], "pod": l["pod"], "container": l["container"]}
}

func (m *managerMetrics) rotated(t Target) { m.rotations.With(m.of(t)).Inc() }

// seriesKey names a container's series: its instances share them.
func seriesKey(t Target) string {
	return t.Namespace + "\x00" + t.Pod + "\x00" + t.PodUID + "\x00" + t.Container.Name
}

// forget deletes the series of the containers not in keep (seriesKey).
func (m *managerMetrics) forget(keep map[string]bool) {
	m.mu.Lock()
	var gone []prometheus.Labels
	for id, l := range m.labels {
		if !keep[id] {
			gone = append(gone, l)
			delete(m.labels, id)
		}
	}
	m.mu.Unlock()
	for _, l := range gone {
		m.bytes.Delete(l)
		m.used.Delete(usedLabels(l))
		m.rotations.Delete(l)
	}
}
