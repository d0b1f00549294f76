package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGenDocsCommand writes the man pages (and Markdown pages) of every
// command, generated from the commands themselves so that they never
// drift from --help. Hidden: it is for packaging (make man, make release).
func newGenDocsCommand(root *cobra.Command) *cobra.Command {
	var manDir, markdownDir string
	cmd := &cobra.Command{
		Use:    "gen-docs --man DIR [--markdown DIR]",
		Short:  "Write man pages and Markdown pages for every command",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manDir == "" && markdownDir == "" {
				return usageErrorf(cmd, "give --man DIR, --markdown DIR or both")
			}
			root.DisableAutoGenTag = true // pages that do not change with the build date
			if manDir != "" {
				if err := os.MkdirAll(manDir, 0o755); err != nil {
					return err
				}
				header := &doc.GenManHeader{Title: "CRI-PROBER", Section: "1", Source: "cri-prober " + version, Manual: "cri-prober manual"}
				if err := doc.GenManTree(root, header, manDir); err != nil {
					return fmt.Errorf("man pages: %w", err)
				}
			}
			if markdownDir != "" {
				if err := os.MkdirAll(markdownDir, 0o755); err != nil {
					return err
				}
				if err := doc.GenMarkdownTree(root, markdownDir); err != nil {
					return fmt.Errorf("markdown pages: %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&manDir, "man", "", "`directory` for the man pages (section 1)")
	cmd.Flags().StringVar(&markdownDir, "markdown", "", "`directory` for the Markdown pages")
	return cmd
}
