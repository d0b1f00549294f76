package podfs

import (
	"strings"
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
100 22 0:50 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/mem rw,relatime - tmpfs tmpfs rw,size=1024k
101 22 0:51 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/with\040space rw - tmpfs tmpfs rw
102 22 8:1 /data /var/lib/kubelet/pods/u1/volume-subpaths/v/c/0 rw shared:1 - ext4 /dev/sda1 rw
103 102 0:52 / /var/lib/kubelet/pods/u1/volume-subpaths/v/c/0/inner rw - tmpfs tmpfs rw
104 22 0:53 / /var/lib/kubelet/pods/u10/volumes/x rw - tmpfs tmpfs rw
105 100 0:54 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/mem rw - tmpfs tmpfs rw
`
	got, err := parseMountInfo(strings.NewReader(table), "/var/lib/kubelet/pods/u1")
	if err != nil {
		t.Fatal(err)
	}
	want := []mountPoint{
		{"/var/lib/kubelet/pods/u1/volume-subpaths/v/c/0/inner", "tmpfs"},
		{"/var/lib/kubelet/pods/u1/volume-subpaths/v/c/0", "ext4"},
		{"/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/with space", "tmpfs"},
		{"/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/mem", "tmpfs"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %v, want %v", i, got[i], want[i])
		}
	}
}
