package bounded

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short is kept", "abc", 3, "abc"},
		{"long is cut with a count", "abcdef", 3, "abc… (3 more bytes cut)"},
		{"cut on a rune boundary", "aé", 2, "a… (2 more bytes cut)"},
		{"empty", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, String(tt.in, tt.limit))
		})
	}
}

func TestStringStaysValidUTF8(t *testing.T) {
	in := strings.Repeat("日本", 1000)
	for limit := range 20 {
		out := String(in, limit)
		assert.True(t, utf8.ValidString(out), "limit %d: %q", limit, out)
		kept, _, _ := strings.Cut(out, "…")
		assert.LessOrEqual(t, len(kept), limit)
	}
}

// Within's result, marker included, is never over its limit.
func TestWithin(t *testing.T) {
	assert.Equal(t, "abc", Within("abc", 3))
	for _, n := range []int{65, 100, 1 << 10, 200 << 10, 5 << 20} {
		in := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		for _, limit := range []int{64, 100, 1 << 10} {
			out := Within(in, limit)
			assert.LessOrEqual(t, len(out), limit, "%d bytes within %d", n, limit)
			assert.True(t, utf8.ValidString(out))
			if n > limit {
				assert.Contains(t, out, "more bytes cut)")
			}
		}
	}
}

func TestError(t *testing.T) {
	assert.NoError(t, Error(nil, 10))
	small := errors.New("small")
	assert.Same(t, small, Error(small, 10), "a short error is kept, chain and all")

	huge := errors.New(strings.Repeat("x", 5<<20))
	cut := Error(huge, Message)
	assert.Less(t, len(cut.Error()), Message+64)
	assert.NotErrorIs(t, cut, huge, "the cut error must not keep the huge one alive")
}
