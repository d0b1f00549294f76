// Command testjson keeps `go test -json` timings for make test (issue 28):
// the next slowdown is seen when it lands, not found months later.
//
//	go test -json ./... | testjson filter -o unit.json [-v]
//
// copies the JSON events to a file and prints what plain `go test` (or
// `go test -v`) would have printed: an ok or FAIL line per package, each
// failed test's output, build errors. It exits 1 when anything failed, so
// that a pipeline with pipefail fails either way.
//
//	testjson summary [-top 15] [-previous DIR] DIR
//
// prints, from DIR's *.json and stages.tsv (hack/test.sh writes both), each
// stage's wall time (beside the previous run's, from -previous), the
// slowest packages and tests, and a closing "tests: N passed, N failed, N
// skipped" line that CI reads.
//
// It imports nothing beyond the standard library.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "filter":
		err = filterCmd(os.Args[2:])
	case "summary":
		err = summaryCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go test -json … | testjson filter -o FILE [-v]\n       testjson summary [-top N] [-previous DIR] DIR")
	os.Exit(2)
}

var errFailed = errors.New("tests failed")

func filterCmd(args []string) error {
	fs := flag.NewFlagSet("filter", flag.ExitOnError)
	out := fs.String("o", "", "file the JSON events are copied to")
	verbose := fs.Bool("v", false, "print every test's output as it comes (go test -v), not only the failed tests'")
	fs.Parse(args)
	if *out == "" {
		usage()
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(os.Stdout)
	failed, err := filter(io.TeeReader(os.Stdin, f), w, *verbose)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if failed {
		os.Exit(1)
	}
	return nil
}

// filter prints the console output of the events read from r. Without
// verbose, a test's output is held until it ends and printed only if it
// failed; package lines (ok, FAIL, a panic, a timeout) always are.
func filter(r io.Reader, w *bufio.Writer, verbose bool) (failed bool, err error) {
	// package + " " + top-level test → its output and its subtests', in
	// the order it came.
	held := map[string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: go's own messages pass through.
			w.Write(line)
			w.WriteByte('\n')
			w.Flush()
			continue
		}
		topLevel, _, _ := strings.Cut(e.Test, "/")
		key := e.Package + " " + topLevel
		ended := e.Test != "" && e.Test == topLevel
		switch e.Action {
		case "build-output":
			w.WriteString(e.Output)
		case "build-fail":
			failed = true
		case "output":
			switch {
			case verbose:
				w.WriteString(e.Output)
			case e.Test != "":
				if held[key] == nil {
					held[key] = &strings.Builder{}
				}
				held[key].WriteString(e.Output)
			case e.Output != "PASS\n":
				w.WriteString(e.Output)
			}
		case "fail":
			failed = true
			switch {
			case e.Test == "":
				// A timeout or a panic ends the package with its tests
				// unfinished: their output says where they were.
				for k, b := range held {
					if strings.HasPrefix(k, e.Package+" ") {
						w.WriteString(withoutProgress(b.String()))
						delete(held, k)
					}
				}
			case ended && held[key] != nil:
				w.WriteString(withoutProgress(held[key].String()))
				delete(held, key)
			}
		case "pass", "skip":
			if ended {
				delete(held, key)
			}
		}
		if e.Test == "" || verbose {
			w.Flush()
		}
	}
	return failed, sc.Err()
}

// withoutProgress drops go test's progress lines (=== RUN, PAUSE, CONT,
// NAME) from a test's output, as go test without -v does.
func withoutProgress(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(line, "=== ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func summaryCmd(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ExitOnError)
	top := fs.Int("top", 15, "how many of the slowest tests to show")
	previous := fs.String("previous", "", "an earlier run's directory, whose stage times are shown beside")
	fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	dir := fs.Arg(0)
	s, err := readRun(dir)
	if err != nil {
		return err
	}
	var prev map[string]stage
	if *previous != "" {
		p, err := readStages(*previous)
		if err == nil {
			prev = map[string]stage{}
			for _, st := range p {
				prev[st.name] = st
			}
		}
	}
	summary(os.Stdout, s, prev, *top, *previous)
	return nil
}

// stage is one line of stages.tsv: a make target, its wall time, its
// exit status.
type stage struct {
	name    string
	seconds float64
	status  string
}

type timing struct {
	name    string // package, or package + " " + test
	seconds float64
	result  string
}

type run struct {
	stages               []stage
	packages, tests      []timing
	passed, failed, skip int
}

func readStages(dir string) ([]stage, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "stages.tsv"))
	if err != nil {
		return nil, err
	}
	var out []stage
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		s, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		out = append(out, stage{name: f[0], seconds: s, status: f[2]})
	}
	return out, nil
}

func readRun(dir string) (*run, error) {
	r := &run{}
	r.stages, _ = readStages(dir) // none when filter is used alone
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		if err := r.readEvents(file); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *run) readEvents(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	stageName := strings.TrimSuffix(filepath.Base(file), ".json")
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		switch {
		case e.Test == "":
			if e.Action != "skip" { // skip: no test files
				r.packages = append(r.packages, timing{name: stageName + ": " + e.Package, seconds: e.Elapsed, result: e.Action})
			}
		default:
			switch e.Action {
			case "pass":
				r.passed++
			case "fail":
				r.failed++
			case "skip":
				r.skip++
			}
			if !strings.Contains(e.Test, "/") {
				r.tests = append(r.tests, timing{name: e.Package + " " + e.Test, seconds: e.Elapsed, result: e.Action})
			}
		}
	}
	return sc.Err()
}

func summary(w io.Writer, r *run, prev map[string]stage, top int, prevDir string) {
	bySeconds := func(a, b timing) int { return cmp.Compare(b.seconds, a.seconds) }
	fmt.Fprintln(w, "\n=== make test: timings")
	if len(r.stages) > 0 {
		header := "stage wall time"
		if prev != nil {
			header += " (previous run: " + filepath.Base(prevDir) + ")"
		}
		fmt.Fprintln(w, header)
		var total float64
		for _, s := range r.stages {
			total += s.seconds
			line := fmt.Sprintf("  %-12s %8s  %s", s.name, seconds(s.seconds), s.status)
			if p, ok := prev[s.name]; ok {
				line += fmt.Sprintf("  (was %s, %+.0f%%)", seconds(p.seconds), 100*(s.seconds-p.seconds)/max(p.seconds, 1))
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintf(w, "  %-12s %8s\n", "total", seconds(total))
	}
	slices.SortFunc(r.packages, bySeconds)
	fmt.Fprintln(w, "slowest packages")
	for _, p := range r.packages[:min(top/2+1, len(r.packages))] {
		fmt.Fprintf(w, "  %8s  %s %s\n", seconds(p.seconds), p.name, failMark(p.result))
	}
	slices.SortFunc(r.tests, bySeconds)
	fmt.Fprintf(w, "slowest %d tests\n", top)
	for _, t := range r.tests[:min(top, len(r.tests))] {
		fmt.Fprintf(w, "  %8s  %s %s\n", seconds(t.seconds), t.name, failMark(t.result))
	}
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skip)
}

func failMark(result string) string {
	if result == "fail" {
		return "FAIL"
	}
	return ""
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}
