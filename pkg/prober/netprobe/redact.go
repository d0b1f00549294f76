package netprobe

import (
	"net/http"
	"slices"
	"strings"
)

// secretHeaderWords mark a header whose value is a credential: standard
// ones and the usual custom names (X-Api-Key, X-Auth-Token, …).
var secretHeaderWords = []string{"authorization", "cookie", "auth", "token", "key", "secret", "password", "session", "credential"}

// RedactCredentials removes the values of header's credential headers from
// text that a probe reports (a response body shown in a redirect warning,
// an error naming a URL can echo them), so that they reach neither events
// nor logs nor the API. It runs before text is bounded: a long token cut
// in half would no longer be found whole.
func RedactCredentials(text string, header http.Header) string {
	for name, values := range header {
		if !credentialHeader(name) {
			continue
		}
		for _, value := range values {
			// The whole value, then its parts ("Bearer <token>": the token).
			for _, v := range append([]string{value}, strings.Fields(value)...) {
				if len(v) >= 4 {
					text = strings.ReplaceAll(text, v, "[redacted]")
				}
			}
		}
	}
	return text
}

// credentialHeader reports whether a header's name marks a credential,
// without allocating: it runs on every HTTP probe.
func credentialHeader(name string) bool {
	return slices.ContainsFunc(secretHeaderWords, func(w string) bool {
		for i := 0; i+len(w) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(w)], w) {
				return true
			}
		}
		return false
	})
}
