package prober

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// expandCommand substitutes $(VAR) in an exec probe's command as kubelet's
// ExpandContainerCommandOnlyStatic does: from the container's env entries
// as written (an entry set with valueFrom has no value, so it expands to
// ""), "$$" for a literal "$", and an undefined or unclosed reference left
// as it is.
func expandCommand(command []string, env []corev1.EnvVar) []string {
	if len(command) == 0 {
		return command
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(command))
	for i, arg := range command {
		out[i] = expand(arg, vars)
	}
	return out
}

func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}
