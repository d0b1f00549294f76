// Package credential says which HTTP header names carry credentials, once
// for the whole agent: their values are redacted from what a probe
// reports (pkg/probe), and a manifest that would send them to
// any sandbox of its name is warned about (pkg/spec). It is a leaf every
// layer may use.
package credential

import (
	"slices"
	"strings"
)

// headerWords mark a header whose value is a credential: standard ones and
// the usual custom names (X-Api-Key, X-Auth-Token, …).
var headerWords = []string{"authorization", "cookie", "auth", "token", "key", "secret", "password", "session", "credential"}

// Header reports whether a header's name marks a credential, without
// allocating: it runs on every HTTP probe.
func Header(name string) bool {
	return slices.ContainsFunc(headerWords, func(w string) bool {
		for i := 0; i+len(w) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(w)], w) {
				return true
			}
		}
		return false
	})
}
