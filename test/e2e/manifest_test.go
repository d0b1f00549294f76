//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// These tests compare with a real kubelet v1.36.3 run on the same
// manifests (../shared/kubelet): the manifest is given to the agent and a
// pod is made from it through CRI as kubelet starts one, then the agent
// takes over. fromManifest plays the part of the pod's creator (what a CI
// harness does with crictl); everything after the first start — probes,
// kills, restarts, hooks, the pod's end — is the agent's.

// manifest is a Pod manifest for pod name in the test namespace; spec is
// the YAML under spec:, indented by 2.
func manifest(name, spec string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, testNamespace, spec)
}

// writePod writes a whole Pod manifest into the agent's directory.
func (a *agent) writePod(t *testing.T, name, yamlText string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(a.manifestsDir, name+".yaml"), []byte(yamlText), 0o644))
}

// fromManifest starts the pod of a manifest as kubelet starts a new one:
// its sandbox, then its init containers in order — a regular one waited
// for until it has exited 0 (the agent restarts it if it fails), a sidecar
// until it runs — then its regular containers.
func fromManifest(t *testing.T, yamlText string) *pod {
	t.Helper()
	var spec corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict([]byte(yamlText), &spec))
	client := dial(t)
	p := runPodNamed(t, client, spec.Name, nil)
	start := func(ctr corev1.Container) string {
		return p.startContainer(container{name: ctr.Name, image: ctr.Image, command: append(slices.Clone(ctr.Command), ctr.Args...)})
	}
	for _, ic := range spec.Spec.InitContainers {
		start(ic)
		sidecar := ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways
		eventually(t, time.Minute, "init container "+ic.Name+" done", func() bool {
			list := instances(t, p, ic.Name)
			if len(list) == 0 {
				return false
			}
			newest := list[len(list)-1]
			if sidecar {
				return newest.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
			}
			if newest.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
				return false
			}
			st, err := client.ContainerStatus(t.Context(), newest.GetId(), false)
			return err == nil && st.GetStatus().GetExitCode() == 0
		})
	}
	for _, ctr := range spec.Spec.Containers {
		start(ctr)
	}
	return p
}

// sandboxReady reports whether the pod's sandbox is ready.
func sandboxReady(t *testing.T, p *pod) bool {
	t.Helper()
	st, err := p.client.PodSandboxStatus(t.Context(), p.id, false)
	require.NoError(t, err)
	return st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
}

// exitTimes returns when an instance started and finished.
func exitTimes(t *testing.T, p *pod, id string) (started, finished time.Time, exitCode int32) {
	t.Helper()
	st, err := p.client.ContainerStatus(t.Context(), id, false)
	require.NoError(t, err)
	s := st.GetStatus()
	return time.Unix(0, s.GetStartedAt()), time.Unix(0, s.GetFinishedAt()), s.GetExitCode()
}

// states renders a container's instances, oldest first, as
// "attempt:state".
func states(t *testing.T, p *pod, name string) string {
	t.Helper()
	var out []string
	for _, c := range instances(t, p, name) {
		out = append(out, fmt.Sprintf("%d:%s", c.GetMetadata().GetAttempt(), strings.TrimPrefix(c.GetState().String(), "CONTAINER_")))
	}
	return strings.Join(out, " ")
}
