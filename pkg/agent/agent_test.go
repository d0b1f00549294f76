package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/events"
)

// Every event says who reported it, as events.k8s.io/v1 Events do,
// before any recorder (the log, the ring, the hooks) gets it.
func TestEventsSayWhoReportedThem(t *testing.T) {
	ring := events.NewRing(10)
	reported{instance: "node1", to: recorders{ring}}.Record(events.Event{Reason: "Killing", Namespace: "ns", Pod: "web"})
	got := ring.Since(time.Time{})
	require.Len(t, got, 1)
	assert.Equal(t, "cri-prober", got[0].ReportingController)
	assert.Equal(t, "node1", got[0].ReportingInstance)
}
