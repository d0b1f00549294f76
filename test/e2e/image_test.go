//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// Contract (issue 16, item 8): the archive make image writes, without a
// registry, imports with `ctr -n k8s.io images import` (the DaemonSet
// docs' command), and CRI runs it as the DaemonSet asks: its image by
// name, its arguments, mounts and securityContext (uid 0, no capability,
// no privilege escalation, read-only root). The agent in it reaches
// containerd through the mounted socket directory and answers; `version`
// in it prints what the binary built from this tree prints.
func TestImageRunsOnContainerd(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	socket, ok := strings.CutPrefix(endpoint, "unix://")
	require.True(t, ok, "endpoint %s", endpoint)
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), "ctr", append([]string{"-a", socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
		require.NoError(t, err, "ctr %v: %s", args, out)
		return string(out)
	}

	var ds appsv1.DaemonSet
	data, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/daemonset.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &ds))
	spec := ds.Spec.Template.Spec.Containers[0]

	archive := filepath.Join(t.TempDir(), "image.tar")
	build := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image", "IMAGE_OUT="+archive)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make image: %s", out)
	imported := ctr("images", "import", archive)
	require.Contains(t, imported, spec.Image, "ctr images import")
	t.Cleanup(func() {
		for _, line := range strings.Split(imported, "\n") {
			// unpacking localhost/cri-prober:latest (sha256:…)...done
			if f := strings.Fields(line); len(f) > 1 && f[0] == "unpacking" {
				exec.Command("ctr", "-a", socket, "-n", "k8s.io", "images", "rm", f[1]).Run()
			}
		}
	})

	// The DaemonSet's volumes, from the test's directories: the private
	// containerd's socket directory for /run/containerd, a state
	// directory, an empty manifest directory for the ConfigMap.
	hostDirs := map[string]string{
		"containerd": filepath.Dir(socket),
		"state":      t.TempDir(),
		"pods":       t.TempDir(),
	}
	var mounts []*runtimeapi.Mount
	for _, m := range spec.VolumeMounts {
		dir, ok := hostDirs[m.Name]
		require.True(t, ok, "volume %s: the test has no stand-in for it", m.Name)
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: dir, Readonly: m.ReadOnly})
	}
	// Its arguments, the node's address being the pod's loopback here.
	var args []string
	listen := ""
	for _, a := range spec.Args {
		a = strings.ReplaceAll(a, "$(NODE_IP)", "127.0.0.1")
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			listen = v
		}
		args = append(args, a)
	}
	require.NotEmpty(t, listen, "the DaemonSet's --listen")
	sc := spec.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.RunAsUser)

	c := dial(t)
	pod := runPod(t, c, "image")
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: spec.Name},
		Image:    &runtimeapi.ImageSpec{Image: spec.Image},
		Args:     args,
		Mounts:   mounts,
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: kubeletNamespaces(),
			RunAsUser:        &runtimeapi.Int64Value{Value: *sc.RunAsUser},
			ReadonlyRootfs:   *sc.ReadOnlyRootFilesystem,
			NoNewPrivs:       !*sc.AllowPrivilegeEscalation,
			Capabilities:     &runtimeapi.Capability{DropCapabilities: []string{"ALL"}},
		}},
	}
	id, err := c.CreateContainer(t.Context(), pod.id, cfg, pod.config)
	require.NoError(t, err)
	require.NoError(t, c.StartContainer(t.Context(), id))

	// The agent answers on its --listen address, and reaches containerd
	// (status warns when it cannot): asked from inside the container, by
	// the image's own binary.
	var mu sync.Mutex
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("last status in the container: %s", last)
			mu.Unlock()
		}
	})
	eventually(t, 30*time.Second, "the agent in the image serving, containerd reachable", func() bool {
		resp, err := c.ExecSync(t.Context(), id, []string{"/usr/bin/cri-prober", "status", "--server", listen}, 5*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			last = err.Error()
			return false
		}
		last = string(resp.GetStdout()) + string(resp.GetStderr())
		return resp.GetExitCode() == 0 && len(resp.GetStderr()) == 0
	})

	resp, err := c.ExecSync(t.Context(), id, []string{"/usr/bin/cri-prober", "version"}, 5*time.Second)
	require.NoError(t, err)
	want, err := exec.Command(filepath.Join(root, "bin/cri-prober"), "version").Output()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(resp.GetStdout()), "version in the image")
}
