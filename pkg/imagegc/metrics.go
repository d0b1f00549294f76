package imagegc

import "github.com/prometheus/client_golang/prometheus"

// kubeletAlpha begins the HELP text of a series kubelet declares at its
// ALPHA stability level, as kubelet's metrics registry writes it.
const kubeletAlpha = "[ALPHA] "

// metrics are kubelet's image garbage collection counter and the agent's
// own gauges of the image filesystem (kubelet shows those only in its
// stats summary, with no series of its own).
type metrics struct {
	collected                     *prometheus.CounterVec
	capacity, available, imageUse prometheus.Gauge
}

// newMetrics creates the series and registers them with reg (nil: not
// exported). As kubelet's, the counter has no series until an image is
// removed for that reason, and its HELP text is kubelet's, stability
// level included.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		collected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_image_garbage_collected_total",
			Help: kubeletAlpha + "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
		}, []string{"reason"}),
		capacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_image_fs_capacity_bytes",
			Help: "Capacity of the filesystem holding the runtime's images (CRI ImageFsInfo's mountpoint), at the last image garbage collection.",
		}),
		available: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_image_fs_available_bytes",
			Help: "Bytes available on the filesystem holding the runtime's images, at the last image garbage collection.",
		}),
		imageUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cri_prober_image_fs_used_bytes",
			Help: "Bytes the runtime's images use on their filesystem (CRI ImageFsInfo), at the last image garbage collection.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.collected, m.capacity, m.available, m.imageUse)
	}
	return m
}

// observe sets the gauges from a measurement.
func (m *metrics) observe(u Usage) {
	m.capacity.Set(float64(u.Capacity))
	m.available.Set(float64(u.Available))
	m.imageUse.Set(float64(u.Used))
}
