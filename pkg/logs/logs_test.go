package logs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

func TestRead(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	all := Options{Tail: -1}
	tests := []struct {
		name       string
		file       string
		opts       Options
		wantStdout string
		wantStderr string
		wantErrors []string // what the log says was skipped
	}{
		{name: "both streams, each to its writer", file: "basic.log", opts: all,
			wantStdout: "one\nthree\n", wantStderr: "two\n"},
		{name: "timestamps: fixed width, the runtime's zone kept", file: "basic.log", opts: Options{Tail: -1, Timestamps: true},
			wantStdout: "2024-01-02T15:04:05.000000001Z one\n2024-01-02T16:04:07.000000000+01:00 three\n",
			wantStderr: "2024-01-02T15:04:06.500000000Z two\n"},
		{name: "since", file: "basic.log", opts: Options{Tail: -1, Since: at("2024-01-02T15:04:06Z")},
			wantStdout: "three\n", wantStderr: "two\n"},
		{name: "since is inclusive", file: "basic.log", opts: Options{Tail: -1, Since: at("2024-01-02T15:04:07Z")},
			wantStdout: "three\n"},
		{name: "stdout only", file: "basic.log", opts: Options{Tail: -1, Stream: Stdout}, wantStdout: "one\nthree\n"},
		{name: "stderr only", file: "basic.log", opts: Options{Tail: -1, Stream: Stderr}, wantStderr: "two\n"},
		{name: "tail 1", file: "basic.log", opts: Options{Tail: 1}, wantStdout: "three\n"},
		{name: "tail 2", file: "basic.log", opts: Options{Tail: 2}, wantStdout: "three\n", wantStderr: "two\n"},
		{name: "tail 0", file: "basic.log", opts: Options{Tail: 0}},
		{name: "tail beyond the file", file: "basic.log", opts: Options{Tail: 99}, wantStdout: "one\nthree\n", wantStderr: "two\n"},
		{name: "tail of one stream counts that stream's lines", file: "basic.log", opts: Options{Tail: 1, Stream: Stderr}, wantStderr: "two\n"},

		{name: "partial records make one line per stream", file: "partial.log", opts: all,
			wantStdout: "abcdefghi\nshort\n", wantStderr: "err one\nerr-two\n"},
		{name: "a line's timestamp is its first record's, once", file: "partial.log", opts: Options{Tail: -1, Timestamps: true},
			wantStdout: "2024-01-02T15:04:05.100000000Z abcdefghi\n2024-01-02T15:04:06.100000000Z short\n",
			wantStderr: "2024-01-02T15:04:05.200000000Z err one\n2024-01-02T15:04:06.200000000Z err-two\n"},
		{name: "since judges a line by its start, never printing its end alone", file: "partial.log",
			opts:       Options{Tail: -1, Since: at("2024-01-02T15:04:05.25Z")},
			wantStdout: "short\n", wantStderr: "err-two\n"},
		{name: "tail 1 of interleaved partial lines", file: "partial.log", opts: Options{Tail: 1}, wantStderr: "err-two\n"},
		{name: "tail 2", file: "partial.log", opts: Options{Tail: 2}, wantStdout: "short\n", wantStderr: "err-two\n"},
		{name: "tail 3 goes back to the start of the long line, whole", file: "partial.log", opts: Options{Tail: 3},
			wantStdout: "abcdefghi\nshort\n", wantStderr: "err-two\n"},
		{name: "tail 4 is everything", file: "partial.log", opts: Options{Tail: 4},
			wantStdout: "abcdefghi\nshort\n", wantStderr: "err one\nerr-two\n"},
		{name: "tail of stdout", file: "partial.log", opts: Options{Tail: 1, Stream: Stdout}, wantStdout: "short\n"},
		{name: "tail 2 of stdout", file: "partial.log", opts: Options{Tail: 2, Stream: Stdout}, wantStdout: "abcdefghi\nshort\n"},

		{name: "malformed lines are skipped and logged", file: "malformed.log", opts: all,
			wantStdout: "first\ntags after the first are ignored\n", wantStderr: "last\n",
			wantErrors: []string{
				`unexpected timestamp format`, // not a record at all
				`unexpected stream type \"stdin\"`,
				`unexpected timestamp format`, // yesterday
				`no timestamp, stream and tag before the content`,
				`no timestamp, stream and tag before the content`, // the empty line
			}},
		{name: "malformed lines count for no tail", file: "malformed.log", opts: Options{Tail: 2},
			wantStdout: "tags after the first are ignored\n", wantStderr: "last\n",
			wantErrors: []string{`unexpected timestamp format`, `unexpected stream type`, `unexpected timestamp format`,
				`no timestamp, stream and tag before the content`, `no timestamp, stream and tag before the content`}},
		{name: "empty lines", file: "empty-lines.log", opts: Options{Tail: -1, Timestamps: true},
			wantStdout: "2024-01-02T15:04:05.000000000Z \n2024-01-02T15:04:06.000000000Z x\n"},
		{name: "a line being written is shown as it is", file: "unterminated.log", opts: all,
			wantStdout: "complete\nbeing writ"},
		{name: "and counts as the last line", file: "unterminated.log", opts: Options{Tail: 1},
			wantStdout: "being writ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, logged := captureLog(t)
			var stdout, stderr bytes.Buffer
			err := Read(ctx, filepath.Join("testdata", tt.file), tt.opts, &stdout, &stderr, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.wantStdout, stdout.String(), "stdout")
			assert.Equal(t, tt.wantStderr, stderr.String(), "stderr")
			errs := logged()
			require.Len(t, errs, len(tt.wantErrors), "errors logged: %q", errs)
			for i, want := range tt.wantErrors {
				assert.Contains(t, errs[i], want)
			}
		})
	}
}

