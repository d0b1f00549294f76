package restart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Entry is one restart (or stop) the restarter did, and why: the question
// users ask most (kubernetes#6532, #115823).
type Entry struct {
	Time time.Time `json:"time"` // when the replacement started (or the container was stopped)
	// Node is the node the restart was on (run --node-name); set by the
	// ledger that records it.
	Node      string `json:"node,omitempty"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUid"`
	Container string `json:"container"`
	// ContainerID is the instance that failed or exited.
	ContainerID string `json:"containerId"`
	// Cause is liveness or startup (a probe reached its failure
	// threshold), postStart (the hook failed) or exit (the container exited
	// by itself).
	Cause string `json:"cause"`
	// Failures are the probe results that reached the threshold, oldest
	// first (for a probe cause).
	Failures   []Failure `json:"failures,omitempty"`
	ExitCode   int32     `json:"exitCode"`
	ExitReason string    `json:"exitReason,omitempty"`
	// GracePeriodSeconds is the grace period of the kill (a probe cause).
	GracePeriodSeconds int64 `json:"gracePeriodSeconds,omitempty"`
	// BackOffSeconds is how long the replacement waited after the exit
	// (kubelet's back-off; 0: at once).
	BackOffSeconds float64 `json:"backOffSeconds"`
	// Action is restarted (a replacement started) or stopped (the restart
	// policy or --restart=stop keeps it down).
	Action        string `json:"action"`
	ReplacementID string `json:"replacementId,omitempty"`
	Attempt       uint32 `json:"attempt,omitempty"` // the replacement's
}

// Failure is one probe result that led to a restart.
type Failure struct {
	Time        time.Time `json:"time"`
	Output      string    `json:"output"`
	Consecutive int       `json:"consecutive"`
	Threshold   int       `json:"threshold"`
}

// Actions.
const (
	ActionRestarted = "restarted"
	ActionStopped   = "stopped"
)

// ledgerSize bounds the ledger: the newest entries are kept.
const ledgerSize = 1000

// ledgerFile is the ledger's file in the state directory, JSON lines: a
// header ({"version":1}), then one entry per line, oldest first. Each
// restart appends its line (O_APPEND, fsynced): its cost does not grow
// with the ledger. The file is rewritten whole (a new file renamed over
// it, through pkg/statefile) only to compact it, when it holds twice
// ledgerSize entries or ledgerMaxBytes; to replace a file in the format
// before the version (a JSON list); and after a torn or damaged line or a
// failed append (an append must not follow part of a line).
const ledgerFile = "restarts.json"

// ledgerVersion is the file's format. A newer version is not read, and is
// set aside (restarts.json.vN) rather than overwritten, for the newer agent
// it belongs to; this one starts a new ledger.
const ledgerVersion = 1

// ledgerMaxBytes bounds the file between compactions (a compaction keeps at
// most half of it); a file over twice it is not read.
const ledgerMaxBytes = 32 << 20

// Ledger keeps the newest restarts, and in a file when it has a directory,
// so that they survive the agent's restart. Safe for concurrent use.
type Ledger struct {
	mu       sync.Mutex
	dir      string // "": memory only
	node     string // set on the entries added
	size     int    // entries kept: ledgerSize
	maxBytes int64  // ledgerMaxBytes
	entries  []Entry
	// The file: its entry lines and bytes, and whether it must be
	// rewritten before anything is appended (missing, an older format, a
	// torn or damaged line, a failed append).
	fileEntries int
	fileBytes   int64
	rewrite     bool
}

// OpenLedger returns a ledger kept in dir ("" for memory only), with the
// entries a previous agent left there. The directory is created 0700, and
// refused (nil ledger, the error says what to do) when it is a link or not
// the agent's own (see statefile.OpenDir). A file that cannot be read as a
// ledger is set aside (renamed *.bad; one of a newer format *.vN) and
// reported in the error, and the ledger starts empty; a torn last line (an
// append cut short by a crash) or a damaged one is skipped and reported,
// the other entries kept. Such a file must not stop the agent.
func OpenLedger(dir string, opts ...LedgerOption) (*Ledger, error) {
	l, err := openLedger(dir, ledgerSize, ledgerMaxBytes)
	if l != nil {
		for _, o := range opts {
			o(l)
		}
	}
	return l, err
}

// LedgerOption is an option of OpenLedger.
type LedgerOption func(*Ledger)

// WithNode sets the node's name on every entry added (Entry.Node); the
// entries a previous agent left keep theirs.
func WithNode(name string) LedgerOption { return func(l *Ledger) { l.node = name } }

func openLedger(dir string, size int, maxBytes int64) (*Ledger, error) {
	l := &Ledger{size: size, maxBytes: maxBytes}
	if dir == "" {
		return l, nil
	}
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	l.dir, l.rewrite = d.Path(), true // until a file is read that can be appended to
	path := filepath.Join(d.Path(), ledgerFile)
	raw, err := d.ReadFile(ledgerFile, 2*maxBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, nil
	case errors.Is(err, statefile.ErrUnsafe):
		return l, l.setAside(d, ".bad", fmt.Sprintf("restart ledger refused (%v)", err))
	case err != nil:
		return nil, fmt.Errorf("restart ledger: %w", err)
	}
	f, err := parseLedger(raw)
	switch {
	case err != nil:
		return l, l.setAside(d, ".bad", fmt.Sprintf("restart ledger %s is not valid (%v)", path, err))
	case f.version > ledgerVersion:
		return l, l.setAside(d, ".v"+strconv.Itoa(f.version), fmt.Sprintf(
			"restart ledger %s has format version %d, newer than this agent's %d (a newer cri-prober wrote it)", path, f.version, ledgerVersion))
	}
	l.entries = f.entries[max(0, len(f.entries)-size):]
	l.fileEntries, l.fileBytes = len(f.entries), int64(len(raw))
	l.rewrite = f.version < ledgerVersion || f.torn || f.damaged > 0 || !f.terminated
	var problems []string
	if f.torn {
		problems = append(problems, "its last line is torn (an append cut short by a crash?) and was skipped")
	}
	if f.damaged > 0 {
		problems = append(problems, fmt.Sprintf("%d damaged line(s) skipped", f.damaged))
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("restart ledger %s: %s; %d entries read, the file is rewritten at the next restart recorded",
			path, strings.Join(problems, ", "), len(f.entries))
	}
	return l, nil
}

