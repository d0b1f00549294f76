package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// The ledger survives the agent: it is written to the state directory and
// read back; a damaged file is set aside, said, and a new ledger begins.
func TestLedgerPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openWarned(t, dir)
	require.NoError(t, err)
	require.NoError(t, l.Add(Entry{Namespace: "ns", Pod: "web", Container: "app", Cause: "exit", Action: ActionRestarted}))
	again, err := openWarned(t, dir)
	require.NoError(t, err)
	assert.Len(t, again.For("ns", "web"), 1)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), []byte("{half"), 0o640))
	fresh, err := openWarned(t, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not valid")
	assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, ledgerFile)+".bad")
	require.NotNil(t, fresh, "the agent goes on with a new ledger")
	assert.Empty(t, fresh.For("ns", "web"))
	assert.FileExists(t, filepath.Join(dir, ledgerFile+".bad"))

	memory, err := openWarned(t, "")
	require.NoError(t, err)
	for i := range ledgerSize + 5 {
		require.NoError(t, memory.Add(Entry{Namespace: "ns", Pod: "web", ExitCode: int32(i)}))
	}
	kept := memory.For("ns", "web")
	assert.Len(t, kept, ledgerSize, "bounded")
	assert.Equal(t, int32(5), kept[0].ExitCode, "the newest kept")
}

func entry(i int) Entry {
	return Entry{Time: time.Unix(1_000_000+int64(i), 0).UTC(), Namespace: "ns", Pod: "web", Container: "app",
		ContainerID: fmt.Sprintf("c%d", i), Cause: "exit", ExitCode: int32(i), Action: ActionRestarted}
}

func exitCodes(entries []Entry) []int32 {
	var out []int32
	for _, e := range entries {
		out = append(out, e.ExitCode)
	}
	return out
}

// fileLines returns the ledger file's lines (each with its newline).
func fileLines(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	require.NoError(t, err)
	return strings.SplitAfter(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// Each restart appends one line to the same file (its inode and earlier
// bytes unchanged): the cost of a restart does not grow with the ledger.
// The file is JSON lines under a version header.
func TestLedgerAppends(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openWarned(t, dir)
	require.NoError(t, err)
	path := filepath.Join(dir, ledgerFile)
	require.NoError(t, l.Add(entry(1)))
	before, err := os.Stat(path)
	require.NoError(t, err)
	first, err := os.ReadFile(path)
	require.NoError(t, err)

	for i := 2; i <= 4; i++ {
		require.NoError(t, l.Add(entry(i)))
		after, err := os.Stat(path)
		require.NoError(t, err)
		assert.True(t, os.SameFile(before, after), "appended in place, not replaced")
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(raw, first), "earlier bytes unchanged")
	lines := fileLines(t, dir)
	require.Len(t, lines, 5)
	assert.JSONEq(t, `{"version":1}`, lines[0])
	for i, line := range lines[1:] {
		var e Entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		assert.Equal(t, entry(i+1), e)
	}
	again, err := openWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 3, 4}, exitCodes(again.For("ns", "web")))
}

