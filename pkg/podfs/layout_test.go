package podfs

import "testing"

func TestCheckElem(t *testing.T) {
	for name, ok := range map[string]bool{
		"0123-abcd": true, "web": true, "a.b": true,
		"": false, ".": false, "..": false, "a/b": false, "/a": false, "a\x00": false,
	} {
		if err := checkElem("pod UID", name); (err == nil) != ok {
			t.Errorf("checkElem(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

func TestIsTsDirName(t *testing.T) {
	for name, want := range map[string]bool{
		"..2026_03_04_05_06_07.123456": true,
		"..2026_03_04_05_06_07.":       false,
		"..data":                       false,
		"..data_tmp":                   false,
		"..2026_13_04_05_06_07.1":      false,
		"name":                         false,
	} {
		if got := isTsDirName(name); got != want {
			t.Errorf("isTsDirName(%q) = %v", name, got)
		}
	}
}
