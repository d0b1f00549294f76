package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// The CRI log format, one record a line, as containerd and CRI-O write it
// and kubelet reads it (k8s.io/cri-client/pkg/logs):
//
//	2016-10-06T00:17:09.669794202Z stdout P log content 1
//	2016-10-06T00:17:09.669794203Z stderr F log content 2
//
// P marks a partial record: the runtime split a long line (containerd:
// longer than max_container_log_line_size, 16 KiB by default) into several
// records, and the record's own newline is not part of the line. F ends a
// line, and its content carries the line's newline. Tags after a ':' are
// reserved and ignored, as kubelet ignores them.

const (
	// timeFormatIn parses the runtime's timestamps, which may drop
	// trailing zeros (containerd writes time.RFC3339Nano).
	timeFormatIn = "2006-01-02T15:04:05.999999999Z07:00"
	// TimeFormat is how --timestamps prints them, as kubelet does: fixed
	// width, so that columns line up.
	TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

	// maxHead bounds what precedes a record's content (timestamp, stream,
	// tags: containerd's take at most 46 bytes). A longer one is not a
	// record, and is never held whole.
	maxHead = 256
)

// record is what the head of a record says.
type record struct {
	time    time.Time
	stream  Stream // Stdout or Stderr
	partial bool
}

// headEnd returns the length of the head at the start of b (up to and
// including the space after the tags), or -1 when b holds no whole head
// before its first newline.
func headEnd(b []byte) int {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	n := 0
	for spaces := 0; spaces < 3; spaces++ {
		i := bytes.IndexByte(b[n:], ' ')
		if i < 0 {
			return -1
		}
		n += i + 1
	}
	return n
}

var errNoHead = errors.New("no timestamp, stream and tag before the content")

// parseHead parses a record's head: `<timestamp> <stdout|stderr> <tags> `,
// with kubelet's checks (parseCRILog).
func parseHead(head []byte) (record, error) {
	ts, rest, ok := bytes.Cut(head, []byte{' '})
	if !ok {
		return record{}, errNoHead
	}
	t, err := time.Parse(timeFormatIn, string(ts))
	if err != nil {
		return record{}, fmt.Errorf("unexpected timestamp format %q: %w", timeFormatIn, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return record{}, errNoHead
	}
	var s Stream
	switch string(stream) {
	case "stdout":
		s = Stdout
	case "stderr":
		s = Stderr
	default:
		return record{}, fmt.Errorf("unexpected stream type %q", stream)
	}
	tags, _, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return record{}, errNoHead
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	return record{time: t, stream: s, partial: string(first) == "P"}, nil
}

// parsePrefix parses the head at the start of b, the first bytes of a
// record.
func parsePrefix(b []byte) (record, bool) {
	n := headEnd(b)
	if n < 0 {
		return record{}, false
	}
	r, err := parseHead(b[:n])
	return r, err == nil
}
