package spec

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ExpandCommand substitutes $(VAR) in an exec probe's command as kubelet's
// ExpandContainerCommandOnlyStatic does: from the container's env entries
// as written (an entry set with valueFrom has no value, so it expands to
// ""), "$$" for a literal "$", and an undefined or unclosed reference left
// as it is.
func ExpandCommand(command []string, env []corev1.EnvVar) []string {
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

// expandsEnv reports whether ExpandCommand brings some env value into the
// command: it differs from the command expanded with every value empty.
func expandsEnv(command []string, env []corev1.EnvVar) bool {
	blank := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		blank[i] = corev1.EnvVar{Name: e.Name}
	}
	return !slices.Equal(ExpandCommand(command, env), ExpandCommand(command, blank))
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