// setAside renames the ledger's file with suffix and returns an error
// saying why (what), that a new ledger begins, or that the file could not
// be set aside.
func (l *Ledger) setAside(d *statefile.Dir, suffix, what string) error {
	if err := d.Rename(ledgerFile, ledgerFile+suffix); err != nil {
		return fmt.Errorf("%s, and cannot be set aside: %w", what, err)
	}
	return fmt.Errorf("%s; moved to %s, starting a new one", what, filepath.Join(d.Path(), ledgerFile+suffix))
}

// ledgerContent is what a ledger file holds.
type ledgerContent struct {
	version    int // 0: a JSON list, before the format had a version
	entries    []Entry
	torn       bool // the last line, unterminated, is not an entry
	damaged    int  // other lines that are not entries
	terminated bool // the file ends with a newline (an append can follow)
}

// parseLedger reads a ledger file. Only a missing or newer header, or an
// older file that is not valid, is an error; a newer version's entries are
// not read.
func parseLedger(raw []byte) (ledgerContent, error) {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		var c ledgerContent // version 0: a JSON list, rewritten at the next entry
		return c, json.Unmarshal(raw, &c.entries)
	}
	c := ledgerContent{terminated: bytes.HasSuffix(raw, []byte("\n"))}
	header, rest, _ := bytes.Cut(raw, []byte("\n"))
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(header, &head); err != nil || head.Version < 1 {
		return c, errors.New("no format version on its first line")
	}
	if c.version = head.Version; c.version > ledgerVersion {
		return c, nil
	}
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			if len(rest) == 0 && !c.terminated {
				c.torn = true
			} else {
				c.damaged++
			}
			continue
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}

// Add records e and writes it to the ledger's file: appended (and
// fsynced), or, when the file is due a compaction (or a rewrite, or the
// append failed), with the file rewritten whole (atomically, through a new
// file) with the newest entries. An error means e is kept in memory only.
func (l *Ledger) Add(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Node == "" {
		e.Node = l.node
	}
	l.entries = append(l.entries, e)
	if len(l.entries) > l.size {
		// Not copied: append copies the kept entries when it grows the
		// array, once per so many entries.
		l.entries = l.entries[len(l.entries)-l.size:]
	}
	if l.dir == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	var appendErr error
	if !l.rewrite && l.fileEntries < 2*l.size && l.fileBytes+int64(len(line)) <= l.maxBytes {
		if appendErr = l.append(line); appendErr == nil {
			l.fileEntries++
			l.fileBytes += int64(len(line))
			return nil
		}
		// The append may have left part of a line, or was refused (a link
		// or another file in its place): the file is rewritten whole.
	}
	if err := l.compact(); err != nil {
		l.rewrite = true
		return fmt.Errorf("restart ledger: %w", errors.Join(appendErr, err))
	}
	return nil
}

// append appends line to the file.
func (l *Ledger) append(line []byte) error {
	d, err := statefile.OpenDir(l.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Append(ledgerFile, line)
}

// compact writes the file anew with a header and the newest entries, at
// most half of maxBytes of them, so that appends follow for a while.
func (l *Ledger) compact() error {
	header := []byte(`{"version":` + strconv.Itoa(ledgerVersion) + "}\n")
	var lines [][]byte
	total := int64(len(header))
	for i := len(l.entries) - 1; i >= 0; i-- {
		b, err := json.Marshal(l.entries[i])
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if total+int64(len(b)) > l.maxBytes/2 && len(lines) > 0 {
			break
		}
		lines = append(lines, b)
		total += int64(len(b))
	}
	buf := make([]byte, 0, total)
	buf = append(buf, header...)
	for _, b := range slices.Backward(lines) {
		buf = append(buf, b...)
	}
	d, err := statefile.OpenDir(l.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.WriteFile(ledgerFile, buf); err != nil {
		return err
	}
	l.fileEntries, l.fileBytes, l.rewrite = len(lines), int64(len(buf)), false
	return nil
}

// For returns the entries of a pod (by namespace and name, across its
// incarnations), oldest first.
// Newest returns the newest n entries of the pods keep accepts, newest
// first, in one pass (the status page's "recent restarts").
func (l *Ledger) Newest(n int, keep func(namespace, pod string) bool) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for i := len(l.entries) - 1; i >= 0 && len(out) < n; i-- {
		if e := l.entries[i]; keep(e.Namespace, e.Pod) {
			e.Failures = append([]Failure(nil), e.Failures...) // the caller's own
			out = append(out, e)
		}
	}
	return out
}

func (l *Ledger) For(namespace, pod string) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for _, e := range l.entries {
		if e.Namespace == namespace && e.Pod == pod {
			e.Failures = append([]Failure(nil), e.Failures...) // the caller's own
			out = append(out, e)
		}
	}
	return out
}
