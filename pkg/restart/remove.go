package restart

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// removeInstance removes an instance of p's container as kubelet's
// removeContainer with keepLogs false: its log files first
// (ContainerLogs.Remove: its log, rotated files and link), then the
// instance through CRI. An instance the runtime no longer has counts as
// removed. A failure to remove the files is logged and the instance still
// removed (kubelet returns it and keeps the container, to be tried again:
// a log file the agent cannot remove would keep the dead instance for
// good).
func (r *Restarter) removeInstance(ctx context.Context, p *pods.Pod, inst *cri.Container) error {
	if r.logs != nil {
		if err := r.logs.Remove(p.Namespace, p.Name, inst); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to remove the log files of a container", "pod", klog.KRef(p.Namespace, p.Name),
				"containerName", inst.Name, "containerID", inst.ID)
		}
	}
	if err := r.runtime.RemoveContainer(ctx, inst.ID); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", inst.ID, err)
	}
	return nil
}