// Both streams to one writer keep the file's order, as kubectl shows them.
func TestReadOneWriterKeepsTheOrder(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Read(context.Background(), "testdata/basic.log", Options{Tail: -1}, &out, &out, nil))
	assert.Equal(t, "one\ntwo\nthree\n", out.String())
}

// --limit-bytes cuts the output, timestamps included, where the limit
// falls, as kubelet does.
func TestReadLimitBytes(t *testing.T) {
	for _, ts := range []bool{false, true} {
		var whole bytes.Buffer
		require.NoError(t, Read(context.Background(), "testdata/partial.log", Options{Tail: -1, Timestamps: ts}, &whole, &whole, nil))
		for limit := int64(1); limit <= int64(whole.Len())+1; limit++ {
			var out bytes.Buffer
			require.NoError(t, Read(context.Background(), "testdata/partial.log", Options{Tail: -1, Timestamps: ts, LimitBytes: limit}, &out, &out, nil))
			want := whole.String()[:min(int(limit), whole.Len())]
			require.Equal(t, want, out.String(), "limit %d, timestamps %v", limit, ts)
		}
	}
	// A stream left out counts for nothing.
	var out bytes.Buffer
	require.NoError(t, Read(context.Background(), "testdata/basic.log", Options{Tail: -1, LimitBytes: 5, Stream: Stderr}, nil, &out, nil))
	assert.Equal(t, "two\n", out.String())
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	err := Read(ctx, filepath.Join(dir, "missing.log"), Options{Tail: -1}, io.Discard, io.Discard, nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	err = Read(ctx, dir, Options{Tail: -1}, io.Discard, io.Discard, nil)
	assert.ErrorContains(t, err, "is not a regular file")
	err = Read(ctx, "/dev/zero", Options{Tail: -1}, io.Discard, io.Discard, nil)
	assert.ErrorContains(t, err, "is not a regular file", "a device would never end")
	err = Read(ctx, "testdata/basic.log", Options{Tail: -2}, io.Discard, io.Discard, nil)
	assert.ErrorContains(t, err, "want -1 (all) or more")
	err = Read(ctx, "testdata/basic.log", Options{Tail: -1, LimitBytes: -1}, io.Discard, io.Discard, nil)
	assert.ErrorContains(t, err, "want 0 (none) or more")
}

// A link is read where it points (kubelet's /var/log/containers).
func TestReadThroughALink(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs("testdata/basic.log")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, "link.log")))
	var out bytes.Buffer
	require.NoError(t, Read(context.Background(), filepath.Join(dir, "link.log"), Options{Tail: 1}, &out, &out, nil))
	assert.Equal(t, "three\n", out.String())
}

