package logs

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// maxSegments bounds the rotated files one read goes through.
const maxSegments = 64

// maxRotatedBytes bounds what one read takes of the rotated files, all of
// them, decompressed (spooled to a temporary file) or not: older lines
// than those are not read (a variable for tests).
var maxRotatedBytes int64 = 1 << 30

// errBudget is a rotated file past what is left of a read's budget.
var errBudget = errors.New("past the bytes one read takes of the rotated files")

// readRotated writes, before the current file (cur, of size bytes), the
// lines of the log's rotated files that opts asks for and the current file
// no longer holds: with Tail, those missing from the current file, newest
// files first; with Since, the files rotated after it. Their lines go to
// out, which the current file's read goes on with.
func (r Reader) readRotated(ctx context.Context, path string, cur *os.File, size int64, opts Options, out *output) error {
	need := int64(-1) // lines still wanted; -1: all (Since alone)
	if opts.Tail >= 0 {
		n, err := countLines(cur, size, opts.Tail, opts.Stream)
		if err != nil {
			return fmt.Errorf("count the lines of %s: %w", path, err)
		}
		if n >= opts.Tail {
			return nil
		}
		need = opts.Tail - n
	}
	dir, base := filepath.Split(path)
	d, err := openDir(dir, logDirOwn)
	if err != nil {
		return err
	}
	defer d.Close()
	files, _, _, err := d.list(rotatedOf(base))
	if err != nil {
		return err
	}
	inuse := InUse(names(files))
	type segment struct {
		f    *os.File
		size int64
		tail int64
	}
	var segs []segment
	defer func() {
		for _, s := range segs {
			if s.f != nil {
				s.f.Close()
			}
		}
	}()
	budget := maxRotatedBytes
	for i := len(inuse) - 1; i >= 0 && need != 0 && len(segs) < maxSegments; i-- {
		name := inuse[i]
		if at, ok := rotatedAt(base, name); ok && !opts.Since.IsZero() && at.Before(opts.Since) {
			break // every line of it, and of the older files, is older
		}
		f, size, err := openSegment(d, name, budget)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Skipping a rotated log file", "path", d.name(name))
			break // the lines before it would not be the ones asked for
		}
		budget -= size
		seg := segment{f: f, size: size, tail: -1}
		if need > 0 {
			n, err := countLines(f, size, need, opts.Stream)
			if err != nil {
				f.Close()
				return fmt.Errorf("count the lines of %s: %w", d.name(name), err)
			}
			if n >= need {
				seg.tail, need = need, 0
			} else {
				need -= n
			}
		}
		segs = append(segs, seg)
	}
	for i := len(segs) - 1; i >= 0; i-- {
		seg := segs[i]
		o := opts
		o.Tail, o.Follow = seg.tail, false
		s := &session{
			path: seg.f.Name(), opts: o, f: seg.f, br: bufio.NewReaderSize(seg.f, bufferSize),
			stopAt: seg.size, cut: [2]int64{-1, -1}, out: out,
			logger: klog.FromContext(ctx).WithValues("path", seg.f.Name()),
		}
		if o.Tail >= 0 {
			start, cut, err := findTail(seg.f, seg.size, o.Tail, o.Stream)
			if err != nil {
				return fmt.Errorf("find the last %d lines of %s: %w", o.Tail, seg.f.Name(), err)
			}
			if _, err := seg.f.Seek(start, io.SeekStart); err != nil {
				return err
			}
			s.off, s.cut = start, cut
		}
		err := s.drain(ctx)
		s.reportMalformed()
		seg.f.Close() // read out: its spool goes now, not with the last
		segs[i].f = nil
		switch {
		case err == nil, err == errStop:
			s.finish()
		default:
			return err
		}
	}
	return nil
}

// rotatedAt is when a rotated file was rotated, from its name (the
// agent's local time, as kubelet names them).
func rotatedAt(base, name string) (time.Time, bool) {
	stamp := strings.TrimSuffix(strings.TrimPrefix(name, base+"."), CompressSuffix)
	t, err := time.ParseInLocation(TimestampFormat, stamp, time.Local)
	return t, err == nil
}

// openSegment opens a rotated file for reading, of at most budget bytes:
// a compressed one decompressed into an unlinked temporary file, so that
// a tail reads it as the others.
func openSegment(d *logDir, name string, budget int64) (*os.File, int64, error) {
	f, err := d.openRegular(name)
	if err != nil {
		return nil, 0, err
	}
	if !strings.HasSuffix(name, CompressSuffix) {
		info, err := f.Stat()
		if err == nil && info.Size() > budget {
			err = fmt.Errorf("%s, of %d bytes: %w (%d bytes left)", f.Name(), info.Size(), errBudget, budget)
		}
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, info.Size(), nil
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("decompress %s: %w", f.Name(), err)
	}
	tmp, err := os.CreateTemp("", "cri-prober-log-*")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(tmp.Name()) // gone once closed
	n, err := io.Copy(tmp, io.LimitReader(zr, budget+1))
	switch {
	case err != nil:
		tmp.Close()
		return nil, 0, fmt.Errorf("decompress %s: %w", f.Name(), err)
	case n > budget:
		tmp.Close()
		return nil, 0, fmt.Errorf("decompress %s: %w (%d bytes left)", f.Name(), errBudget, budget)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		tmp.Close()
		return nil, 0, err
	}
	return tmp, n, nil
}

// countLines counts the lines of the wanted streams in r's first size
// bytes, from the end, up to max (findTail's count of lines).
func countLines(r io.ReaderAt, size, max int64, want Stream) (int64, error) {
	if max <= 0 {
		return 0, nil
	}
	var seen [2]bool
	var lines int64
	err := eachRecordBackward(r, size, func(_ int64, prefix []byte) bool {
		rec, ok := parsePrefix(prefix)
		if !ok || !want.includes(rec.stream) {
			return true
		}
		i := rec.stream.index()
		if !seen[i] || !rec.partial {
			lines++
		}
		seen[i] = true
		return lines < max
	})
	return lines, err
}
