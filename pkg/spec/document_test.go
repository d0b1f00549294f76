package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/test/inputs"
)

// podDoc is a Pod manifest whose readiness probe ends with the line last.
func podDoc(name, last string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: shop}
spec:
  containers:
  - name: app
    image: localhost/busybox:test
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
%s
`, name, last)
}

// A syntax error is reported at its line in the file, whichever document
// it is in, past separators, comments and CRLF line ends; the other
// documents load. Fails on the old code: the error named the document's
// first line, and go-yaml's line in the document only in its text.
func TestSyntaxErrorLine(t *testing.T) {
	const good = "      periodSeconds: 5"
	broken := map[string]struct {
		lines string // the end of the readiness probe
		at    int    // the line of them that is wrong, from 0
		want  string
	}{
		"indented less than its siblings": {lines: "     periodSeconds: 5", want: "did not find expected key"},
		"indented under a value":          {lines: "      periodSeconds: 5\n        timeoutSeconds: 2", at: 1, want: "mapping values are not allowed"},
		"a brace never closed":            {lines: "      httpGet: {port: 8080", want: `a "{" is not closed`},
		"a tab":                           {lines: "\tperiodSeconds: 5", want: "indent with spaces, not tabs"},
		"a quote never closed":            {lines: `      successThreshold: "2`, want: "a quote or bracket opened here is never closed"},
		"a list item out of line":         {lines: "    ports:\n    - containerPort: 80\n     - containerPort: 81", at: 2, want: "did not find expected"},
		"a key without its colon":         {lines: "      periodSeconds 5\n      timeoutSeconds: 2", want: "could not find expected ':'"},
	}
	for name, b := range broken {
		for doc := 1; doc <= 3; doc++ {
			for _, crlf := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s in document %d, CRLF %v", name, doc, crlf), func(t *testing.T) {
					var file strings.Builder
					lines, want := 0, 0
					add := func(s string) {
						file.WriteString(s)
						lines += strings.Count(s, "\n")
					}
					pod := func(i int, name string) {
						if i != doc {
							add(podDoc(name, good))
							return
						}
						want = lines + 10 + b.at // the block starts on the document's 10th line
						add(podDoc(name, b.lines))
					}
					add("# three pods\n# (the second on line 17)\n---\n")
					pod(1, "one")
					add("---\n# the second\n\n")
					pod(2, "two")
					add("--- # the third\n")
					pod(3, "three")
					data := file.String()
					if crlf {
						data = strings.ReplaceAll(data, "\n", "\r\n")
					}
					pods, errs := loadPods("pods.yaml", []byte(data))
					require.Len(t, errs, 1, "%v", errs)
					assert.Equal(t, fmt.Sprintf("pods.yaml:%d", want), errs[0].Source, errs[0].Detail)
					assert.Contains(t, errs[0].Detail, "not valid YAML or JSON: ")
					assert.Contains(t, errs[0].Detail, b.want)
					assert.Len(t, pods, 2, "the other documents load")
				})
			}
		}
	}
}

// A key given twice in one mapping, at any depth, in YAML or JSON, is an
// error at the second one's line, naming the first's, the field and the
// container; the pod is not used. Fails on the old code: the last value
// silently won.
func TestDuplicateKeys(t *testing.T) {
	const dup = `: remove one; a decoder would silently keep only the last`
	tests := []struct {
		name string
		file string
		want []string // errors, the file name left out
		pods int
	}{{
		name: "a probe's field",
		file: podDoc("web", "      periodSeconds: 5\n      failureThreshold: 3\n      periodSeconds: 50"),
		want: []string{`:12: pod shop/web: container app: spec.containers[0].readinessProbe.periodSeconds: duplicate key "periodSeconds" (first at line 10)` + dup},
	}, {
		name: "in a flow mapping",
		file: podDoc("web", "    ports: [{containerPort: 80, name: web, containerPort: 81}]"),
		want: []string{`:10: pod shop/web: container app: spec.containers[0].ports[0].containerPort: duplicate key "containerPort" (first at line 10)` + dup},
	}, {
		name: "the top level, and a sidecar's field, in the second document",
		file: podDoc("one", "") + "---\n" + `apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  initContainers:
  - name: proxy
    image: localhost/busybox:test
    restartPolicy: Always
    image: localhost/target:test
  containers:
  - {name: app, image: localhost/busybox:test}
kind: Pod
`,
		want: []string{
			`:20: pod default/two: container proxy: spec.initContainers[0].image: duplicate key "image" (first at line 18)` + dup,
			`:23: pod default/two: kind: duplicate key "kind" (first at line 13)` + dup,
		},
		pods: 1,
	}, {
		name: "an annotation",
		file: `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    cri-prober.io/probe-network: pod
    cri-prober.io/probe-network: node
spec: {containers: [{name: app, image: x}]}
`,
		want: []string{`:7: pod default/web: metadata.annotations[cri-prober.io/probe-network]: duplicate key "cri-prober.io/probe-network" (first at line 6)` + dup},
	}, {
		name: "JSON",
		file: `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web", "namespace": "shop"},
  "spec": {
    "containers": [{
      "name": "app",
      "image": "x",
      "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5,
                        "periodSeconds": 1}
    }]
  }
}
`,
		want: []string{`:10: pod shop/web: container app: spec.containers[0].livenessProbe.periodSeconds: duplicate key "periodSeconds" (first at line 9)` + dup},
	}, {
		name: "the same key in different mappings, and merge keys, are no duplicates",
		file: `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: x
    readinessProbe: &probe
      exec: {command: ["true"]}
      periodSeconds: 5
  - name: db
    image: x
    livenessProbe:
      <<: *probe
      periodSeconds: 7
`,
		pods: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, errs := loadPods("pods.yaml", []byte(tt.file))
			var got []string
			for _, e := range errs {
				got = append(got, strings.TrimPrefix(e.Error(), "pods.yaml"))
			}
			assert.Equal(t, tt.want, got)
			assert.Len(t, pods, tt.pods, "a pod with a duplicate key is not used")
		})
	}
}

