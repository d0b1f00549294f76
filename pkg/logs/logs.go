// Package logs is the node's container log files, as kubelet keeps and
// reads them: the agent's log manager (manager.go, rotate.go: kubelet's
// ContainerLogManager, rotating the log files of the containers the agent
// manages through CRI ReopenContainerLog), the links of
// /var/log/containers and an instance's files removed with it (link.go:
// kubelet's legacyLogSymlink and removeContainerLog), and the reader of
// cri-prober logs. It is a leaf beside the engine, which it never touches,
// importing at most pkg/cri; pkg/agent feeds the manager the containers to
// keep. A container's log directory is the workload's to write into, so
// nothing here follows a link in it (dir.go).
//
// The reader reads a container's log file in the CRI format, as kubelet
// reads it for kubectl logs: --tail, --since, --limit-bytes, --timestamps
// and following the file until the container exits.
//
// It differs from kubelet's reader where kubelet's costs memory or loses
// lines: a record is never held whole (kubelet reads each one into memory,
// and a runtime configured without a line limit can write a record of a
// gigabyte), so memory stays bounded whatever the file holds; --tail and
// --since count and judge a line split into partial records once, whole,
// where kubelet counts each record and can print a line's end without its
// start; the two streams' partial lines are joined apart, so an
// interleaved stderr record cannot take a stdout line's timestamp; a file
// rotated while it is followed is read to its end before the new one,
// where kubelet drops what it had not read yet. Kubelet reads the current
// file only; with Options.Rotated, a --tail or --since that asks for more
// than it holds reads the rotated files too (0.log.20240102-150405, .gz
// decompressed into an unlinked temporary file), oldest first (rotated.go).
package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Stream selects what a read shows of a container's two streams.
type Stream uint8

const (
	// AllStreams shows stdout and stderr, each to its writer.
	AllStreams Stream = iota
	// Stdout shows stdout only.
	Stdout
	// Stderr shows stderr only.
	Stderr
)

