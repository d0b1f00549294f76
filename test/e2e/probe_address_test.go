//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 23: `cri-prober probe URL` and `probe HOST:PORT` (and a gRPC URL)
// as the only argument probe a real container's address, with no runtime
// and no agent: exit 0 for a success, 1 for a failure, the target's own
// answer printed.
func TestProbeAddressArgument(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "address")
	id := pod.startContainer(container{name: "web", image: targetImage})
	st, err := c.PodSandboxStatus(t.Context(), pod.id, false)
	require.NoError(t, err)
	ip := st.GetStatus().GetNetwork().GetIp()
	require.NotEmpty(t, ip)

	probe := func(arg string) (string, int) {
		out, err := runBinary(t, "probe", arg)
		if ee, ok := err.(*exec.ExitError); ok {
			return out, ee.ExitCode()
		}
		require.NoError(t, err, out)
		return out, 0
	}
	healthz := fmt.Sprintf("http://%s:8080/healthz", ip)
	eventually(t, 10*time.Second, "the target serves", func() bool { _, code := probe(healthz); return code == 0 })

	out, code := probe(fmt.Sprintf("http://%s:8080/ready", ip))
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "result:   success")
	out, code = probe(fmt.Sprintf("%s:9000", ip))
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "result:   success", "HOST:PORT: a TCP connect")
	out, code = probe(fmt.Sprintf("grpc://%s:5000", ip))
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "result:   success", "a gRPC health check")

	pod.exec(id, "touch", "/tmp/not-ready")
	out, code = probe(fmt.Sprintf("http://%s:8080/ready", ip))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "HTTP probe failed with statuscode: 503")
	out, code = probe(fmt.Sprintf("%s:1", ip))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "connection refused")
	out, code = probe("ftp://" + ip + "/")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "a URL's scheme must be http or https (an httpGet probe) or grpc")
}
