package podip

import (
	"reflect"
	"testing"
)

// Rows of kubelet's TestSortPodIPs (its nodeIPs are the node's first).
func TestSort(t *testing.T) {
	for _, tc := range []struct {
		nodeIPs, podIPs, want []string
	}{
		{nil, nil, []string{}},
		{[]string{"10.0.0.1"}, []string{"10.0.0.2"}, []string{"10.0.0.2"}},
		{[]string{"10.0.0.1", "2001:db8::2"}, []string{"fd01::1234", "10.0.0.2"}, []string{"10.0.0.2", "fd01::1234"}},
		{[]string{"10.0.0.1"}, []string{"10.0.0.2", "10.0.0.3", "fd01::1234", "fd01::5678"}, []string{"10.0.0.2", "fd01::1234"}},
		{[]string{"2001:db8::2"}, []string{"10.0.0.2", "fd01::1234"}, []string{"fd01::1234", "10.0.0.2"}},
		{[]string{"10.0.0.1"}, []string{"010.000.000.002"}, []string{"10.0.0.2"}},
		{[]string{"10.0.0.1"}, []string{"fd01:0:0::1234"}, []string{"fd01::1234"}},
	} {
		nodeIP := ""
		if len(tc.nodeIPs) > 0 {
			nodeIP = tc.nodeIPs[0]
		}
		if got := Sort(tc.podIPs, nodeIP); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Sort(%v, node %v) = %v, want %v", tc.podIPs, tc.nodeIPs, got, tc.want)
		}
		want := ""
		if len(tc.want) > 0 {
			want = tc.want[0]
		}
		if got := Primary(tc.podIPs, nodeIP); got != want {
			t.Errorf("Primary(%v, node %v) = %q, want %q", tc.podIPs, tc.nodeIPs, got, want)
		}
	}
}
