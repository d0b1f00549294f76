package api

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// GET …/restarts answers as it did when ledger.Entry was its wire type
// (testdata/restarts-response.json, the answer of then), now through
// api.Restart.
func TestRestartsWireFormat(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	entries := fakeLedger{
		{Time: t0, Node: "node1", Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c0", Cause: string(restart.CauseLiveness),
			Failures: []ledger.Failure{{Time: t0.Add(-10 * time.Second), Output: "HTTP probe failed with statuscode: 500", Consecutive: 3, Threshold: 3}},
			ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, BackOffSeconds: 10, Action: ledger.ActionRestarted, ReplacementID: "c1", Attempt: 1},
		{Time: t0.Add(5 * time.Minute), Node: "node1", Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c1", Cause: string(restart.CauseExit),
			ExitCode: 3, Action: ledger.ActionStopped},
	}
	s := New(Config{Pods: testPods(), History: fakeHistory{}, Ledger: entries})
	code, body := get(t, s.Handler(), "/api/v1/pods/shop/web/restarts")
	require.Equal(t, http.StatusOK, code)
	want, err := os.ReadFile(filepath.Join("testdata", "restarts-response.json"))
	require.NoError(t, err)
	assert.Equal(t, string(want), body)
}
