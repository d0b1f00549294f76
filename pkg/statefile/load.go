package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
)

// The one policy of every state file (the probes' state, the restart
// ledger, the readiness gates, the kill pause):
//
//   - no file: a first start, nothing to load;
//   - a file the agent does not write there (ErrUnsafe: a link, not a
//     regular file, another user's, over its limit), or one that cannot be
//     read as its format: set aside as NAME.bad;
//   - a file of a newer format version: set aside as NAME.vN, for the newer
//     agent it belongs to, never overwritten;
//   - a file set aside costs only what it held: Load returns a *Warning
//     (the agent logs it and starts without the file), distinct from an
//     error, which stops the agent (the directory or the file cannot be
//     read at all);
//   - except for a file whose loss would change what the agent does (Keep:
//     the kill pause, which must not resume kills by itself): it is not
//     set aside and Load returns an error saying what to do;
//   - a file is saved whole (WriteFile: a new file, fsynced, renamed over
//     it, the directory fsynced), never over its limit.

// Format is how one state file is read and written.
type Format struct {
	// Name is the file's name in the state directory.
	Name string
	// What names its content in messages ("restart ledger"); Plural says
	// it is plural ("readiness gates": "are not valid").
	What   string
	Plural bool
	// Limit bounds the file read and written, in bytes.
	Limit int64
	// Version is the newest format version this agent reads and writes.
	Version int
	// VersionOf returns a file's format version (0: the format before the
	// version was written), or an error when the file is not valid.
	VersionOf func(raw []byte) (int, error)
	// Then says what follows without the file: what the agent starts from
	// when it is set aside, or (Keep) what the operator can do.
	Then string
	// Keep: a file that is not valid is refused (an error), not set aside.
	Keep bool
}

// Warning is a state file that could not be used, and was set aside (or
// could not be: Err), or was read only in part (Aside empty, Err nil). The
// agent goes on without what it held: log it, do not stop.
type Warning struct {
	What    string // what the file holds (Format.What)
	Path    string // the file
	Problem string // what is wrong with it: "is not valid (…)"
	Aside   string // where it was moved ("": not moved)
	Then    string // what follows
	Err     error  // why it could not be moved
}

func (w *Warning) Error() string {
	what := w.What + " " + w.Path + " " + w.Problem
	switch {
	case w.Err != nil:
		return fmt.Sprintf("%s, and cannot be set aside: %v", what, w.Err)
	case w.Aside != "":
		return fmt.Sprintf("%s; moved to %s, %s", what, w.Aside, w.Then)
	}
	return fmt.Sprintf("%s; %s", what, w.Then)
}

func (w *Warning) Unwrap() error { return w.Err }

// Load reads f's file in d and passes its content and format version to
// decode, unless the file is missing (found false). A file that is not
// valid (ErrUnsafe, VersionOf or decode fails) is set aside as .bad, one of
// a newer version as .vN: found is false, and warning (a *Warning) says
// so. err is fatal: the file could not be read at all, or (Keep) it is not
// valid.
func Load(d *Dir, f *Format, decode func(raw []byte, version int) error) (found bool, warning, err error) {
	aside := func(suffix, problem string) (bool, error, error) {
		e := d.setAside(f, suffix, problem)
		if f.Keep {
			return false, nil, e
		}
		return false, e, nil
	}
	raw, err := d.ReadFile(f.Name, f.Limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil, nil
	case errors.Is(err, ErrUnsafe):
		return aside(".bad", fmt.Sprintf("refused (%v)", err))
	case err != nil:
		return false, nil, fmt.Errorf("%s: %w", f.What, err)
	}
	version, err := f.VersionOf(raw)
	if err == nil && version > f.Version {
		return aside(".v"+strconv.Itoa(version), fmt.Sprintf("%s format version %d, newer than this agent's %d (a newer cri-prober wrote %s)",
			f.verb("has", "have"), version, f.Version, f.verb("it", "them")))
	}
	if err == nil {
		err = decode(raw, version)
	}
	if err != nil {
		return aside(".bad", fmt.Sprintf("%s not valid (%v)", f.verb("is", "are"), err))
	}
	return true, nil, nil
}

// Save writes data as f's file in d, whole (WriteFile), if it is within
// f's limit.
func Save(d *Dir, f *Format, data []byte) error {
	if int64(len(data)) > f.Limit {
		return fmt.Errorf("%s: %d bytes, over the limit of %d", f.What, len(data), f.Limit)
	}
	if err := d.WriteFile(f.Name, data); err != nil {
		return fmt.Errorf("%s: %w", f.What, err)
	}
	return nil
}

func (f *Format) verb(one, many string) string {
	if f.Plural {
		return many
	}
	return one
}

// setAside moves f's file to its name with suffix and returns the warning
// that says why; a file kept (Keep) is not moved, and the error says why.
func (d *Dir) setAside(f *Format, suffix, problem string) error {
	w := &Warning{What: f.What, Path: d.join(f.Name), Problem: problem, Then: f.Then}
	if f.Keep {
		return fmt.Errorf("%s %s %s (%s)", w.What, w.Path, w.Problem, w.Then)
	}
	if err := d.Rename(f.Name, f.Name+suffix); err != nil {
		w.Err = err
		return w
	}
	w.Aside = d.join(f.Name + suffix)
	return w
}

// NewWarning returns a warning about f's file in d that is not set aside
// (a file read in part): problem says what is wrong, then what follows.
func (d *Dir) NewWarning(f *Format, problem, then string) *Warning {
	return &Warning{What: f.What, Path: d.join(f.Name), Problem: problem, Then: then}
}

// VersionField is the VersionOf of a JSON file with a "version" field: a
// JSON list is version 0 (the format before the version was written), an
// object must have a version of at least 1.
func VersionField(raw []byte) (int, error) {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		return 0, nil
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return 0, err
	}
	if head.Version < 1 {
		return 0, errors.New("no format version")
	}
	return head.Version, nil
}

// Unversioned is the VersionOf of a file without a format version.
func Unversioned([]byte) (int, error) { return 0, nil }
