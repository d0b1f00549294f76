// Package ledger keeps the restarts the agent did and why (the question
// users ask most, kubernetes#6532, #115823), newest last and bounded, in
// memory and in a file under --state-dir (restarts.json) that survives the
// agent's restart. Pod sync (pkg/restart) records into it; the API
// (pkg/api) serves it (GET …/restarts, the status page, cri-prober why).
//
// An entry's cause is the ledger's own string (the file's format), so that
// the ledger depends on no one: it imports only pkg/statefile, which keeps
// its file safe.
package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Entry is one restart (or stop) pod sync did, and why. It is the
// ledger's record in memory; the file holds it as a ledgerRecord, and the
// API serves it as api.Restart.
type Entry struct {
	Time time.Time // when the replacement started (or the container was stopped)
	// Node is the node the restart was on (run --node-name); set by the
	// ledger that records it.
	Node      string
	Namespace string
	Pod       string
	PodUID    string
	Container string
	// ContainerID is the instance that failed or exited.
	ContainerID string
	// Cause is pod sync's cause (restart.Cause) as a string: "liveness"
	// or "startup" (a probe reached its failure threshold), "postStart"
	// (the hook failed) or "exit" (the container exited by itself).
	Cause string
	// Failures are the probe results that reached the threshold, oldest
	// first (for a probe cause).
	Failures   []Failure
	ExitCode   int32
	ExitReason string
	// GracePeriodSeconds is the grace period of the kill (a probe cause).
	GracePeriodSeconds int64
	// BackOffSeconds is how long the replacement waited after the exit
	// (kubelet's back-off; 0: at once).
	BackOffSeconds float64
	// Action is ActionRestarted (a replacement started) or ActionStopped
	// (the restart policy or --restart=stop keeps it down).
	Action        string
	ReplacementID string
	Attempt       uint32 // the replacement's
}

// Failure is one probe result that led to a restart.
type Failure struct {
	Time        time.Time
	Output      string
	Consecutive int
	Threshold   int
}

// Actions.
const (
	ActionRestarted = "restarted"
	ActionStopped   = "stopped"
)

// ledgerSize bounds the ledger: the newest entries are kept.
const ledgerSize = 1000

// ledgerFile is the ledger's file in the state directory, JSON lines: a
// header ({"version":1}), then one ledgerRecord per line, oldest first.
// Each restart appends its line (O_APPEND, fsynced): its cost does not
// grow with the ledger. The file is rewritten whole (a new file renamed
// over it, through pkg/statefile) only to compact it, when it holds twice
// ledgerSize entries or ledgerMaxBytes; to replace a file in the format
// before the version (a JSON list of records); and after a torn or damaged
// line or a failed append (an append must not follow part of a line).
const ledgerFile = "restarts.json"

// ledgerVersion is the file's format. A newer version is not read, and is
// set aside (restarts.json.vN) rather than overwritten, for the newer agent
// it belongs to; this one starts a new ledger (pkg/statefile's policy).
const ledgerVersion = 1

// ledgerMaxBytes bounds the file between compactions (a compaction keeps at
// most half of it); a file over twice it is not read.
const ledgerMaxBytes = 32 << 20

// ledgerFormat is the file's format, for a ledger of maxBytes.
func ledgerFormat(maxBytes int64) *statefile.Format {
	return &statefile.Format{Name: ledgerFile, What: "restart ledger", Limit: 2 * maxBytes, Version: ledgerVersion,
		VersionOf: ledgerVersionOf, Then: "starting a new one"}
}

// ledgerRecord is an Entry in the file: its format, kept as it was when
// Entry was the file's type too (files of every version still load).
type ledgerRecord struct {
	Time               time.Time       `json:"time"`
	Node               string          `json:"node,omitempty"`
	Namespace          string          `json:"namespace"`
	Pod                string          `json:"pod"`
	PodUID             string          `json:"podUid"`
	Container          string          `json:"container"`
	ContainerID        string          `json:"containerId"`
	Cause              string          `json:"cause"`
	Failures           []failureRecord `json:"failures,omitempty"`
	ExitCode           int32           `json:"exitCode"`
	ExitReason         string          `json:"exitReason,omitempty"`
	GracePeriodSeconds int64           `json:"gracePeriodSeconds,omitempty"`
	BackOffSeconds     float64         `json:"backOffSeconds"`
	Action             string          `json:"action"`
	ReplacementID      string          `json:"replacementId,omitempty"`
	Attempt            uint32          `json:"attempt,omitempty"`
}

type failureRecord struct {
	Time        time.Time `json:"time"`
	Output      string    `json:"output"`
	Consecutive int       `json:"consecutive"`
	Threshold   int       `json:"threshold"`
}

func recordOf(e Entry) ledgerRecord {
	r := ledgerRecord{Time: e.Time, Node: e.Node, Namespace: e.Namespace, Pod: e.Pod, PodUID: e.PodUID, Container: e.Container,
		ContainerID: e.ContainerID, Cause: e.Cause, ExitCode: e.ExitCode, ExitReason: e.ExitReason,
		GracePeriodSeconds: e.GracePeriodSeconds, BackOffSeconds: e.BackOffSeconds, Action: e.Action, ReplacementID: e.ReplacementID, Attempt: e.Attempt}
	for _, f := range e.Failures {
		r.Failures = append(r.Failures, failureRecord(f))
	}
	return r
}