// A value of the wrong type is reported at its own line, with its path
// (the decoder's has no list indices) and what to write. Fails on the old
// code: the document's first line, and the decoder's Go wording.
func TestTypeErrorLine(t *testing.T) {
	pod := func(lines string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: one
    image: x
    livenessProbe: {exec: {command: ["true"]}, periodSeconds: 5}
  - name: two
    image: x
` + lines
	}
	tests := []struct{ name, file, want string }{
		{"the second container's", pod("    livenessProbe: {exec: {command: [\"true\"]}, periodSeconds: ten}\n"),
			`pods.yaml:13: spec.containers[1].livenessProbe.periodSeconds: Invalid value: a string: must be a whole number (int32): write the number without quotes`},
		{"a list's item", pod("    command: [sleep, 10]\n"),
			`pods.yaml:13: spec.containers[1].command[1]: Invalid value: a number: must be a string: quote the value`},
		{"a map's value", strings.Replace(pod(""), "{app: web}", "{app: web, tier: 3}", 1),
			`pods.yaml:5: metadata.labels.tier: Invalid value: a number: must be a string: quote the value`},
		{"a mapping for a list", pod("    ports: {containerPort: 80}\n"),
			`pods.yaml:13: spec.containers[1].ports: Invalid value: a mapping: must be a list: write its items as "- item" lines, or as [a, b]`},
		{"out of range", pod("    livenessProbe: {exec: {command: [\"true\"]}, periodSeconds: 99999999999}\n"),
			`pods.yaml:13: spec.containers[1].livenessProbe.periodSeconds: Invalid value: 99999999999: must be a whole number (int32): write a whole number in its range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, errs := loadPods("pods.yaml", []byte(tt.file))
			assert.Empty(t, pods)
			assert.Equal(t, []string{tt.want}, messages(errs))
		})
	}
}

// A document too large to search line by line gets go-yaml's line,
// counted from 1: for a parser error, that of the construct it was
// parsing (here metadata's mapping, which the line indented less than its
// siblings falls back into), not the problem's.
func TestSyntaxErrorLineLargeDocument(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n")
	n := 5 // lines so far
	for b.Len() <= maxSearchedDocument {
		n++
		fmt.Fprintf(&b, "    k%d: v\n", n)
	}
	b.WriteString("   bad: v\n") // indented less than its siblings
	_, errs := loadPods("big.yaml", []byte(b.String()))
	require.Len(t, errs, 1)
	assert.Equal(t, "big.yaml:4", errs[0].Source, "name: web, where metadata's mapping starts")
	assert.Contains(t, errs[0].Detail, "did not find expected key")

	// A scanner error: its own line.
	_, errs = loadPods("big.yaml", []byte(b.String()[:b.Len()-len("   bad: v\n")]+"    k: v: w\n"))
	require.Len(t, errs, 1)
	assert.Equal(t, fmt.Sprintf("big.yaml:%d", n+1), errs[0].Source)
	assert.Contains(t, errs[0].Detail, "mapping values are not allowed")
}

// In JSON, a missing comma is reported at the line that lacks it.
func TestSyntaxErrorLineJSON(t *testing.T) {
	_, errs := loadPods("pod.json", []byte(`{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web"}
  "spec": {"containers": [{"name": "app", "image": "x"}]}
}
`))
	require.Len(t, errs, 1)
	assert.Equal(t, "pod.json:4", errs[0].Source)
	assert.Contains(t, errs[0].Detail, `a "{" is not closed, or a comma is missing between its entries`)
}

// What a message quotes of a manifest or a crictl config (a kind, a key, a
// value) is cut to maxQuoted: a hostile 900 KiB one is not copied into
// every error and log line, nor compared letter by letter with every field
// name for a suggestion. Fails on the old code: the messages hold it whole,
// and suggesting a field for a long unknown key allocates gigabytes.
func TestHostileContentIsNotQuotedWhole(t *testing.T) {
	long := strings.Repeat("a", 900<<10)
	tests := map[string]string{
		"a kind":                "apiVersion: v1\nkind: " + long + "\nmetadata: {name: a}\n",
		"a Pod's apiVersion":    "apiVersion: " + long + "\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: b}]}\n",
		"an unknown field":      "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: a\n    image: b\n    ? " + long + "\n    : 1\n",
		"a duplicate key":       "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    ? " + long[:400<<10] + "\n    : a\n    ? " + long[:400<<10] + "\n    : b\nspec: {containers: [{name: a, image: b}]}\n",
		"an annotation's value": `{"metadata": {"name": "a"}, "image": {"image": "b"}, "annotations": {"x": !custom ` + long + "}}\n",
		"an unknown annotation": "metadata: {name: a}\nimage: {image: b}\nannotations:\n  ? " + AnnotationPrefix + long + "\n  : x\n",
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			var r *Result
			inputs.Promptly(t, 256<<20, nil, func() { r = loadData("x.yaml", []byte(data), nil) })
			var got []string // what quotes the document
			for _, e := range r.Errors {
				got = append(got, e.Detail, e.Field) // an annotation's key is its field, cut too
			}
			got = append(got, notices(r.Skipped)...)
			require.NotEmpty(t, got)
			for _, m := range got {
				assert.Less(t, len(m), 2*maxQuoted+300, "%.300s", m)
			}
		})
	}
}
