package results

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The failures that reached the threshold, for the restart ledger: the
// last run of consecutive failures of that instance.
func TestFailuresBehind(t *testing.T) {
	hs := NewHistories()
	key := HistoryKey{Pod: "uid-web", Container: "app", Type: Liveness}
	h := hs.Get(key)
	obs := func(id string, o Outcome, n int) Observation {
		return Observation{ContainerID: id, Outcome: o, Consecutive: n, Threshold: 3}
	}
	for _, o := range []Observation{
		obs("a", OutcomeFailure, 1), obs("a", OutcomeSuccess, 1),
		obs("a", OutcomeFailure, 1), obs("a", OutcomeFailure, 2), obs("a", OutcomeFailure, 3),
		obs("b", OutcomeSuccess, 1), obs("b", OutcomeFailure, 1),
	} {
		h.Add(o)
	}
	got := hs.FailuresBehind(key, "a")
	require.Len(t, got, 3)
	assert.Equal(t, []int{1, 2, 3}, []int{got[0].Consecutive, got[1].Consecutive, got[2].Consecutive})
	assert.Len(t, hs.FailuresBehind(key, "b"), 1)
	assert.Nil(t, hs.FailuresBehind(key, "c"))
	assert.Nil(t, hs.FailuresBehind(HistoryKey{Pod: "uid-web", Container: "app", Type: Startup}, "a"))

	assert.Len(t, hs.For("uid-web"), 1)
	hs.Retain(func(HistoryKey) bool { return false })
	assert.Empty(t, hs.For("uid-web"), "gone with its probe")
}
