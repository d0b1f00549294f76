package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// --probe-metrics=aggregate serves kubelet's two probe metrics by probe
// type (and result) only, every type's at 0 from the start.
func TestRunProbeMetricsAggregate(t *testing.T) {
	listen := freeLoopbackPort(t)
	startRun(t, "--listen", listen, "--probe-metrics", "aggregate")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + listen + "/metrics/probes"
	var body string
	require.Eventually(t, func() bool {
		code, b, err := request(t, client, url, "", "")
		body = b
		return err == nil && code == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	for _, want := range []string{
		`prober_probe_total{probe_type="Liveness",result="successful"} 0`,
		`prober_probe_total{probe_type="Startup",result="unknown"} 0`,
		`prober_probe_duration_seconds_count{probe_type="Readiness"} 0`,
	} {
		assert.Contains(t, body, want)
	}
}

// --probe-metrics is a config file key, as every flag; a bad value is
// refused.
func TestProbeMetricsFlag(t *testing.T) {
	var o runOptions
	fs := newRunCommand(&o).Flags()
	assert.Equal(t, "per-probe", o.probeMetrics, "kubelet's series by default")
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("probe-metrics: aggregate\n"), 0o600))
	require.NoError(t, applyConfig(fs, path))
	assert.Equal(t, "aggregate", o.probeMetrics)

	rt := fakeruntime.NewForTest(t)
	var stderr bytes.Buffer
	err := run(klog.NewContext(context.Background(), logr.Discard()), []string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none",
		"--listen", "", "--probe-metrics", "per-pod"}, io.Discard, &stderr)
	report(err, &stderr) // what main prints
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, stderr.String(), `--probe-metrics: "per-pod" is not per-probe or aggregate`)
}
