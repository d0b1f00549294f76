package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A manifest of pods others make that sends credentials into its pod (a
// credential header of a probe or a hook, env values that $(VAR) puts
// into an exec probe's command) and sets no metadata.uid applies to every
// sandbox of its name, whoever creates it: a warning (not an error) at
// the field, saying to set metadata.uid. A pod the agent makes is its own:
// none.
func TestUnpinnedCredentialsWarned(t *testing.T) {
	const head = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
`
	tests := []struct {
		name   string
		uid    string
		static bool
		spec   string
		want   []string // the warnings, from the field on
	}{
		{
			name: "a credential header of a probe",
			spec: `    readinessProbe:
      httpGet:
        port: 80
        httpHeaders:
        - {name: Accept, value: text/plain}
        - {name: X-Api-Key, value: s3cr3t}
`,
			want: []string{`pod.yaml:14: pod shop/web: container app: spec.containers[0].readinessProbe.httpGet.httpHeaders[1].name: credential header "X-Api-Key" is sent to every sandbox named shop/web, whoever creates it, as the manifest sets no metadata.uid: set metadata.uid to the UID the pod's sandbox is created with, so that only that pod gets it`},
		},
		{
			name: "a credential header of a hook",
			spec: `    lifecycle:
      preStop:
        httpGet:
          port: 80
          httpHeaders:
          - {name: Authorization, value: Bearer s3cr3t}
`,
			want: []string{`spec.containers[0].lifecycle.preStop.httpGet.httpHeaders[0].name: credential header "Authorization" is sent to every sandbox named shop/web`},
		},
		{
			name: "env expanded into an exec probe",
			spec: `    env:
    - {name: TOKEN, value: s3cr3t}
    livenessProbe:
      exec:
        command: [check, --token=$(TOKEN)]
`,
			want: []string{`spec.containers[0].livenessProbe.exec.command: $(VAR) puts values of the container's env into this command, which runs in every sandbox named shop/web`},
		},
		{
			name: "pinned by metadata.uid",
			uid:  "8f0c",
			spec: `    env:
    - {name: TOKEN, value: s3cr3t}
    livenessProbe:
      exec:
        command: [check, $(TOKEN)]
    readinessProbe:
      httpGet:
        port: 80
        httpHeaders: [{name: Authorization, value: Bearer s3cr3t}]
`,
		},
		{
			name:   "a pod the agent makes",
			static: true,
			spec: `    image: app:1
    readinessProbe:
      httpGet:
        port: 80
        httpHeaders: [{name: Authorization, value: Bearer s3cr3t}]
`,
		},
		{
			name: "no credential header, nothing from env",
			spec: `    env:
    - {name: EMPTY, value: ""}
    - name: FROM
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    livenessProbe:
      exec:
        command: [check, $(UNDEFINED), $(EMPTY), $(FROM), $$(TOKEN)]
    readinessProbe:
      httpGet:
        port: 80
        httpHeaders: [{name: X-Custom, value: v}]
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := head
			if tt.uid != "" {
				manifest += "  uid: " + tt.uid + "\n"
			}
			manifest += "spec:\n  containers:\n  - name: app\n" + tt.spec
			var static *Static
			if tt.static {
				static = &Static{NodeName: "node", Now: func() time.Time { return time.Unix(0, 0) }}
			}
			r := loadData("pod.yaml", []byte(manifest), static)
			require.Empty(t, r.Errors)
			require.Len(t, r.Pods, 1)
			require.Len(t, r.Warnings, len(tt.want), "%v", r.Warnings)
			for i, w := range tt.want {
				assert.Contains(t, r.Warnings[i].Error(), w)
			}
			assert.Equal(t, r.Warnings, r.Pods[0].Warnings, "the pod's, not a container's: it is about the manifest's metadata.uid")
		})
	}
}
