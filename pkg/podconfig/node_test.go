package podconfig

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The rows of kubelet's TestParseResolvConf (options compare as sets:
// kubelet's order is a map's).
func TestParseResolvConf(t *testing.T) {
	for i, tc := range []struct {
		data                           string
		nameservers, searches, options []string
		isErr                          bool
	}{
		{"", nil, nil, nil, false},
		{" ", nil, nil, nil, false},
		{"\n", nil, nil, nil, false},
		{"\t\n\t", nil, nil, nil, false},
		{"#comment\n", nil, nil, nil, false},
		{" #comment\n", nil, nil, nil, false},
		{"#comment\n#comment", nil, nil, nil, false},
		{"#comment\nnameserver", nil, nil, nil, true},
		{"#comment\nnameserver\nsearch", nil, nil, nil, true},
		{"#comment\nnameserver 1.2.3.4\nsearch", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{" nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"\tnameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver\t1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver \t 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4\nnameserver 5.6.7.8", []string{"1.2.3.4", "5.6.7.8"}, nil, nil, false},
		{"nameserver 1.2.3.4 #comment", []string{"1.2.3.4"}, nil, nil, false},
		{"search ", nil, nil, nil, false},
		{"search .", nil, nil, nil, false},
		{"search . foo", nil, []string{"foo"}, nil, false},
		{"search foo .", nil, []string{"foo"}, nil, false},
		{"search foo .  bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo", nil, []string{"foo"}, nil, false},
		{"search foo bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo. bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo bar bat\n", nil, []string{"foo", "bar", "bat"}, nil, false},
		{"search foo\nsearch bar", nil, []string{"bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo bar", []string{"1.2.3.4"}, []string{"foo", "bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, nil, false},
		{"#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", []string{"1.2.3.4"}, []string{"foo"}, nil, false},
		{"options ", nil, nil, nil, false},
		{"options ndots:5 attempts:2", nil, nil, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1 ndots:5 attempts:2", nil, nil, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1 edns0 attempts:2 single-request-reopen", nil, nil, []string{"edns0", "attempts:2", "single-request-reopen", "ndots:1"}, false},
		{"options ndots:1\noptions ndots:5 attempts:3", nil, nil, []string{"ndots:5", "attempts:3"}, false},
		{"options ndots:1 timeout:3 timeout:1 attempts:3\noptions ndots:5", nil, nil, []string{"ndots:5", "timeout:1", "attempts:3"}, false},
		{"options ndots:1 attempts:3\noptions ndots:1 attempts:3 ndots:5", nil, nil, []string{"ndots:5", "attempts:3"}, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, []string{"ndots:5", "attempts:4"}, false},
	} {
		rc, err := ParseResolvConf([]byte(tc.data))
		if tc.isErr {
			if err == nil {
				t.Errorf("[%d] %q: no error", i, tc.data)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%d] %q: %v", i, tc.data, err)
			continue
		}
		sort.Strings(rc.Options)
		sort.Strings(tc.options)
		if !reflect.DeepEqual(rc.Nameservers, nonNil(tc.nameservers)) || !reflect.DeepEqual(rc.Searches, nonNil(tc.searches)) || !reflect.DeepEqual(rc.Options, nonNil(tc.options)) {
			t.Errorf("[%d] %q: got %+v, want %v %v %v", i, tc.data, rc, tc.nameservers, tc.searches, tc.options)
		}
	}
	if _, err := ParseResolvConf([]byte(strings.Repeat("#", 10<<20+1))); err == nil {
		t.Error("a resolv.conf over 10 MiB parsed")
	}
	// utilerrors.NewAggregate: the same message twice is said once.
	_, err := ParseResolvConf([]byte("nameserver\nnameserver"))
	if err == nil || err.Error() != "nameserver list is empty " {
		t.Errorf("aggregate error %v", err)
	}
}

func TestLayout(t *testing.T) {
	l := Node{}.Layout()
	uid := "u-1"
	for _, tc := range []struct{ got, want string }{
		{l.PodsDir(), "/var/lib/kubelet/pods"},
		{l.PodDir("u-1"), "/var/lib/kubelet/pods/u-1"},
		{l.VolumesDir("u-1"), "/var/lib/kubelet/pods/u-1/volumes"},
		{l.VolumeDir("u-1", PluginProjected, "all"), "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~projected/all"},
		{l.PluginsDir("u-1"), "/var/lib/kubelet/pods/u-1/plugins"},
		{l.ReadyDir("u-1", "cache"), "/var/lib/kubelet/pods/u-1/plugins/kubernetes.io~empty-dir/cache"},
		{l.ReadyDir("u-1", "wrapped_info"), "/var/lib/kubelet/pods/u-1/plugins/kubernetes.io~empty-dir/wrapped_info"},
		{l.VolumeSubpathsDir("u-1"), "/var/lib/kubelet/pods/u-1/volume-subpaths"},
		{l.RecordFile("u-1"), "/var/lib/kubelet/pods/u-1/cri-prober.json"},
		{l.VolumeDir("u-1", PluginEmptyDir, "cache"), "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~empty-dir/cache"},
		{l.VolumeDir("u-1", PluginDownwardAPI, "info"), "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~downward-api/info"},
		{l.ContainerDir("u-1", "app"), "/var/lib/kubelet/pods/u-1/containers/app"},
		{l.EtcHosts("u-1"), "/var/lib/kubelet/pods/u-1/etc-hosts"},
		{l.SubPathBindTarget("u-1", "cache", "app", 2), "/var/lib/kubelet/pods/u-1/volume-subpaths/cache/app/2"},
		{l.SeccompDir(), "/var/lib/kubelet/seccomp"},
		{l.PodLogsDirectory("ns", "web", "u-1"), "/var/log/pods/ns_web_u-1"},
		{l.ContainerLogsDirectory("ns", "web", "u-1", "app"), "/var/log/pods/ns_web_u-1/app"},
		{ContainerLogPath("app", 3), "app/3.log"},
		{Node{RootDir: "/srv/kubelet", PodLogsDir: "/logs"}.Layout().PodLogsDirectory("ns", "web", "u-1"), "/logs/ns_web_u-1"},
		{Node{RootDir: "/srv/kubelet/"}.Layout().EtcHosts("u-1"), "/srv/kubelet/pods/u-1/etc-hosts"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s (uid %s)", tc.got, tc.want, uid)
		}
	}
}
