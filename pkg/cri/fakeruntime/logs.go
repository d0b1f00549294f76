package fakeruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// logPathLocked is the container's log file as ContainerStatus reports it
// ("" without one).
func (r *Runtime) logPathLocked(c *container) string {
	if c.config.GetLogPath() == "" {
		return ""
	}
	var dir string
	if sb, ok := r.sandboxes[c.sandboxID]; ok {
		dir = sb.config.GetLogDirectory()
	}
	return filepath.Join(dir, c.config.GetLogPath())
}

// WriteLog writes lines to a running container's log file in the CRI
// format (stream "stdout" or "stderr", each a full line), as the
// runtime's shim would: to the file it holds open, opened at the
// container's log path on the first write and again at each
// ReopenContainerLog, so that lines written after a rotation go to the
// new file.
func (r *Runtime) WriteLog(id, stream string, lines ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("no container %s", id)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %s is not running", id)
	}
	if c.log == nil {
		if err := r.openLogLocked(c); err != nil {
			return err
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintf(c.log, "%s %s F %s\n", r.now().UTC().Format(time.RFC3339Nano), stream, l); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) openLogLocked(c *container) error {
	path := r.logPathLocked(c)
	if path == "" {
		return fmt.Errorf("container %s has no log path", c.id)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	if c.log != nil {
		c.log.Close()
	}
	c.log = f
	return nil
}

// closeLogLocked closes the log file a container that exits holds.
func closeLogLocked(c *container) {
	if c.log != nil {
		c.log.Close()
		c.log = nil
	}
}

// ReopenContainerLog reopens a running container's log file at its log
// path, as containerd does: a new file if the old one was renamed away.
func (r *Runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return nil, notFound("container", req.GetContainerId())
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container is not running")
	}
	if err := r.openLogLocked(c); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to create and open log file: %v", err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// ReopenContainerLog is the client's, in process.
func (d *Direct) ReopenContainerLog(ctx context.Context, id string) error {
	if err := d.r.injected("ReopenContainerLog"); err != nil {
		return err
	}
	_, err := d.r.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return err
}
