package main

import (
	"runtime"

	"github.com/spf13/cobra"
)

// versionInfo is what `version -o json|yaml` prints.
type versionInfo struct {
	Version        string `json:"version"`
	Commit         string `json:"commit,omitempty"`
	GoVersion      string `json:"goVersion"`
	Platform       string `json:"platform"`
	KubernetesAPI  string `json:"kubernetesApi"`
	CRIAPI         string `json:"criApi"`
	ProbeSemantics string `json:"probeSemantics"`
}

func currentVersion() versionInfo {
	return versionInfo{
		Version: version, Commit: revision(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		KubernetesAPI: moduleVersion("k8s.io/api"), CRIAPI: moduleVersion("k8s.io/cri-api"), ProbeSemantics: "kubelet v1.36",
	}
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, and what the binary was built with",
		Example: `  cri-prober version
  cri-prober version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			if structured(output) {
				return printObject(cmd.OutOrStdout(), output, currentVersion())
			}
			cmd.Println(versionString())
			cmd.Print(versionDetails())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table (text), json, yaml")
	return cmd
}