// The file is compacted (rewritten whole, atomically, with the newest
// entries) when it reaches twice the ledger's bound, not before; and
// when it would pass its size in bytes.
func TestLedgerCompacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openSized(t, dir, 3, ledgerMaxBytes)
	require.NoError(t, err)
	path := filepath.Join(dir, ledgerFile)
	require.NoError(t, l.Add(entry(1)))
	created, err := os.Stat(path)
	require.NoError(t, err)
	for i := 2; i <= 6; i++ {
		require.NoError(t, l.Add(entry(i)))
	}
	full, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(created, full), "appended up to twice the bound")
	assert.Len(t, fileLines(t, dir), 1+6)
	assert.Equal(t, []int32{4, 5, 6}, exitCodes(l.For("ns", "web")), "the bound in memory")

	require.NoError(t, l.Add(entry(7)))
	compacted, err := os.Stat(path)
	require.NoError(t, err)
	assert.False(t, os.SameFile(full, compacted), "rewritten past twice the bound")
	assert.Len(t, fileLines(t, dir), 1+3, "the newest entries")
	assert.Equal(t, os.FileMode(0o600), compacted.Mode().Perm())
	require.NoError(t, l.Add(entry(8)))
	next, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(compacted, next), "appended again after the compaction")
	again, err := openSized(t, dir, 3, ledgerMaxBytes)
	require.NoError(t, err)
	assert.Equal(t, []int32{6, 7, 8}, exitCodes(again.For("ns", "web")))

	// In bytes: the file never passes its size; a compaction keeps at
	// most half of it.
	line, err := json.Marshal(entry(1))
	require.NoError(t, err)
	maxBytes := int64(10 * (len(line) + 1))
	small := filepath.Join(t.TempDir(), "state")
	l, err = openSized(t, small, 1000, maxBytes)
	require.NoError(t, err)
	for i := 1; i <= 50; i++ {
		require.NoError(t, l.Add(entry(i)))
		fi, err := os.Stat(filepath.Join(small, ledgerFile))
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), maxBytes)
	}
	assert.Len(t, l.For("ns", "web"), 50, "memory keeps its own bound")
	again, err = openSized(t, small, 1000, maxBytes)
	require.NoError(t, err)
	kept := exitCodes(again.For("ns", "web"))
	require.NotEmpty(t, kept)
	assert.Equal(t, int32(50), kept[len(kept)-1], "the newest kept")
}

// A crash in the middle of an append leaves a torn last line: it is
// skipped with a warning, the other entries kept, and the next entry
// rewrites the file rather than continue the torn line.
func TestLedgerSkipsATornLastLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openWarned(t, dir)
	require.NoError(t, err)
	require.NoError(t, l.Add(entry(1)))
	require.NoError(t, l.Add(entry(2)))
	f, err := os.OpenFile(filepath.Join(dir, ledgerFile), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"time":"2026-11-21T13:05:12Z","namesp`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l, err = openWarned(t, dir)
	require.Error(t, err)
	require.NotNil(t, l)
	assert.Contains(t, err.Error(), "last line is torn")
	assert.Equal(t, []int32{1, 2}, exitCodes(l.For("ns", "web")))
	require.NoError(t, l.Add(entry(3)))
	again, err := openWarned(t, dir)
	require.NoError(t, err, "the torn line is gone")
	assert.Equal(t, []int32{1, 2, 3}, exitCodes(again.For("ns", "web")))
	assert.Len(t, fileLines(t, dir), 1+3)

	// A whole line whose newline did not make it is kept; the next entry
	// goes on a line of its own.
	raw, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), bytes.TrimSuffix(raw, []byte("\n")), 0o600))
	l, err = openWarned(t, dir)
	require.NoError(t, err)
	require.NoError(t, l.Add(entry(4)))
	again, err = openWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 3, 4}, exitCodes(again.For("ns", "web")))
}

// A ledger of a newer format is not read and not overwritten: it is set
// aside (restarts.json.v2) with an error that says so, and a new ledger
// begins. The file of before the version (a JSON list) is read and
// rewritten in the new format at the next entry.
func TestLedgerVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	newer := "{\"version\":2}\n{\"somethingElse\":true}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), []byte(newer), 0o600))
	l, err := openWarned(t, dir)
	require.Error(t, err)
	require.NotNil(t, l, "the agent goes on with a new ledger")
	assert.Contains(t, err.Error(), "has format version 2, newer than this agent's 1")
	assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, ledgerFile)+".v2")
	assert.Empty(t, l.For("ns", "web"))
	require.NoError(t, l.Add(entry(1)))
	raw, err := os.ReadFile(filepath.Join(dir, ledgerFile+".v2"))
	require.NoError(t, err)
	assert.Equal(t, newer, string(raw), "the newer file kept as it was")
	assert.JSONEq(t, `{"version":1}`, fileLines(t, dir)[0])

	old, err := json.Marshal([]ledgerRecord{recordOf(entry(1)), recordOf(entry(2))})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), old, 0o600))
	l, err = openWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2}, exitCodes(l.For("ns", "web")))
	require.NoError(t, l.Add(entry(3)))
	lines := fileLines(t, dir)
	require.Len(t, lines, 1+3)
	assert.JSONEq(t, `{"version":1}`, lines[0])
}

