package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// play refuses a pod defined twice among its files, standard input
// included, with the manifest directory's message (one rule, in
// pkg/spec), and makes nothing.
func TestLoadPlayedDuplicatePod(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - {name: app, image: localhost/busybox:test}\n"
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(a, []byte(pod), 0o644))
	cmd := &cobra.Command{Use: "play"}
	cmd.SetIn(strings.NewReader(pod))
	var stderr bytes.Buffer
	pods, err := loadPlayed(cmd, []string{a, "-"}, "node", &stderr)
	assert.ErrorIs(t, err, errUsage)
	assert.Empty(t, pods)
	assert.Equal(t, "-:1: pod shop/web-node: pod is already defined at "+a+":1; this definition is ignored: remove one, or rename this pod\n", stderr.String())

	_, err = loadPlayed(cmd, []string{dir}, "node", &stderr)
	assert.ErrorIs(t, err, errUsage)
	assert.ErrorContains(t, err, "is a directory: give its manifest files")
}
