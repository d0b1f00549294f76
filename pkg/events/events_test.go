package events

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func ev(sec int, reason string) Event {
	return Event{Time: time.Unix(int64(sec), 0), Type: Normal, Reason: reason}
}

func reasons(list []Event) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.Reason)
	}
	return out
}

func TestRingKeepsTheLastEvents(t *testing.T) {
	r := NewRing(3)
	assert.Empty(t, r.Since(time.Time{}))
	r.Record(ev(1, "a"))
	r.Record(ev(2, "b"))
	assert.Equal(t, []string{"a", "b"}, reasons(r.Since(time.Time{})))
	r.Record(ev(3, "c"))
	r.Record(ev(4, "d"))
	assert.Equal(t, []string{"b", "c", "d"}, reasons(r.Since(time.Time{})), "oldest dropped, oldest first")
	assert.Equal(t, []string{"c", "d"}, reasons(r.Since(time.Unix(3, 0))))
}

func TestRingTruncatesMessages(t *testing.T) {
	r := NewRing(1)
	r.Record(Event{Message: strings.Repeat("x", MaxMessage+10)})
	got := r.Since(time.Time{})[0].Message
	assert.Equal(t, strings.Repeat("x", MaxMessage)+"… (10 more bytes cut)", got)
}

func TestWatcherNeverBlocksRecord(t *testing.T) {
	r := NewRing(10)
	w := r.Watch(2)
	defer w.Close()
	for i := range 5 {
		r.Record(ev(i, "x"))
	}
	assert.Len(t, w.C(), 2)
	assert.True(t, w.Missed())
	assert.False(t, w.Missed(), "cleared")
	<-w.C()
	<-w.C()
	w.Close()
	r.Record(ev(9, "after close"))
	assert.Empty(t, w.C())
}
