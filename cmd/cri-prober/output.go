package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats, kubectl's names: table (the default, also ""), wide
// (the table with more columns), json and yaml (the API's objects).
const (
	outputTable = "table"
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

var readFormats = []string{outputTable, outputWide, outputJSON, outputYAML}

// addOutputFlag registers -o/--output with its formats, completed by the
// shell.
func addOutputFlag(cmd *cobra.Command, p *string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", outputTable, "output format: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput rejects a format the command does not print.
func checkOutput(cmd *cobra.Command, format string, formats ...string) error {
	if format == "" || slices.Contains(formats, format) {
		return nil
	}
	return usageErrorf(cmd, "-o %q: want one of %s", format, strings.Join(formats, ", "))
}

// structured reports whether format prints objects (json or yaml).
func structured(format string) bool { return format == outputJSON || format == outputYAML }

// printObject prints v as JSON (indented, as the API serves it) or YAML.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case outputJSON:
		return writeJSONTo(w, v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("output format %q prints no objects", format)
}

// printStreamed prints one object of a stream: a JSON document per line
// (jq reads them), or YAML documents separated by ---, as kubectl -w does.
func printStreamed(w io.Writer, format string, v any) error {
	if format == outputJSON {
		return json.NewEncoder(w).Encode(v)
	}
	if _, err := io.WriteString(w, "---\n"); err != nil {
		return err
	}
	return printObject(w, outputYAML, v)
}

// writeJSONTo prints v as indented JSON, as the API serves it.
func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
