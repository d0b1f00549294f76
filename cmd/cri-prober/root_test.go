package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Completion scripts for the shells kubectl and crictl complete in.
func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "__start_cri-prober",
		"zsh":  "#compdef cri-prober",
		"fish": "complete -c cri-prober",
	} {
		t.Run(shell, func(t *testing.T) {
			out, _, err := runCLI(t, "completion", shell)
			require.NoError(t, err)
			assert.Contains(t, out, marker)
		})
	}
	// The shell asks the binary itself: -o's formats come back.
	out, _, err := runCLI(t, "__complete", "status", "-o", "")
	require.NoError(t, err)
	for _, format := range readFormats {
		assert.Contains(t, out, format+"\n")
	}
}

// Every command has a man page, generated from the command itself.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	_, _, err := runCLI(t, "gen-docs", "--man", dir, "--markdown", filepath.Join(dir, "md"))
	require.NoError(t, err)
	root := newRootCommand()
	for _, cmd := range root.Commands() {
		if !cmd.IsAvailableCommand() || cmd.Name() == "help" {
			continue
		}
		page, err := os.ReadFile(filepath.Join(dir, "cri-prober-"+cmd.Name()+".1"))
		require.NoError(t, err, "man page of %s", cmd.Name())
		assert.Contains(t, string(page), `.TH "CRI-PROBER"`)
		assert.Contains(t, string(page), strings.ReplaceAll(cmd.Short, "-", `\-`)[:20], "its summary")
		_, err = os.Stat(filepath.Join(dir, "md", "cri-prober_"+cmd.Name()+".md"))
		assert.NoError(t, err)
	}
}

// Pods are named as kubectl names them: NAMESPACE/NAME, or NAME with -n
// (default "default"); the two ways must agree.
func TestPodRef(t *testing.T) {
	tests := []struct {
		arg, namespace string
		wantNS, want   string
		wantErr        string
	}{
		{arg: "shop/web", wantNS: "shop", want: "web"},
		{arg: "web", namespace: "shop", wantNS: "shop", want: "web"},
		{arg: "web", wantNS: "default", want: "web"},
		{arg: "shop/web", namespace: "shop", wantNS: "shop", want: "web"},
		{arg: "shop/web", namespace: "other", wantErr: `is in namespace "shop" but -n says "other"`},
		{arg: "/web", wantErr: "want NAMESPACE/NAME"},
		{arg: "shop/", wantErr: "want NAMESPACE/NAME"},
		{arg: "a/b/c", wantErr: "want NAMESPACE/NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.arg+" -n "+tt.namespace, func(t *testing.T) {
			r := podRef{namespace: tt.namespace}
			ns, name, err := r.parse(newHistoryCommand(), tt.arg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorIs(t, err, errUsage)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantNS, ns)
			assert.Equal(t, tt.want, name)
		})
	}
}
