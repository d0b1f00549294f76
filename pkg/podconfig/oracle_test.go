package podconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// testdata/kubelet holds what kubelet v1.36.3's own generatePodSandboxConfig
// and generateContainerConfig returned for oraclePods (kuberuntime's test
// manager: fake runtime helper, CFS quota on, 32Gi of memory, on a cgroup
// v1 host with 2MB and 1GB huge pages), and HashContainer's values. To
// make them again: PODCONFIG_ORACLE_INPUT=dir go test -run
// TestWriteOracleInputs ./pkg/podconfig, then run
// testdata/kubelet/oracle_test.go.txt as
// pkg/kubelet/kuberuntime/zz_podconfig_oracle_test.go of a kubernetes
// v1.36.3 tree with ORACLE_IN=dir ORACLE_OUT=testdata/kubelet.
const oracleDir = "testdata/kubelet"

func TestWriteOracleInputs(t *testing.T) {
	dir := os.Getenv("PODCONFIG_ORACLE_INPUT")
	if dir == "" {
		t.Skip("PODCONFIG_ORACLE_INPUT not set")
	}
	for name, pod := range oraclePods() {
		data, err := json.MarshalIndent(pod, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeletOracleInputs(t, dir)
}

// oracleNode is the node kuberuntime's test manager stands for.
func oracleNode() Node {
	return Node{
		Name:           "node-a",
		IPs:            []string{"192.0.2.1"},
		MemoryCapacity: 32 << 30,
		HugePageSizes:  []string{"2MB", "1GB"},
	}
}

// oracleInput is the start the oracle asked for: attempt 2 on 10.88.0.7.
func oracleInput(pod *corev1.Pod, c *corev1.Container) ContainerInput {
	in := ContainerInput{
		Pod: pod, Container: c, RestartCount: 2,
		PodIP: "10.88.0.7", PodIPs: []string{"10.88.0.7"},
		Image: ImageInfo{Ref: "sha256:ref-" + c.Name, Username: pod.Annotations["oracle/image-user"]},
	}
	in.Volumes = map[string]Volume{}
	for i := range pod.Spec.Volumes {
		if v, ok := VolumeFor(pod, &pod.Spec.Volumes[i], oracleNode()); ok {
			in.Volumes[pod.Spec.Volumes[i].Name] = v
		}
	}
	if s, ok := pod.Annotations["oracle/image-uid"]; ok {
		uid, _ := strconv.ParseInt(s, 10, 64)
		in.Image.UID = &uid
	}
	return in
}

// maskSandbox clears what kubelet's fake runtime helper made up (DNS,
// hostname, user namespace) on a sandbox config.
func maskSandbox(c *runtimeapi.PodSandboxConfig) {
	c.DnsConfig, c.Hostname = nil, ""
	if sc := c.GetLinux().GetSecurityContext(); sc != nil && sc.NamespaceOptions != nil {
		sc.NamespaceOptions.UsernsOptions = nil
	}
}

// maskContainer clears what the fake helper's empty run options decided
// (environment, mounts, and so the expansion of command and args) and the
// user namespace.
func maskContainer(c *runtimeapi.ContainerConfig) {
	c.Envs, c.Mounts, c.Command, c.Args = nil, nil, nil, nil
	if sc := c.GetLinux().GetSecurityContext(); sc != nil && sc.NamespaceOptions != nil {
		sc.NamespaceOptions.UsernsOptions = nil
	}
}

type oracleResult map[string]json.RawMessage

func readOracle(t *testing.T, name string) oracleResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(oracleDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r oracleResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// oracleError is kubelet's error for the key, if it returned one.
func (r oracleResult) oracleError(key string) (string, bool) {
	var e struct{ Error *string }
	if err := json.Unmarshal(r[key], &e); err == nil && e.Error != nil {
		return *e.Error, true
	}
	return "", false
}

func (r oracleResult) unmarshal(t *testing.T, key string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal(r[key], m); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func diffProto(t *testing.T, what string, want, got proto.Message) {
	t.Helper()
	if proto.Equal(want, got) {
		return
	}
	opts := protojson.MarshalOptions{Multiline: true}
	t.Errorf("%s differs from kubelet's\nkubelet: %s\nours:    %s", what, opts.Format(want), opts.Format(got))
}

// TestKubeletOracle compares the configs with kubelet's own, field by
// field, except what the oracle's fake runtime helper made up.
func TestKubeletOracle(t *testing.T) {
	pods := oraclePods()
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pod := pods[name]
		t.Run(name, func(t *testing.T) {
			want := readOracle(t, name)
			node := oracleNode()

			wantSB := &runtimeapi.PodSandboxConfig{}
			want.unmarshal(t, "sandbox", wantSB)
			gotSB, err := Sandbox(pod, 0, node)
			if err != nil {
				t.Fatalf("Sandbox: %v", err)
			}
			maskSandbox(wantSB)
			maskSandbox(gotSB)
			diffProto(t, "sandbox", wantSB, gotSB)

			for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					c := &list[i]
					key := "container/" + c.Name
					got, err := Container(oracleInput(pod, c), node)
					if msg, failed := want.oracleError(key); failed {
						var ce *ConfigError
						if !errors.As(err, &ce) || ce.Message != msg {
							t.Errorf("%s: error %v, kubelet's: %s", key, err, msg)
						}
						continue
					}
					if err != nil {
						t.Errorf("%s: %v", key, err)
						continue
					}
					wantC := &runtimeapi.ContainerConfig{}
					want.unmarshal(t, key, wantC)
					maskContainer(wantC)
					maskContainer(got)
					diffProto(t, key, wantC, got)
				}
			}
		})
	}
}

// TestContainerHashOracle checks ContainerHash against HashContainer's
// values for the oracle pods' containers.
func TestContainerHashOracle(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(oracleDir, "hashes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no hashes")
	}
	for key, hash := range want {
		var name, image string
		for i := range key {
			if key[i] == '|' {
				name, image = key[:i], key[i+1:]
				break
			}
		}
		got := strconv.FormatUint(ContainerHash(&corev1.Container{Name: name, Image: image}), 16)
		if got != hash {
			t.Errorf("ContainerHash(%s, %s) = %s, HashContainer: %s", name, image, got, hash)
		}
	}
}