// A record is never held whole: a runtime without a line limit can write
// one of any size, and it goes through in pieces. So does a line that is
// no record.
func TestReadBoundedMemory(t *testing.T) {
	const size = 32 << 20
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	_, err = f.WriteString("2024-01-02T15:04:05Z stdout F ")
	require.NoError(t, err)
	for range size / len(chunk) {
		_, err = f.Write(chunk)
		require.NoError(t, err)
	}
	_, err = f.WriteString("\n") // then a "line" without a space as long again
	require.NoError(t, err)
	for range size / len(chunk) {
		_, err = f.Write(chunk)
		require.NoError(t, err)
	}
	_, err = f.WriteString("\n2024-01-02T15:04:06Z stderr F after\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, tail := range []int64{-1, 2} {
		ctx, logged := captureLog(t)
		var stdout countingWriter
		var stderr bytes.Buffer
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		require.NoError(t, Read(ctx, path, Options{Tail: tail}, &stdout, &stderr, nil))
		runtime.ReadMemStats(&after)
		assert.Equal(t, int64(size+1), stdout.n, "the long line, whole")
		assert.Equal(t, "after\n", stderr.String())
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "tail %d: allocated", tail)
		require.Len(t, logged(), 1, "the line that is no record")
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// --tail agrees with a plain reading of the whole file, over random files
// whose long lines interleave with the other stream's and span tail's
// blocks.
func TestTailAgreesWithAWholeRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for round := range 40 {
		var file bytes.Buffer
		type line struct {
			stream  Stream
			content string
			end     int // the record that ends it
		}
		var lines []line            // in the order they end
		var open [2]strings.Builder // each stream's line in progress
		var last [2]int             // each stream's last record
		var pending [2]bool         // the stream's last record was partial
		ts := time.Date(2024, 1, 2, 15, 4, 5, 0, time.UTC)
		records := 1 + rng.IntN(300)
		for i := range records {
			s := Stream(1 + rng.IntN(2))
			partial := rng.IntN(3) == 0
			size := rng.IntN(40)
			if rng.IntN(30) == 0 {
				size = blockSize + rng.IntN(blockSize) // spans blocks
			}
			content := strings.Repeat(string(rune('a'+i%26)), size)
			tag := "F"
			if partial {
				tag = "P"
			}
			ts = ts.Add(time.Millisecond)
			fmt.Fprintf(&file, "%s %s %s %s\n", ts.Format(time.RFC3339Nano), s, tag, content)
			open[s.index()].WriteString(content)
			last[s.index()], pending[s.index()] = i, partial
			if !partial {
				lines = append(lines, line{s, open[s.index()].String() + "\n", i})
				open[s.index()].Reset()
			}
			if rng.IntN(50) == 0 {
				file.WriteString("garbage\n")
			}
		}
		// Lines being written count, ending at their last record.
		for _, s := range []Stream{Stdout, Stderr} {
			if pending[s.index()] {
				lines = append(lines, line{s, open[s.index()].String(), last[s.index()]})
			}
		}
		slices.SortFunc(lines, func(a, b line) int { return a.end - b.end })
		path := filepath.Join(dir, fmt.Sprintf("%d.log", round))
		require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))

		for _, stream := range []Stream{AllStreams, Stdout, Stderr} {
			var chosen []line
			for _, l := range lines {
				if stream.includes(l.stream) {
					chosen = append(chosen, l)
				}
			}
			for _, n := range []int{0, 1, 2, 3, 5, 10, 50, len(chosen) - 1, len(chosen), len(chosen) + 1} {
				if n < 0 {
					continue
				}
				var want [2]strings.Builder
				for _, l := range chosen[max(0, len(chosen)-n):] {
					want[l.stream.index()].WriteString(l.content)
				}
				var stdout, stderr bytes.Buffer
				ctx := klog.NewContext(context.Background(), logr.Discard())
				require.NoError(t, Read(ctx, path, Options{Tail: int64(n), Stream: stream}, &stdout, &stderr, nil))
				require.Equal(t, want[0].String(), stdout.String(), "round %d, %v, tail %d: stdout", round, stream, n)
				require.Equal(t, want[1].String(), stderr.String(), "round %d, %v, tail %d: stderr", round, stream, n)
			}
		}
	}
}

// captureLog returns a context whose logger keeps the errors logged, and a
// function that returns them.
func captureLog(t *testing.T) (context.Context, func() []string) {
	var mu sync.Mutex
	var errs []string
	logger := funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"`) || strings.Contains(args, `"count"`) {
			mu.Lock()
			errs = append(errs, args)
			mu.Unlock()
		}
	}, funcr.Options{})
	return klog.NewContext(t.Context(), logger), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// A tail looks back a bounded distance for the start of the other
// stream's open line: a file of one stream's lines is not read whole for
// the other's last line.
func TestTailLooksBackABoundedDistance(t *testing.T) {
	var file bytes.Buffer
	file.WriteString(line("00", "stderr", "P", "begun long ago, "))
	for file.Len() < maxLookBack+blockSize {
		file.WriteString(line("01", "stdout", "F", strings.Repeat("x", 100)))
	}
	file.WriteString(line("02", "stderr", "F", "ended now"))
	path := filepath.Join(t.TempDir(), "0.log")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))

	var stdout, stderr bytes.Buffer
	require.NoError(t, Read(t.Context(), path, Options{Tail: 1}, &stdout, &stderr, nil))
	assert.Empty(t, stdout.String())
	assert.Equal(t, "ended now\n", stderr.String(), "shown from as far as the tail looked")

	stdout.Reset()
	stderr.Reset()
	require.NoError(t, Read(t.Context(), path, Options{Tail: 1, Stream: Stderr}, &stdout, &stderr, nil))
	assert.Equal(t, "begun long ago, ended now\n", stderr.String(), "one stream's tail is its own")
}

// BenchmarkRead reads a log of typical lines (kubelet rotates at 10 MiB).
func BenchmarkRead(b *testing.B) {
	var file bytes.Buffer
	for i := 0; file.Len() < 10<<20; i++ {
		fmt.Fprintf(&file, "2024-01-02T15:04:05.%09dZ stdout F level=info msg=\"request served\" path=/api/v1/items/%d status=200\n", i, i)
	}
	path := filepath.Join(b.TempDir(), "0.log")
	require.NoError(b, os.WriteFile(path, file.Bytes(), 0o644))
	b.SetBytes(int64(file.Len()))
	for b.Loop() {
		require.NoError(b, Read(b.Context(), path, Options{Tail: -1, Timestamps: true}, io.Discard, io.Discard, nil))
	}
}
