package restart

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// removeInstance removes an instance of p's container through CRI, then
// its log files (ContainerLogs.Remove: its log, rotated files and link),
// as kubelet's removeContainer with keepLogs false. An instance the
// runtime no longer has counts as removed, and its files still go. A
// failure to remove the files is logged, never the removal's.
func (r *Restarter) removeInstance(ctx context.Context, p *pods.Pod, inst *cri.Container) error {
	if err := r.runtime.RemoveContainer(ctx, inst.ID); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", inst.ID, err)
	}
	if r.logs == nil {
		return nil
	}
	if err := r.logs.Remove(p.Namespace, p.Name, inst); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to remove the log files of a removed container", "pod", klog.KRef(p.Namespace, p.Name),
			"containerName", inst.Name, "containerID", inst.ID)
	}
	return nil
}
