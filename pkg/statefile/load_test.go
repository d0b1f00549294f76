package statefile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The one policy: no file is a first start; a file not valid is set aside
// as .bad and one of a newer format as .vN, each a *Warning beside no
// content; a file kept (Keep) is not moved and is an error.
func TestLoad(t *testing.T) {
	format := Format{Name: "x.json", What: "test state", Limit: 64, Version: 1, VersionOf: VersionField, Then: "starting afresh"}
	keep := format
	keep.Keep, keep.Then = true, "remove it"
	tests := []struct {
		name    string
		format  Format
		content string // "": no file
		link    bool
		found   bool
		aside   string // the warning's: "" none
		err     string // fatal
		kept    bool   // the file is where it was
	}{
		{name: "no file", format: format},
		{name: "current version", format: format, content: `{"version":1,"n":3}`, found: true, kept: true},
		{name: "version 0: a list", format: format, content: `[3]`, found: true, kept: true},
		{name: "not JSON", format: format, content: `{`, aside: "x.json.bad"},
		{name: "no version", format: format, content: `{"n":3}`, aside: "x.json.bad"},
		{name: "not decoded", format: format, content: `{"version":1,"n":"three"}`, aside: "x.json.bad"},
		{name: "newer", format: format, content: `{"version":7,"n":{}}`, aside: "x.json.v7"},
		{name: "over its limit", format: format, content: `{"version":1,"n":3,"pad":"` + string(make([]byte, 64)) + `"}`, aside: "x.json.bad"},
		{name: "a link", format: format, content: `{"version":1,"n":3}`, link: true, aside: "x.json.bad"},
		{name: "kept: not valid", format: keep, content: `{`, err: "test state", kept: true},
		{name: "kept: a link", format: keep, content: `{"version":1,"n":3}`, link: true, err: "is a symbolic link", kept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			d, err := OpenDir(path)
			require.NoError(t, err)
			defer d.Close()
			file := filepath.Join(path, tt.format.Name)
			if tt.content != "" {
				target := file
				if tt.link {
					target = filepath.Join(t.TempDir(), "elsewhere")
					require.NoError(t, os.Symlink(target, file))
				}
				require.NoError(t, os.WriteFile(target, []byte(tt.content), 0o600))
			}
			var n int
			found, warning, err := Load(d, &tt.format, func(raw []byte, version int) error {
				if version == 0 {
					var list []int
					err := json.Unmarshal(raw, &list)
					n = list[0]
					return err
				}
				var v struct{ N int }
				err := json.Unmarshal(raw, &v)
				n = v.N
				return err
			})
			assert.Equal(t, tt.found, found)
			if tt.found {
				assert.Equal(t, 3, n)
			}
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				assert.ErrorContains(t, err, tt.format.Then, "says what to do")
				var w *Warning
				assert.False(t, errors.As(err, &w), "an error, not a warning")
			} else {
				assert.NoError(t, err)
			}
			if tt.aside == "" {
				assert.NoError(t, warning)
			} else {
				var w *Warning
				require.ErrorAs(t, warning, &w)
				assert.Equal(t, filepath.Join(path, tt.aside), w.Aside)
				assert.Equal(t, file, w.Path)
				assert.ErrorContains(t, warning, "moved to "+filepath.Join(path, tt.aside)+", starting afresh")
				_, err := os.Lstat(filepath.Join(path, tt.aside))
				assert.NoError(t, err, "set aside")
				assert.NoFileExists(t, file)
			}
			if tt.kept {
				_, err := os.Lstat(file)
				assert.NoError(t, err, "left where it was")
			}
		})
	}
}

// Save writes the file whole, and nothing over its limit.
func TestSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d, err := OpenDir(path)
	require.NoError(t, err)
	defer d.Close()
	f := Format{Name: "x.json", What: "test state", Limit: 8}
	require.NoError(t, Save(d, &f, []byte("12345678")))
	err = Save(d, &f, []byte("123456789"))
	assert.ErrorContains(t, err, "test state: 9 bytes, over the limit of 8")
	raw, err := os.ReadFile(filepath.Join(path, "x.json"))
	require.NoError(t, err)
	assert.Equal(t, "12345678", string(raw), "the file kept")
	fi, err := os.Stat(filepath.Join(path, "x.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
