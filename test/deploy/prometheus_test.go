//go:build deploy

package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/api"
)

const (
	scrapeConfigPath = "deploy/prometheus/prometheus.yml"
	rulesPath        = "deploy/prometheus/cri-prober.rules.yml"
	ruleTestsDir     = "testdata/prometheus"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type ruleTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(readFile(t, rulesPath), &rf); err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	return rf
}

// Contract (issue 16, item 7): the scrape config and the rules are two
// files that Prometheus loads, as promtool checks them: the configuration
// names the rule file, each file holds only its own kind.
func TestPrometheusFilesLoad(t *testing.T) {
	t.Parallel()
	promtool := deployTools(t)
	out := run(t, repoRoot, nil, promtool, "check", "config", scrapeConfigPath)
	if !strings.Contains(out, "1 rule files found") {
		t.Errorf("promtool check config: want the rule file checked with it:\n%s", out)
	}
	run(t, repoRoot, nil, promtool, "check", "rules", rulesPath)

	var cfg map[string]any
	if err := yaml.Unmarshal(readFile(t, scrapeConfigPath), &cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg["groups"]; ok {
		t.Errorf("%s holds rule groups: Prometheus reads rules only from rule_files", scrapeConfigPath)
	}
	if got := cfg["rule_files"]; !slices.Equal(anyStrings(got), []string{filepath.Base(rulesPath)}) {
		t.Errorf("%s rule_files: %v, want [%s] (beside it)", scrapeConfigPath, got, filepath.Base(rulesPath))
	}
	var rules map[string]any
	if err := yaml.Unmarshal(readFile(t, rulesPath), &rules); err != nil {
		t.Fatal(err)
	}
	for k := range rules {
		if k != "groups" {
			t.Errorf("%s: %s: a rule file holds groups only", rulesPath, k)
		}
	}
	// The alerts name the scrape jobs: the agent's own series, and
	// kube-state-metrics' pod series on /metrics/kube-state (the same
	// targets).
	jobs := regexp.MustCompile(`job_name: *(\S+)`).FindAllStringSubmatch(string(readFile(t, scrapeConfigPath)), -1)
	var names []string
	for _, j := range jobs {
		names = append(names, j[1])
	}
	if !slices.Equal(names, []string{"cri-prober", "cri-prober-kube-state"}) {
		t.Fatalf("%s: scrape jobs %v, want cri-prober and cri-prober-kube-state", scrapeConfigPath, names)
	}
	if !regexp.MustCompile(`(?m)job_name: cri-prober-kube-state.*\n\s+metrics_path: /metrics/kube-state$`).Match(readFile(t, scrapeConfigPath)) {
		t.Errorf("%s: the job cri-prober-kube-state must scrape /metrics/kube-state", scrapeConfigPath)
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllStringSubmatch(r.Expr, -1) {
				if !slices.Contains(names, m[1]) {
					t.Errorf("alert %s selects job=%q; the scrape jobs are %v", r.Alert, m[1], names)
				}
			}
		}
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	s := make([]string, 0, len(l))
	for _, e := range l {
		str, _ := e.(string)
		s = append(s, str)
	}
	return s
}

// Contract: every alert has a `promtool test rules` case of its own
// (testdata/prometheus/ALERT.test.yml, run against the shipped rule file)
// that makes it fire and checks its labels and annotations, and passes.
func TestPrometheusAlertsFire(t *testing.T) {
	t.Parallel()
	promtool := deployTools(t)
	var alerts []string
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s: want a severity label and a summary", r.Alert)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(ruleTestsDir, "*.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".test.yml"); !slices.Contains(alerts, name) {
			t.Errorf("%s: no alert %s in %s", f, name, rulesPath)
		}
	}
	for _, alert := range alerts {
		t.Run(alert, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(ruleTestsDir, alert+".test.yml")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("alert %s has no test: %v", alert, err)
			}
			var tf ruleTestFile
			if err := yaml.Unmarshal(data, &tf); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			rules, err := filepath.Abs(filepath.Join(ruleTestsDir, strings.Join(tf.RuleFiles, "")))
			if err != nil || len(tf.RuleFiles) != 1 || rules != filepath.Join(repoRoot, rulesPath) {
				t.Errorf("%s rule_files %v: want the shipped %s alone", file, tf.RuleFiles, rulesPath)
			}
			fires := false
			for _, tc := range tf.Tests {
				for _, a := range tc.AlertRuleTest {
					if a.AlertName != alert {
						t.Errorf("%s tests %s: one alert per file", file, a.AlertName)
					}
					fires = fires || len(a.ExpAlerts) > 0
				}
			}
			if !fires {
				t.Errorf("%s never expects %s to fire", file, alert)
			}
			run(t, ruleTestsDir, nil, promtool, "test", "rules", filepath.Base(file))
		})
	}
}

// Contract: every metric the rules use is one the agent exports (found in
// its source: each is registered under a literal name), so that a renamed
// metric cannot leave an alert that never fires.
func TestPrometheusRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := map[string]bool{
		"up":                    true, // Prometheus' own, per target
		"cri_prober_build_info": true, // versioncollector.NewCollector("cri_prober")
	}
	for _, name := range api.KubeStateSeries() { // /metrics/kube-state
		exported[name] = true
	}
	literal := regexp.MustCompile(`"((?:cri_prober|prober)_[a-z0-9_]+)"`)
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
				exported[m[1]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	metric := regexp.MustCompile(`\b(up|(?:cri_prober|prober|kube)_[a-z0-9_]+)\b`)
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range metric.FindAllString(r.Expr, -1) {
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] {
					t.Errorf("alert %s uses %s, which the agent does not export", r.Alert, m)
				}
			}
		}
	}
}