func (s Stream) String() string {
	switch s {
	case AllStreams:
		return "all"
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", uint8(s))
}

// includes reports whether a record of stream r (Stdout or Stderr) is
// shown.
func (s Stream) includes(r Stream) bool { return s == AllStreams || s == r }

// index is a record stream's index in per-stream arrays.
func (s Stream) index() int { return int(s) - 1 }

// Options say what of the log to show, as kubelet's PodLogOptions.
type Options struct {
	// Tail shows only the last Tail lines (of the chosen streams); -1
	// shows all. A line the runtime split into partial records counts
	// once.
	Tail int64
	// Since skips lines written before it (the zero time skips none).
	Since time.Time
	// LimitBytes stops the read once this many bytes were written,
	// timestamps included, cutting a line if need be; 0 sets no limit.
	LimitBytes int64
	// Timestamps starts each line with its time (TimeFormat) and a space.
	Timestamps bool
	// Follow keeps reading what the container writes until it no longer
	// runs (and the file is read to its end) or ctx is done.
	Follow bool
	// Stream chooses stdout, stderr or both.
	Stream Stream
	// Rotated reads, with Tail or Since, the container's rotated files
	// (<path>.<timestamp>, .gz or not) before the current one, as far
	// back as they ask for lines the current file no longer holds
	// (kubelet reads the current file only).
	Rotated bool
}

// Running reports whether the container that writes the log still runs:
// while it does, a follow waits for more. An error ends the follow (the
// caller decides which of its errors mean "assume it runs", as kubelet
// assumes it while the runtime is unavailable).
type Running func(ctx context.Context) (bool, error)

const (
	// bufferSize is how much of a record is held at once: a longer one is
	// written out in pieces.
	bufferSize = 32 << 10
	// checkPeriod is how often a follow asks whether the container still
	// runs (kubelet's logForceCheckPeriod), and the longest it waits
	// without looking at the file.
	checkPeriod = time.Second
	// pollPeriod is how often a follow looks at the file when inotify
	// cannot tell it of writes.
	pollPeriod = 250 * time.Millisecond
	// maxReported bounds the malformed lines logged one by one; the rest
	// are counted.
	maxReported = 5
)

// Reader reads CRI log files. Its zero value is ready to use.
type Reader struct {
	// Clock paces following (nil: the real clock).
	Clock clock.Clock

	// Tests set these.
	poll    bool   // look at the file every pollPeriod, as without inotify
	waiting func() // called before each wait of a follow
}

// Read writes the log at path to stdout and stderr (each record to its
// stream's writer; one may be nil if opts.Stream leaves its stream out)
// as opts say. With opts.Follow it keeps reading until running says the
// container no longer runs and the file is read to its end (nil running:
// at once), or until ctx is done (then it returns ctx's error). Reaching
// opts.LimitBytes is no error.
func Read(ctx context.Context, path string, opts Options, stdout, stderr io.Writer, running Running) error {
	return Reader{}.Read(ctx, path, opts, stdout, stderr, running)
}

// Read is the package's Read with r's clock.
func (r Reader) Read(ctx context.Context, path string, opts Options, stdout, stderr io.Writer, running Running) error {
	if opts.Stream > Stderr {
		return fmt.Errorf("unknown stream %v", opts.Stream)
	}
	if opts.Tail < -1 {
		return fmt.Errorf("tail %d: want -1 (all) or more", opts.Tail)
	}
	if opts.LimitBytes < 0 {
		return fmt.Errorf("limit of %d bytes: want 0 (none) or more", opts.LimitBytes)
	}
	// A follow watches the directory the file is really in (kubelet's
	// /var/log/containers holds links to /var/log/pods).
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	f, err := openLog(resolved)
	if err != nil {
		return err
	}
	out := &output{w: [2]io.Writer{stdout, stderr}, remain: -1}
	if opts.LimitBytes > 0 {
		out.remain = opts.LimitBytes
	}
	s := &session{
		path:   resolved,
		opts:   opts,
		f:      f,
		br:     bufio.NewReaderSize(f, bufferSize),
		stopAt: -1,
		cut:    [2]int64{-1, -1},
		out:    out,
		logger: klog.FromContext(ctx).WithValues("path", resolved),
	}
	defer func() { s.f.Close() }() // the file a follow ends on
	defer s.reportMalformed()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if opts.Rotated && (opts.Tail >= 0 || !opts.Since.IsZero()) {
		err := r.readRotated(ctx, resolved, f, info.Size(), opts, out)
		switch {
		case errors.Is(err, errLimit):
			return nil
		case err != nil:
			return err
		}
	}
	if !opts.Follow {
		// The file as it is now: a writer faster than the reader cannot
		// make a read without --follow endless.
		s.stopAt = info.Size()
	}
	if opts.Tail >= 0 {
		start, cut, err := findTail(f, info.Size(), opts.Tail, opts.Stream)
		if err != nil {
			return fmt.Errorf("find the last %d lines of %s: %w", opts.Tail, resolved, err)
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return err
		}
		s.off, s.cut = start, cut
	}

	err = s.drain(ctx)
	if err == nil && opts.Follow {
		err = s.follow(ctx, r, running)
	}
	switch {
	case errors.Is(err, errLimit), errors.Is(err, errStop):
		return nil
	case err == nil:
		s.finish() // the file ended inside a head
	}
	return err
}

// openLog opens a log file for reading, refusing what is no regular file:
// a log path is whatever the container's creator wrote in its config, and
// a FIFO would block the open, a device never end.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, info.Mode().Type())
	}
	return f, nil
}

var (
	// errLimit ends a read at opts.LimitBytes.
	errLimit = errors.New("byte limit reached")
	// errStop ends a read without --follow where the file ended when it
	// was opened.
	errStop = errors.New("end of the file as opened")
)

// session is one read of one file, record by record. Its state survives
// the end of the file, so a follow carries on where the runtime's next
// write does, even inside a record.
type session struct {
	path   string
	opts   Options
	f      *os.File
	br     *bufio.Reader
	off    int64    // file offset of the next byte br returns
	stopAt int64    // without --follow, no record starting here or later is read; -1: no end
	cut    [2]int64 // per stream, records at or before this offset are not shown (--tail); -1: none
	out    *output  // shared by the files of one read
	logger klog.Logger

	head     []byte // the head read so far of the record that starts at headOff
	headOff  int64
	spaces   int  // in head: three end it
	inBody   bool // reading a record's content
	skipping bool // dropping the rest of a line that is no record
	rec      record
	emit     bool // the record's content is shown

	streams   [2]lineState
	malformed int
}

// lineState is a stream's line in progress: partial records continue it.
type lineState struct {
	midLine bool // the last record was partial: the next one continues its line
	hidden  bool // the line is not shown (before --since, or cut by --tail)
}