// No link planted in the state directory is followed: not at a temporary
// name (the fixed restarts.json.tmp of before), not at the ledger's name
// when it is read (refused and set aside) or appended to (the file is
// rewritten in its place).
func TestLedgerFollowsNoLink(t *testing.T) {
	evil, err := json.Marshal([]ledgerRecord{{Namespace: "ns", Pod: "evil", Cause: "exit", Action: ActionRestarted}})
	require.NoError(t, err)
	outside := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "precious")
		require.NoError(t, os.WriteFile(path, evil, 0o644))
		return path
	}
	untouched := func(t *testing.T, path string) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(evil), string(raw), "written through a planted link")
	}
	stateDir := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		return dir
	}

	t.Run("at a temporary name", func(t *testing.T) {
		dir, target := stateDir(t), outside(t)
		require.NoError(t, os.Symlink(target, filepath.Join(dir, ledgerFile+".tmp")))
		l, err := openWarned(t, dir)
		require.NoError(t, err)
		require.NoError(t, l.Add(entry(1)))
		require.NoError(t, l.Add(entry(2)))
		untouched(t, target)
	})

	t.Run("at the ledger's name when read", func(t *testing.T) {
		dir, target := stateDir(t), outside(t)
		require.NoError(t, os.Symlink(target, filepath.Join(dir, ledgerFile)))
		l, err := openWarned(t, dir)
		require.Error(t, err)
		require.NotNil(t, l)
		assert.Contains(t, err.Error(), "is a symbolic link")
		assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, ledgerFile)+".bad")
		assert.Empty(t, l.For("ns", "evil"), "nothing read through the link")
		require.NoError(t, l.Add(entry(1)))
		untouched(t, target)
	})

	t.Run("at the ledger's name when appended to", func(t *testing.T) {
		dir, target := stateDir(t), outside(t)
		l, err := openWarned(t, dir)
		require.NoError(t, err)
		require.NoError(t, l.Add(entry(1)))
		require.NoError(t, os.Remove(filepath.Join(dir, ledgerFile)))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, ledgerFile)))
		require.NoError(t, l.Add(entry(2)))
		untouched(t, target)
		fi, err := os.Lstat(filepath.Join(dir, ledgerFile))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "the link replaced by the ledger")
		again, err := openWarned(t, dir)
		require.NoError(t, err)
		assert.Equal(t, []int32{1, 2}, exitCodes(again.For("ns", "web")))
	})
}

// The state directory is the agent's own: created 0700 (the file 0600);
// a link in its place, or a directory others can write, is refused with
// what to do, and the agent does not start on it.
func TestLedgerDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openWarned(t, dir)
	require.NoError(t, err)
	require.NoError(t, l.Add(entry(1)))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dir, ledgerFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Symlink(real, link))
	l, warning, err := Open(link)
	require.Error(t, err)
	assert.NoError(t, warning, "an error, not a warning")
	assert.Nil(t, l)
	assert.Contains(t, err.Error(), "is a symbolic link")
	assert.NoFileExists(t, filepath.Join(real, ledgerFile))

	open := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o777))
	l, warning, err = Open(open)
	require.Error(t, err)
	assert.NoError(t, warning, "an error, not a warning")
	assert.Nil(t, l)
	assert.Contains(t, err.Error(), "chmod 0700 "+open)
}

// Newest gives the newest entries of the pods asked for, newest first, at
// most n, each with failures of its own.
func TestLedgerNewest(t *testing.T) {
	l, err := openWarned(t, "")
	require.NoError(t, err)
	for i, pod := range []string{"web", "db", "web", "cache", "web"} {
		require.NoError(t, l.Add(Entry{Namespace: "ns", Pod: pod, Attempt: uint32(i), Failures: []Failure{{Output: "sick"}}}))
	}
	keep := func(namespace, pod string) bool { return namespace == "ns" && pod != "cache" }
	got := l.Newest(3, keep)
	require.Len(t, got, 3)
	assert.Equal(t, []uint32{4, 2, 1}, []uint32{got[0].Attempt, got[1].Attempt, got[2].Attempt})
	got[0].Failures[0].Output = "changed"
	assert.Equal(t, "sick", l.Newest(1, keep)[0].Failures[0].Output, "the caller's own copy")
	assert.Empty(t, l.Newest(3, func(string, string) bool { return false }))
}

