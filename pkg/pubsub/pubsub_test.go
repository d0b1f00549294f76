package pubsub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingSum coalesces ints into their sum; zeros are published but are
// no news.
type pendingSum struct{ sum, adds int }

func (p *pendingSum) Add(v int) bool { p.sum += v; p.adds++; return v != 0 }
func (p *pendingSum) Take() [2]int {
	b := [2]int{p.sum, p.adds}
	p.sum, p.adds = 0, 0
	return b
}

func signalled(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestTopic(t *testing.T) {
	double := func(last int) int { return 2 * last }
	for _, tc := range []struct {
		name string
		// before: published before Subscribe; after: after it.
		before, after []int
		replay        func(int) int
		closeFirst    bool
		want          [2]int // sum and number of values gathered
		ready, listed bool
	}{
		{name: "nothing published", want: [2]int{0, 0}},
		{name: "values coalesce until Next", after: []int{1, 2, 3}, want: [2]int{6, 3}, ready: true, listed: true},
		{name: "no news is listed, not ready", after: []int{0, 0}, want: [2]int{0, 2}, listed: true},
		{name: "the past is not replayed without replay", before: []int{5}, after: []int{1}, want: [2]int{1, 1}, ready: true, listed: true},
		{name: "a late subscriber gets the latest value replayed", before: []int{4, 5}, replay: double, want: [2]int{10, 1}, ready: true, listed: true},
		{name: "replay, then what follows", before: []int{5}, after: []int{1}, replay: double, want: [2]int{11, 2}, ready: true, listed: true},
		{name: "a closed subscription receives nothing", after: []int{1}, closeFirst: true, want: [2]int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var topic Topic[int, [2]int]
			for _, v := range tc.before {
				topic.Publish(v)
			}
			sub := topic.Subscribe(&pendingSum{}, tc.replay)
			if tc.closeFirst {
				sub.Close()
			}
			for _, v := range tc.after {
				topic.Publish(v)
			}
			assert.Equal(t, tc.ready, signalled(sub.Ready()), "ready")
			assert.Equal(t, tc.listed, signalled(sub.Listed()), "listed")
			assert.Equal(t, tc.want, sub.Next())
			assert.Equal(t, [2]int{0, 0}, sub.Next(), "Next drains")
			sub.Close()
		})
	}
}

func TestLatest(t *testing.T) {
	var topic Topic[int, [2]int]
	sub := topic.Subscribe(&pendingSum{}, nil)
	_, ok := sub.Latest()
	assert.False(t, ok, "nothing published")
	topic.Publish(3)
	topic.Publish(0)
	last, ok := sub.Latest()
	assert.True(t, ok)
	assert.Equal(t, 0, last, "the last value, news or not")
}

// A subscriber that never reads never blocks the writer: publishing many
// values to it returns, and they coalesce into one batch.
func TestPublishNeverWaitsForAReader(t *testing.T) {
	var topic Topic[int, [2]int]
	idle := topic.Subscribe(&pendingSum{}, nil)
	defer idle.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10000 {
			topic.Publish(1)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Publish waited for a subscriber that does not read")
	}
	assert.Equal(t, [2]int{10000, 10000}, idle.Next())
}
