package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `version` says what the binary was built with, as kubectl and crictl do.
func TestVersionSaysWhatItWasBuiltWith(t *testing.T) {
	out, _, err := runCLI(t, "version")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.True(t, strings.HasPrefix(lines[0], "cri-prober "+version))
	assert.Equal(t, "  go: "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, lines[1])
	assert.Regexp(t, `^  kubernetes api: v0\.\d+\.\d+ \(k8s\.io/api\), cri-api v0\.\d+\.\d+$`, lines[2])
}

// cri_prober_build_info is 1, labelled as every exporter's build_info.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoCollector("node1"))
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "cri_prober_build_info"))
	families, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string]string{}
	for _, l := range families[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, version, labels["version"])
	assert.Equal(t, runtime.Version(), labels["goversion"])
	assert.Regexp(t, `^v0\.\d+\.\d+$`, labels["kubernetes_api"])
	assert.Equal(t, "node1", labels["node"], "the node's name (--node-name), so that a fleet's agents stay apart")
	assert.Equal(t, 1.0, families[0].GetMetric()[0].GetGauge().GetValue())
}
