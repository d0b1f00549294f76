package probe

import (
	"net/http"
	"strings"

	"github.com/cri-prober/cri-prober/pkg/credential"
)

// RedactCredentials removes the values of header's credential headers from
// text that a probe reports (a response body shown in a redirect warning,
// an error naming a URL can echo them), so that they reach neither events
// nor logs nor the API. It runs before text is bounded: a long token cut
// in half would no longer be found whole.
func RedactCredentials(text string, header http.Header) string {
	for name, values := range header {
		if !credential.Header(name) {
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
