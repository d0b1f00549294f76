package podfs

import "testing"

func TestLayout(t *testing.T) {
	l := Layout{Root: "/var/lib/kubelet"}
	const uid = "0123abcd"
	for _, tc := range []struct{ got, want string }{
		{l.PodsDir(), "/var/lib/kubelet/pods"},
		{l.PodDir(uid), "/var/lib/kubelet/pods/0123abcd"},
		{l.VolumesDir(uid), "/var/lib/kubelet/pods/0123abcd/volumes"},
		{l.EmptyDir(uid, "cache"), "/var/lib/kubelet/pods/0123abcd/volumes/kubernetes.io~empty-dir/cache"},
		{l.DownwardAPIDir(uid, "info"), "/var/lib/kubelet/pods/0123abcd/volumes/kubernetes.io~downward-api/info"},
		{l.ProjectedDir(uid, "all"), "/var/lib/kubelet/pods/0123abcd/volumes/kubernetes.io~projected/all"},
		{l.VolumeDir(uid, "kubernetes.io~csi", "x"), "/var/lib/kubelet/pods/0123abcd/volumes/kubernetes.io~csi/x"},
		{l.PluginsDir(uid), "/var/lib/kubelet/pods/0123abcd/plugins"},
		{l.ReadyDir(uid, "cache"), "/var/lib/kubelet/pods/0123abcd/plugins/kubernetes.io~empty-dir/cache"},
		{l.ReadyDir(uid, "wrapped_info"), "/var/lib/kubelet/pods/0123abcd/plugins/kubernetes.io~empty-dir/wrapped_info"},
		{l.VolumeSubpathsDir(uid), "/var/lib/kubelet/pods/0123abcd/volume-subpaths"},
		{l.SubPathTarget(uid, "cache", "app", 2), "/var/lib/kubelet/pods/0123abcd/volume-subpaths/cache/app/2"},
		{l.ContainerDir(uid, "app"), "/var/lib/kubelet/pods/0123abcd/containers/app"},
		{l.EtcHosts(uid), "/var/lib/kubelet/pods/0123abcd/etc-hosts"},
		{l.OwnerFile(uid), "/var/lib/kubelet/pods/0123abcd/cri-prober.json"},
		{PodLogsDir("/var/log/pods", "kube-system", "etcd", uid), "/var/log/pods/kube-system_etcd_0123abcd"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestCheckElem(t *testing.T) {
	for name, ok := range map[string]bool{
		"0123-abcd": true, "web": true, "a.b": true,
		"": false, ".": false, "..": false, "a/b": false, "/a": false, "a\x00": false,
	} {
		if err := checkElem("pod UID", name); (err == nil) != ok {
			t.Errorf("checkElem(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

func TestIsTsDirName(t *testing.T) {
	for name, want := range map[string]bool{
		"..2026_03_04_05_06_07.123456": true,
		"..2026_03_04_05_06_07.":       false,
		"..data":                       false,
		"..data_tmp":                   false,
		"..2026_13_04_05_06_07.1":      false,
		"name":                         false,
	} {
		if got := isTsDirName(name); got != want {
			t.Errorf("isTsDirName(%q) = %v", name, got)
		}
	}
}
