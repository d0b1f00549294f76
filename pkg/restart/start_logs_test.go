package restart

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// loggingMaker gives the configs kubelet's log directory and paths.
type loggingMaker struct{ *fakeMaker }

func (m loggingMaker) Container(ctx context.Context, p *pods.Pod, sandbox *cri.Sandbox, c *pods.Container, attempt int64) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	cfg, sandboxCfg, err := m.fakeMaker.Container(ctx, p, sandbox, c, attempt)
	if err == nil {
		cfg.LogPath = c.Name + "/0.log"
		sandboxCfg.LogDirectory = "/var/log/pods/ns_web-node_uid"
	}
	return cfg, sandboxCfg, err
}

type fakeLinks struct {
	links []string
	err   error
}

func (f *fakeLinks) Link(namespace, podName string, inst *cri.Container) error {
	f.links = append(f.links, namespace+"/"+podName+" "+inst.Name+" "+inst.LogPath)
	return f.err
}

func (f *fakeLinks) Remove(string, string, *cri.Container) error { return nil }

// Once an instance started, its log file is linked (kubelet's
// legacyLogSymlink, named by the sandbox), the new instance's log path
// being the sandbox's log directory joined with the container's; a
// failed link fails nothing.
func TestStartLinksTheLog(t *testing.T) {
	links := &fakeLinks{err: errors.New("read-only file system")}
	st := newSyncTest(t, WithContainerLogs(links))
	st.r.maker = loggingMaker{st.maker}
	m := ownedPod(spec.Container{Name: "app", Kind: spec.Regular})
	st.sync(t, st.view(t, m, true))
	assert.Equal(t, []string{"ns/web-node app /var/log/pods/ns_web-node_uid/app/0.log"}, links.links)
	sb := st.view(t, m, true).Sandbox.ID
	assert.Equal(t, []string{"app#0:CONTAINER_RUNNING"}, st.states(sb))
}
