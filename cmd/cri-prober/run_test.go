package main

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// The state API shows probe output and has no authentication: loopback
// by default, and a loud warning when bound where other hosts reach it.
func TestRunWarnsWhenTheAPIIsReachableFromOtherHosts(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	for _, tt := range []struct {
		listen string
		warns  bool
	}{
		{"127.0.0.1:0", false},
		{"[::1]:0", false},
		{"0.0.0.0:0", true},
	} {
		t.Run(tt.listen, func(t *testing.T) {
			var mu sync.Mutex
			var logs strings.Builder
			logger := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				logs.WriteString(prefix + args + "\n")
			}, funcr.Options{})
			read := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none", "--listen", tt.listen}, io.Discard, io.Discard)
			}()
			require.Eventually(t, func() bool { return strings.Contains(read(), `"msg"="Probing"`) }, 10*time.Second, 10*time.Millisecond, read())
			cancel()
			require.NoError(t, <-done)
			assert.Equal(t, tt.warns, strings.Contains(read(), "WARNING: the state API and metrics are reachable from other hosts"), read())
		})
	}
}

func TestSpecSources(t *testing.T) {
	for _, tt := range []struct {
		list                   string
		manifests, annotations bool
		wantErr                string
	}{
		{"manifests,annotations", true, true, ""},
		{"manifests", true, false, ""},
		{" annotations ", false, true, ""},
		{"manifest", false, false, `unknown source "manifest"`},
		{"", false, false, "give at least one source"},
	} {
		m, a, err := parseSpecSources(tt.list)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.list)
			continue
		}
		require.NoError(t, err, tt.list)
		assert.Equal(t, tt.manifests, m, tt.list)
		assert.Equal(t, tt.annotations, a, tt.list)
	}

	// Manifests given but left out as a source: a contradiction, refused.
	rt := fakeruntime.NewForTest(t)
	var stderr strings.Builder
	err := run(context.Background(), []string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none", "--listen", "",
		"--spec-sources", "annotations", "--pod-manifests", t.TempDir()}, io.Discard, &stderr)
	report(err, &stderr) // what main prints
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, stderr.String(), "--pod-manifests is set but --spec-sources leaves manifests out")
}

// --node-name and kubelet's --hostname-override are one setting: the
// node's name. Both given must agree; its default is the host's name as
// kubelet names its node.
func TestNodeName(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, tt := range []struct {
		name, nodeName, override, want, wantErr string
	}{
		{name: "default: the host's name, lowercased", want: strings.ToLower(strings.TrimSpace(host))},
		{name: "--node-name", nodeName: "Node-A ", want: "node-a"},
		{name: "kubelet's --hostname-override", override: "node-b", want: "node-b"},
		{name: "both, agreeing", nodeName: "node-c", override: "NODE-C", want: "node-c"},
		{name: "both, disagreeing", nodeName: "node-c", override: "node-d", wantErr: `--node-name "node-c" and --hostname-override "node-d" name the node twice: give one of them`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := nodeFlags{nodeName: tt.nodeName, hostnameOverride: tt.override}
			got, err := f.name()
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	rt := fakeruntime.NewForTest(t)
	var stderr strings.Builder
	err = run(context.Background(), []string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none", "--listen", "",
		"--node-name", "a", "--hostname-override", "b"}, io.Discard, &stderr)
	report(err, &stderr)
	require.ErrorIs(t, err, errUsage, "refused before anything starts")
	assert.Contains(t, stderr.String(), "name the node twice")
}
