// Package mountinfo reads the kernel's mount table (/proc/<pid>/mountinfo)
// where more than one package needs the same rule: the host side of pods
// lists the mounts under a pod directory (pkg/podfs), node discovery finds
// selinuxfs (pkg/node). It is a leaf and imports nothing of ours.
package mountinfo

import (
	"bytes"
	"strings"
)

// Unescape undoes the kernel's octal escapes of space, tab, newline and
// backslash in a mountinfo path (seq_file's mangle_path).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
