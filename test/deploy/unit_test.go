//go:build deploy

package deploy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// unitFile is a systemd unit: section → key → values, in order. A key
// given twice has both values; an empty assignment resets the list, as
// systemd reads list settings.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, data []byte) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasSuffix(line, `\`):
			t.Fatalf("line %d: continuation lines are not read by this test; write the setting on one line", n)
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("line %d: %q is not KEY=VALUE in a section", n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if value == "" {
			u[section][key] = []string{}
			continue
		}
		u[section][key] = append(u[section][key], value)
	}
	return u
}

// get returns a setting's last value ("" if unset).
func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// list returns a list setting's words, over all its assignments.
func (u unitFile) list(section, key string) []string {
	var words []string
	for _, v := range u[section][key] {
		words = append(words, strings.Fields(v)...)
	}
	return words
}

func TestParseUnit(t *testing.T) {
	u := parseUnit(t, []byte("[Service]\n# comment\nA=1\nB=x y\nB=z\nC=old\nC=\n"))
	if got := u.get("Service", "A"); got != "1" {
		t.Errorf("A = %q", got)
	}
	if got := strings.Join(u.list("Service", "B"), ","); got != "x,y,z" {
		t.Errorf("B = %q", got)
	}
	if got := u.list("Service", "C"); len(got) != 0 {
		t.Errorf("C = %q, want reset", got)
	}
	if _, ok := u["Service"]["C"]; !ok {
		t.Error("C: an empty assignment is still a setting")
	}
}