// Each entry says the node it was recorded on (run --node-name), in the
// ledger and in its file; entries a previous agent left keep theirs.
func TestLedgerEntriesCarryTheNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openWarned(t, dir, WithNode("node1"))
	require.NoError(t, err)
	require.NoError(t, l.Add(Entry{Namespace: "ns", Pod: "web", Container: "app", Cause: "exit", Action: ActionRestarted}))
	assert.Equal(t, "node1", l.For("ns", "web")[0].Node)
	raw, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"node":"node1"`)

	renamed, err := openWarned(t, dir, WithNode("node2"))
	require.NoError(t, err)
	require.NoError(t, renamed.Add(Entry{Namespace: "ns", Pod: "web", Container: "app", Cause: "exit", Action: ActionRestarted}))
	got := renamed.For("ns", "web")
	require.Len(t, got, 2)
	assert.Equal(t, []string{"node1", "node2"}, []string{got[0].Node, got[1].Node})
}

// openWarned is OpenLedger on a directory that can be used: its error is
// the warning, a *statefile.Warning (the file set aside, or read in part).
func openWarned(t *testing.T, dir string, opts ...Option) (*Ledger, error) {
	t.Helper()
	l, warning, err := Open(dir, opts...)
	require.NoError(t, err, "the directory can be used")
	require.NotNil(t, l, "a ledger beside a warning")
	if warning != nil {
		var w *statefile.Warning
		require.ErrorAs(t, warning, &w)
	}
	return l, warning
}

// openSized is openLedger of size entries and maxBytes on a directory that
// can be used: its error is the warning.
func openSized(t *testing.T, dir string, size int, maxBytes int64) (*Ledger, error) {
	t.Helper()
	l, warning, err := openLedger(dir, size, maxBytes)
	require.NoError(t, err, "the directory can be used")
	return l, warning
}

// fixtureEntries are the entries of testdata/restarts-v*.json, files
// written by the agent before the ledger's record had a type of its own
// (the restarter's Entry was the file's format then).
func fixtureEntries() []Entry {
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	return []Entry{
		{Time: t0, Node: "node1", Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c0", Cause: "liveness",
			Failures: []Failure{{Time: t0.Add(-10 * time.Second), Output: "HTTP probe failed with statuscode: 500", Consecutive: 3, Threshold: 3}},
			ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, BackOffSeconds: 10, Action: ActionRestarted, ReplacementID: "c1", Attempt: 1},
		{Time: t0.Add(5 * time.Minute), Node: "node1", Namespace: "shop", Pod: "web", PodUID: "uid-web", Container: "app", ContainerID: "c1", Cause: "exit",
			ExitCode: 3, Action: ActionStopped},
	}
}

// A ledger written before the file's record was apart from Entry loads
// whole, in both formats, and a record is written as it was then, byte for
// byte.
func TestLedgerLoadsTodaysFiles(t *testing.T) {
	for _, name := range []string{"restarts-v1.json", "restarts-v0.json"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			dir := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, ledgerFile), raw, 0o600))
			l, warning := openWarned(t, dir)
			require.NoError(t, warning)
			assert.Equal(t, fixtureEntries(), l.For("shop", "web"))
			require.NoError(t, l.Add(entry(3)))
			again, warning := openWarned(t, dir)
			require.NoError(t, warning)
			assert.Len(t, again.For("shop", "web"), 2)
			assert.Equal(t, []int32{3}, exitCodes(again.For("ns", "web")))
		})
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "restarts-v1.json"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for i, e := range fixtureEntries() {
		b, err := json.Marshal(recordOf(e))
		require.NoError(t, err)
		assert.Equal(t, lines[1+i], string(b), "the record of entry %d as the file has it", i)
	}
}
