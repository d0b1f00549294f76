package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:      "/a b",
		`/a\011b\012c`: "/a\tb\nc",
		`/a\134b`:      `/a\b`,
		`/plain`:       "/plain",
		`/short\04`:    `/short\04`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
