package logs

import (
	"bytes"
	"io"
)

// blockSize is how much of the file a tail reads at once, from its end.
const blockSize = 32 << 10

// maxLookBack bounds how far before the newest line not shown a tail
// looks for the start of the other stream's line still open there. The
// runtime writes a long line's partial records in a burst, so they are
// close together; were one to begin further back, the tail would show it
// from there.
const maxLookBack = 4 << 20

// findTail finds the last n lines of the wanted streams in f's first size
// bytes, reading backward from the end as kubelet does, in bounded memory.
// It returns where to start reading, and per stream the offset of the
// newest record not to show (-1: show them all).
//
// A line is a stream's records up to one tagged F, or the records at the
// end of the file that no F ends yet (a line being written counts, as
// tail(1) counts an unterminated last line). Since a long line of one
// stream can be interleaved with the other stream's lines, the start is
// not simply after the (n+1)-th line end from the end: a stream whose
// line is still open there is followed back to the F before it.
func findTail(f io.ReaderAt, size, n int64, want Stream) (start int64, cut [2]int64, err error) {
	cut = [2]int64{-1, -1}
	if n < 0 {
		return 0, cut, nil
	}
	var (
		seen      [2]bool  // a record of the stream was seen
		earliest  [2]int64 // the earliest record of the stream seen
		open      [2]bool  // the stream's oldest shown line may begin before the cut: the F before it is wanted
		cutEnd    [2]int64 // where the record at cut ends
		lines     int64
		found     bool   // the newest line end not shown was found
		foundAt   int64  // where
		nextStart = size // where the record after the current one starts
	)
	err = eachRecordBackward(f, size, func(off int64, prefix []byte) bool {
		end := nextStart
		nextStart = off
		rec, ok := parsePrefix(prefix)
		if !ok || !want.includes(rec.stream) {
			return !found || foundAt-off <= maxLookBack // malformed lines are skipped when read; they count for nothing
		}
		i := rec.stream.index()
		if !found {
			endsLine := !seen[i] || !rec.partial
			seen[i], earliest[i] = true, off
			if !endsLine {
				return true
			}
			if lines < n {
				lines++
				return true
			}
			found, foundAt = true, off
			for j := range cut {
				if j != i && seen[j] {
					open[j] = true
					continue
				}
				cut[j], cutEnd[j] = off, end
			}
			return open[0] || open[1]
		}
		if open[i] {
			if !rec.partial {
				cut[i], cutEnd[i], open[i] = off, end, false
			} else {
				earliest[i] = off
			}
		}
		return (open[0] || open[1]) && foundAt-off <= maxLookBack
	})
	if err != nil {
		return 0, cut, err
	}
	if !found {
		return 0, [2]int64{-1, -1}, nil
	}
	start = size
	for j := range cut {
		if open[j] {
			// No F before it (at the file's start, or as far as a tail
			// looks): its line starts at its earliest record seen.
			cut[j], cutEnd[j] = earliest[j]-1, earliest[j]
		}
		start = min(start, cutEnd[j])
	}
	return start, cut, nil
}

// eachRecordBackward calls yield with each record of r's first size bytes,
// the last first: its offset and its first bytes (at most maxHead, up to
// its newline), until yield returns false.
func eachRecordBackward(r io.ReaderAt, size int64, yield func(off int64, prefix []byte) bool) error {
	if size == 0 {
		return nil
	}
	block := make([]byte, blockSize)
	head := make([]byte, maxHead)
	prefixAt := func(off int64, buf []byte, bufOff int64) ([]byte, error) {
		want := min(int64(maxHead), size-off)
		if off+want <= bufOff+int64(len(buf)) {
			return buf[off-bufOff : off-bufOff+want], nil
		}
		n, err := r.ReadAt(head[:want], off)
		if int64(n) < want {
			return nil, err
		}
		return head[:n], nil
	}
	// The file's last byte ends the last record (its newline, or the
	// record is being written): a newline before it starts a record.
	hi := size - 1
	for hi > 0 {
		lo := max(hi-blockSize, 0)
		buf := block[:hi-lo]
		if n, err := r.ReadAt(buf, lo); n < len(buf) {
			return err
		}
		for i := len(buf); ; {
			i = bytes.LastIndexByte(buf[:i], '\n')
			if i < 0 {
				break
			}
			off := lo + int64(i) + 1
			prefix, err := prefixAt(off, buf, lo)
			if err != nil {
				return err
			}
			if !yield(off, prefix) {
				return nil
			}
		}
		hi = lo
	}
	prefix, err := prefixAt(0, nil, 0)
	if err != nil {
		return err
	}
	yield(0, prefix)
	return nil
}
