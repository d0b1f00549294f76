package podfs

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The paths of a pod's files are podconfig.Layout's, the one statement of
// kubelet's layout under its --root-dir and pod logs directory: the
// Manager's Layout is its Node's. What follows works on them.

// relElem is the name of path inside its parent, parent being
// filepath.Dir(path): it opens by descriptor (openat) what the Layout names
// by path.
func relElem(path string) string { return filepath.Base(path) }

// checkElem accepts a name that is one path element: a pod UID, a volume
// or container name. Kubernetes validation already allows no other, but the
// agent reads manifests from disk, so a name that would leave its directory
// is refused here too.
func checkElem(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q: must be a single path element", what, name)
	}
	return nil
}
