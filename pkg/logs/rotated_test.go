package logs

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// records are CRI log lines, each "<n>" on stdout written at minute n.
func records(from, to int) string {
	var b strings.Builder
	for n := from; n <= to; n++ {
		fmt.Fprintf(&b, "%s stdout F line %d\n", time.Date(2026, 1, 1, 0, n, 0, 0, time.UTC).Format(time.RFC3339Nano), n)
	}
	return b.String()
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.String()
}

func lines(from, to int) string {
	var b strings.Builder
	for n := from; n <= to; n++ {
		fmt.Fprintf(&b, "line %d\n", n)
	}
	return b.String()
}

// stamp names the file rotated at the given minute's 30th second.
func stamp(minute int) string {
	return time.Date(2026, 1, 1, 0, minute, 30, 0, time.UTC).In(time.Local).Format(TimestampFormat)
}

// With Rotated, a tail or a since that asks for more than the current
// file holds reads the rotated files before it, compressed or not, oldest
// first; what an interrupted rotation left (a .tmp, a file compressed
// already) is not read.
func TestReadAcrossRotations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns_pod_uid", "app")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	writeFiles(t, dir, map[string]string{
		"0.log." + stamp(3) + ".gz":  gzipped(t, records(1, 3)),
		"0.log." + stamp(3):          "not read: compressed already\n",
		"0.log." + stamp(5):          records(4, 5),
		"0.log." + stamp(5) + ".tmp": "not read: temporary\n",
		"0.log":                      records(6, 7),
	})
	log := filepath.Join(dir, "0.log")
	since := func(minute int) time.Time { return time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{name: "current file only without Rotated", opts: Options{Tail: 5}, want: lines(6, 7)},
		{name: "all: the current file only, as kubelet", opts: Options{Tail: -1, Rotated: true}, want: lines(6, 7)},
		{name: "tail within the current file", opts: Options{Tail: 2, Rotated: true}, want: lines(6, 7)},
		{name: "tail into the newest rotated file", opts: Options{Tail: 3, Rotated: true}, want: lines(5, 7)},
		{name: "tail into the compressed file", opts: Options{Tail: 5, Rotated: true}, want: lines(3, 7)},
		{name: "tail beyond every file", opts: Options{Tail: 99, Rotated: true}, want: lines(1, 7)},
		{name: "since within the current file", opts: Options{Tail: -1, Since: since(7), Rotated: true}, want: lines(7, 7)},
		{name: "since into the rotated files", opts: Options{Tail: -1, Since: since(2), Rotated: true}, want: lines(2, 7)},
		{name: "limit bytes across files", opts: Options{Tail: 4, LimitBytes: 14, Rotated: true}, want: "line 4\nline 5\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, Read(t.Context(), log, tc.opts, &out, &out, nil))
			assert.Equal(t, tc.want, out.String())
		})
	}
}

// One read takes at most maxRotatedBytes of the rotated files, all of
// them: past it, the older lines are not read.
func TestReadAcrossRotationsBudget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns_pod_uid", "app")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	writeFiles(t, dir, map[string]string{
		"0.log." + stamp(3) + ".gz": gzipped(t, records(1, 3)),
		"0.log." + stamp(5):         records(4, 5),
		"0.log":                     records(6, 7),
	})
	old := maxRotatedBytes
	maxRotatedBytes = int64(len(records(4, 5)) + len(records(1, 3))/2)
	t.Cleanup(func() { maxRotatedBytes = old })
	var out bytes.Buffer
	require.NoError(t, Read(t.Context(), filepath.Join(dir, "0.log"), Options{Tail: 99, Rotated: true}, &out, &out, nil))
	assert.Equal(t, lines(4, 7), out.String())
}
