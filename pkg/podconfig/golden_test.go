package podconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// goldenNode is a node as the agent would describe one: cgroup v2 with the
// swap controller, kubelet's cgroupfs layout, cluster DNS.
func goldenNode() Node {
	return Node{
		Name: "node-a",
		IPs:  []string{"192.0.2.1", "2001:db8::1"},
		ResolvConf: ResolvConf{
			Nameservers: []string{"10.0.0.2"},
			Searches:    []string{"corp.example", "lab.example"},
			Options:     []string{"ndots:2", "timeout:1"},
		},
		ClusterDNS:    []string{"10.96.0.10"},
		ClusterDomain: "cluster.local",
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
		},
		MemoryCapacity:          8 << 30,
		CgroupRoot:              "/kubepods",
		CgroupV2:                true,
		SwapControllerAvailable: true,
		HugePageSizes:           []string{"2MB", "1GB"},
	}
}

func goldenInput(pod *corev1.Pod, c *corev1.Container, node Node) ContainerInput {
	return ContainerInput{
		Pod: pod, Container: c, RestartCount: 1,
		PodIP: "10.88.0.7", PodIPs: []string{"10.88.0.7", "fd00::7"},
		Image:                      ImageInfo{Ref: "sha256:" + c.Name + "0000000000000000000000000000000000000000000000000000000000"[len(c.Name):]},
		Volumes:                    klVolumes(pod, node),
		TerminationMessageHostPath: filepath.Join(node.Layout().ContainerDir(pod.UID, c.Name), "0a1b2c3d"),
	}
}

// TestGolden asserts the whole configs of the representative static pod:
// its sandbox and each of its four containers (testdata/golden; -update
// rewrites them, to be reviewed).
func TestGolden(t *testing.T) {
	pod, node := goldenPod(), goldenNode()
	sb, err := Sandbox(pod, 0, node)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "sandbox", sb)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			cfg, err := Container(goldenInput(pod, c, node), node)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			checkGolden(t, "container-"+c.Name, cfg)
		}
	}
}

func checkGolden(t *testing.T, name string, m proto.Message) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	raw, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := m.ProtoReflect().New().Interface()
	if err := protojson.Unmarshal(want, wantMsg); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(wantMsg, m) {
		t.Errorf("%s differs from %s:\n%s", name, path, buf.String())
	}
}