// drain reads to the end of the file. It returns nil there, errLimit or
// errStop when the read is over, or an error.
func (s *session) drain(ctx context.Context) error {
	for i := 0; ; i++ {
		if i%64 == 0 { // a long read ends soon after ctx, at little cost a record
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if s.inBody || s.skipping {
			chunk, err := s.br.ReadSlice('\n')
			s.off += int64(len(chunk))
			end := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
			if s.inBody && s.emit {
				content := chunk
				if end && s.rec.partial {
					content = chunk[:len(chunk)-1] // a partial record's newline is the runtime's, not the line's
				}
				if werr := s.out.write(s.rec.stream, content); werr != nil {
					return werr
				}
			}
			if end {
				s.inBody, s.skipping = false, false
				continue
			}
			switch {
			case err == bufio.ErrBufferFull: // a long record: on with the next piece
			case err == io.EOF:
				return nil
			case err != nil:
				return fmt.Errorf("read %s: %w", s.path, err)
			}
			continue
		}

		if len(s.head) == 0 {
			if s.stopAt >= 0 && s.off >= s.stopAt {
				return errStop
			}
			s.headOff = s.off
			if ok, err := s.wholeHead(); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
		}
		b, err := s.br.ReadByte()
		if err == io.EOF {
			return nil // a head written in part stays in s.head
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		s.off++
		if b == '\n' {
			s.reject(s.head, errNoHead)
			s.resetHead()
			continue
		}
		s.head = append(s.head, b)
		if b == ' ' {
			s.spaces++
		}
		switch {
		case s.spaces == 3:
			rec, err := parseHead(s.head)
			if err != nil {
				s.reject(s.head, err)
				s.skipping = true
			} else if err := s.begin(rec); err != nil {
				return err
			}
			s.resetHead()
		case len(s.head) >= maxHead:
			s.reject(s.head, fmt.Errorf("%w in its first %d bytes", errNoHead, maxHead))
			s.resetHead()
			s.skipping = true
		}
	}
}

// wholeHead parses a record's head found whole in br's buffer, as most
// are, without copying it byte by byte; it reports whether it did. Heads
// cut by the buffer's end, and lines that are no record, take the slow
// way.
func (s *session) wholeHead() (bool, error) {
	buf, _ := s.br.Peek(min(maxHead, s.br.Buffered()))
	n := headEnd(buf)
	if n < 0 {
		return false, nil
	}
	rec, err := parseHead(buf[:n])
	if err != nil {
		return false, nil
	}
	s.br.Discard(n)
	s.off += int64(n)
	return true, s.begin(rec)
}

func (s *session) resetHead() { s.head, s.spaces = s.head[:0], 0 }

// begin starts the content of a record: whether it is shown is decided
// for its whole line, at the line's first record.
func (s *session) begin(rec record) error {
	s.rec, s.inBody, s.emit = rec, true, false
	if !s.opts.Stream.includes(rec.stream) {
		return nil
	}
	line := &s.streams[rec.stream.index()]
	startsLine := !line.midLine
	line.midLine = rec.partial
	if startsLine {
		line.hidden = s.headOff <= s.cut[rec.stream.index()] || rec.time.Before(s.opts.Since)
		if !line.hidden && s.opts.Timestamps {
			var ts [64]byte
			if err := s.out.write(rec.stream, append(rec.time.AppendFormat(ts[:0], TimeFormat), ' ')); err != nil {
				return err
			}
		}
	}
	s.emit = !line.hidden
	return nil
}

// reject logs a line that is not a record (kubelet skips it with an error
// log too): a file the runtime did not write, or one truncated under the
// reader. line holds its first bytes at most.
func (s *session) reject(line []byte, err error) {
	s.malformed++
	if s.malformed <= maxReported {
		s.logger.Error(err, "Skipping a line of the log file that is not in the CRI log format", "offset", s.headOff, "line", string(line))
	}
}

// finish reports a head the file ended in, once the read is over.
func (s *session) finish() {
	if len(s.head) > 0 {
		s.reject(s.head, fmt.Errorf("%w: the file ends inside it", errNoHead))
		s.resetHead()
	}
}

func (s *session) reportMalformed() {
	if s.malformed > maxReported {
		s.logger.Error(nil, "Skipped lines of the log file that are not in the CRI log format", "count", s.malformed, "logged", maxReported)
	}
}

// output writes records' contents to their streams' writers, counting
// them against the byte limit.
type output struct {
	w      [2]io.Writer
	remain int64 // bytes left to write; -1: no limit
}

func (o *output) write(stream Stream, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	w := o.w[stream.index()]
	if w == nil {
		return nil // a stream nobody asked for: counts for nothing, as in kubelet
	}
	if o.remain >= 0 && int64(len(p)) > o.remain {
		p = p[:o.remain]
	}
	n, err := w.Write(p)
	if o.remain >= 0 {
		o.remain -= int64(n)
	}
	switch {
	case err != nil:
		return err
	case n < len(p):
		return io.ErrShortWrite
	case o.remain == 0:
		return errLimit
	}
	return nil
}