func (r ledgerRecord) entry() Entry {
	e := Entry{Time: r.Time, Node: r.Node, Namespace: r.Namespace, Pod: r.Pod, PodUID: r.PodUID, Container: r.Container,
		ContainerID: r.ContainerID, Cause: r.Cause, ExitCode: r.ExitCode, ExitReason: r.ExitReason,
		GracePeriodSeconds: r.GracePeriodSeconds, BackOffSeconds: r.BackOffSeconds, Action: r.Action, ReplacementID: r.ReplacementID, Attempt: r.Attempt}
	for _, f := range r.Failures {
		e.Failures = append(e.Failures, Failure(f))
	}
	return e
}

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

// Open returns a ledger kept in dir ("" for memory only), with the
// entries a previous agent left there. The directory is created 0700, and
// refused (err, no ledger: the error says what to do) when it is a link or
// not the agent's own (see statefile.OpenDir). A file that cannot be read
// as a ledger is set aside (pkg/statefile's policy: *.bad, or *.vN for a
// newer format) and the ledger starts empty; a torn last line (an append
// cut short by a crash) or a damaged one is skipped, the other entries
// kept. Either is a warning (a *statefile.Warning) beside a usable ledger:
// such a file must not stop the agent.
func Open(dir string, opts ...Option) (l *Ledger, warning, err error) {
	l, warning, err = openLedger(dir, ledgerSize, ledgerMaxBytes)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range opts {
		o(l)
	}
	return l, warning, nil
}

// Option is an option of Open.
type Option func(*Ledger)

// WithNode sets the node's name on every entry added (Entry.Node); the
// entries a previous agent left keep theirs.
func WithNode(name string) Option { return func(l *Ledger) { l.node = name } }

func openLedger(dir string, size int, maxBytes int64) (l *Ledger, warning, err error) {
	l = &Ledger{size: size, maxBytes: maxBytes}
	if dir == "" {
		return l, nil, nil
	}
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	l.dir, l.rewrite = d.Path(), true // until a file is read that can be appended to
	var f ledgerContent
	var fileBytes int64
	format := ledgerFormat(maxBytes)
	found, warning, err := statefile.Load(d, format, func(raw []byte, version int) error {
		var err error
		f, err = parseLedger(raw, version)
		fileBytes = int64(len(raw))
		return err
	})
	if !found {
		if err != nil {
			return nil, nil, err
		}
		return l, warning, nil
	}
	l.entries = f.entries[max(0, len(f.entries)-size):]
	l.fileEntries, l.fileBytes = len(f.entries), fileBytes
	l.rewrite = f.version < ledgerVersion || f.torn || f.damaged > 0 || !f.terminated
	var problems []string
	if f.torn {
		problems = append(problems, "its last line is torn (an append cut short by a crash?) and was skipped")
	}
	if f.damaged > 0 {
		problems = append(problems, fmt.Sprintf("%d damaged line(s) skipped", f.damaged))
	}
	if len(problems) > 0 {
		return l, d.NewWarning(format, "read in part: "+strings.Join(problems, ", "),
			fmt.Sprintf("%d entries read, the file is rewritten at the next restart recorded", len(f.entries))), nil
	}
	return l, nil, nil
}

// ledgerContent is what a ledger file holds.
type ledgerContent struct {
	version    int // 0: a JSON list, before the format had a version
	entries    []Entry
	torn       bool // the last line, unterminated, is not an entry
	damaged    int  // other lines that are not entries
	terminated bool // the file ends with a newline (an append can follow)
}

// ledgerVersionOf is the version of a ledger file: 0 for a JSON list,
// else its header's, on its first line.
func ledgerVersionOf(raw []byte) (int, error) {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		return 0, nil
	}
	header, _, _ := bytes.Cut(raw, []byte("\n"))
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(header, &head); err != nil || head.Version < 1 {
		return 0, errors.New("no format version on its first line")
	}
	return head.Version, nil
}

// parseLedger reads a ledger file of a version this agent reads. Only an
// older file that is not valid is an error.
func parseLedger(raw []byte, version int) (ledgerContent, error) {
	if version == 0 {
		var c ledgerContent // a JSON list, rewritten at the next entry
		var records []ledgerRecord
		err := json.Unmarshal(raw, &records)
		for _, r := range records {
			c.entries = append(c.entries, r.entry())
		}
		return c, err
	}
	c := ledgerContent{version: version, terminated: bytes.HasSuffix(raw, []byte("\n"))}
	_, rest, _ := bytes.Cut(raw, []byte("\n"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r ledgerRecord
		if err := json.Unmarshal(line, &r); err != nil {
			if len(rest) == 0 && !c.terminated {
				c.torn = true
			} else {
				c.damaged++
			}
			continue
		}
		c.entries = append(c.entries, r.entry())
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
	line, err := json.Marshal(recordOf(e))
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
		b, err := json.Marshal(recordOf(l.entries[i]))
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

// For returns the entries of a pod (by namespace and name, across its
// incarnations), oldest first.
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
