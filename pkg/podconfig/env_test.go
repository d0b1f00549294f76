package podconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rows of third_party/forked/golang/expansion's TestMapReference and
// TestExpand.
func TestExpand(t *testing.T) {
	vars := map[string]string{
		"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": "",
	}
	mapping := func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return "$(" + name + ")"
	}
	for _, tc := range [][2]string{
		{"$(VAR_A)", "A"},
		{"$(VAR_A)-$(VAR_A)", "A-A"},
		{"$(VAR_A)-1", "A-1"},
		{"___$(VAR_B)___", "___B___"},
		{"___$(VAR_C)", "___C"},
		{"$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"},
		{"$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"},
		{"$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"},
		{"f000-$$VAR_A", "f000-$VAR_A"},
		{`foo\$(VAR_C)bar`, `foo\Cbar`},
		{`foo\\$(VAR_C)bar`, `foo\\Cbar`},
		{`foo\\\\$(VAR_A)bar`, `foo\\\\Abar`},
		{"$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"},
		{"$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		{"$(VAR_REF)", "$(VAR_A)"},
		{"%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"},
		{"foo$(VAR_EMPTY)bar", "foobar"},
		{"foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"},
		{"f00__(VAR_A)__", "f00__(VAR_A)__"},
		{"$?_boo_$!", "$?_boo_$!"},
		{"$VAR_A", "$VAR_A"},
		{"$(VAR_DNE)", "$(VAR_DNE)"},
		{"$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"},
		{"$$$$$$(VAR_A)", "$$$(VAR_A)"},
		{"$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"},
		{"$$$$$$$(VAR_A)", "$$$A"},
		{"$VAR_A)", "$VAR_A)"},
		{"${VAR_A}", "${VAR_A}"},
		{"$(VAR_B)_______$(A", "B_______$(A"},
		{"$(VAR_C)_______$(", "C_______$("},
		{"$(VAR_A)foobarzab$", "Afoobarzab$"},
		{`foo-\$(VAR_A`, `foo-\$(VAR_A`},
		{"--$($($($($--", "--$($($($($--"},
		{"$($($($($--foo$(", "$($($($($--foo$("},
		{"foo0--$($($($(", "foo0--$($($($("},
		{"$(foo$$var)", "$(foo$$var)"},
		{"$(ünicode)", "$(ünicode)"},
		{"$ü", "$ü"},
		{"", ""},
	} {
		if got := Expand(tc[0], mapping); got != tc[1] {
			t.Errorf("Expand(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}

func envPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "dapi-test-pod-name", Namespace: "test2", UID: "uid-1",
			Labels:      map[string]string{"a": "1", "b": `q"uote`},
			Annotations: map[string]string{"kubernetes.io/config.source": "file", "x.example/y": "z"},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: "special",
			NodeName:           "node-name",
			EnableServiceLinks: ptr(true),
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// Rows of kubelet's TestMakeEnvironmentVariables (without services: the
// agent has no API server, as kubelet without a service lister).
func TestEnvironment(t *testing.T) {
	node := Node{IPs: []string{"192.0.2.1", "2001:db8::1"}, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
	}}
	for _, tc := range []struct {
		name    string
		pod     func(*corev1.Pod)
		c       corev1.Container
		podIPs  []string
		want    []EnvVar
		wantErr string
	}{
		{name: "static values keep their order, the last value wins",
			c:    corev1.Container{Env: []corev1.EnvVar{{Name: "B", Value: "1"}, {Name: "A", Value: "2"}, {Name: "B", Value: "3"}}},
			want: []EnvVar{{"B", "3"}, {"A", "2"}}},
		{name: "expansion over earlier variables only",
			c: corev1.Container{Env: []corev1.EnvVar{
				{Name: "TEST_LITERAL", Value: "test-test-test"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "OUT_OF_ORDER_TEST", Value: "$(OUT_OF_ORDER_TARGET)"},
				{Name: "OUT_OF_ORDER_TARGET", Value: "FOO"},
				{Name: "EMPTY_VAR"},
				{Name: "EMPTY_TEST", Value: "foo-$(EMPTY_VAR)"},
				{Name: "POD_NAME_TEST2", Value: "test2-$(POD_NAME)"},
				{Name: "POD_NAME_TEST3", Value: "$(POD_NAME_TEST2)-3"},
				{Name: "LITERAL_TEST", Value: "literal-$(TEST_LITERAL)"},
				{Name: "TEST_UNDEFINED", Value: "$(UNDEFINED_VAR)"},
				{Name: "ESCAPED", Value: "$$(TEST_LITERAL)"},
			}},
			want: []EnvVar{
				{"TEST_LITERAL", "test-test-test"}, {"POD_NAME", "dapi-test-pod-name"},
				{"OUT_OF_ORDER_TEST", "$(OUT_OF_ORDER_TARGET)"}, {"OUT_OF_ORDER_TARGET", "FOO"},
				{"EMPTY_VAR", ""}, {"EMPTY_TEST", "foo-"}, {"POD_NAME_TEST2", "test2-dapi-test-pod-name"},
				{"POD_NAME_TEST3", "test2-dapi-test-pod-name-3"}, {"LITERAL_TEST", "literal-test-test-test"},
				{"TEST_UNDEFINED", "$(UNDEFINED_VAR)"}, {"ESCAPED", "$(TEST_LITERAL)"},
			}},
		{name: "downward API fields",
			c: corev1.Container{Env: []corev1.EnvVar{
				fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("POD_UID", "metadata.uid"), fieldEnv("POD_NODE_NAME", "spec.nodeName"),
				fieldEnv("POD_NODE_NAME_HOST", "spec.host"),
				fieldEnv("POD_SERVICE_ACCOUNT_NAME", "spec.serviceAccountName"),
				fieldEnv("POD_IP", "status.podIP"), fieldEnv("POD_IPS", "status.podIPs"),
				fieldEnv("HOST_IP", "status.hostIP"), fieldEnv("HOST_IPS", "status.hostIPs"),
				fieldEnv("LABELS", "metadata.labels"), fieldEnv("LABEL_A", "metadata.labels['a']"),
				fieldEnv("ANNOTATIONS", "metadata.annotations"), fieldEnv("ANNOTATION", "metadata.annotations['X.example/y']"),
				fieldEnv("ANNOTATION_EXACT", "metadata.annotations['x.example/y']"),
			}},
			podIPs: []string{"fd00::6", "1.2.3.4", "1.2.3.5"},
			want: []EnvVar{
				{"POD_NAME", "dapi-test-pod-name"}, {"POD_NAMESPACE", "test2"}, {"POD_UID", "uid-1"},
				{"POD_NODE_NAME", "node-name"}, {"POD_NODE_NAME_HOST", "node-name"}, {"POD_SERVICE_ACCOUNT_NAME", "special"},
				{"POD_IP", "1.2.3.4"}, {"POD_IPS", "1.2.3.4,fd00::6"},
				{"HOST_IP", "192.0.2.1"}, {"HOST_IPS", "192.0.2.1,2001:db8::1"},
				{"LABELS", "a=\"1\"\nb=\"q\\\"uote\""}, {"LABEL_A", "1"},
				{"ANNOTATIONS", "kubernetes.io/config.source=\"file\"\nx.example/y=\"z\""}, {"ANNOTATION", ""}, {"ANNOTATION_EXACT", "z"},
			}},
		{name: "resource fields default to the node's allocatable",
			c: corev1.Container{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}},
				Env: []corev1.EnvVar{
					{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
					{Name: "CPU_LIMIT_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
					{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
					{Name: "MEM_REQUEST", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1M")}}},
					{Name: "CPU_REQUEST", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				}},
			want: []EnvVar{{"CPU_LIMIT", "4"}, {"CPU_LIMIT_M", "4000"}, {"MEM_LIMIT", "8192"}, {"MEM_REQUEST", "105"}, {"CPU_REQUEST", "0"}}},
		{name: "pod-level limits stand in for allocatable",
			pod: func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}
			},
			c: corev1.Container{Name: "c", Env: []corev1.EnvVar{
				{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			}},
			want: []EnvVar{{"CPU_LIMIT", "2"}, {"MEM_LIMIT", "8589934592"}}},
		{name: "another container's resource",
			pod: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{{Name: "other"}}
				p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			},
			c: corev1.Container{Name: "c", Env: []corev1.EnvVar{
				{Name: "OTHER", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.cpu"}}},
				// Kubelet merges allocatable into regular containers only.
				{Name: "INIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "init", Resource: "limits.cpu"}}},
			}},
			want: []EnvVar{{"OTHER", "4"}, {"INIT", "0"}}},
		{name: "unknown container", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}}}},
			wantErr: "container nope not found"},
		{name: "unsupported resource", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}}}},
			wantErr: "unsupported container resource : limits.gpu"},
		{name: "unsupported field", c: corev1.Container{Env: []corev1.EnvVar{fieldEnv("X", "status.phase")}},
			wantErr: "unsupported fieldPath: status.phase"},
		{name: "bad field", c: corev1.Container{Env: []corev1.EnvVar{fieldEnv("X", "spec.bogus")}},
			wantErr: "field label not supported: spec.bogus"},
		{name: "bad version", c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}},
			wantErr: "unsupported pod version: v2"},
		{name: "configMapKeyRef without an API server", c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: ptr(true)}}}}},
			wantErr: "couldn't get configMap test2/cm, no kubeClient defined"},
		{name: "secretKeyRef without an API server", c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}},
			wantErr: "couldn't get secret test2/s, no kubeClient defined"},
		{name: "envFrom without an API server", c: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}},
			wantErr: "couldn't get configMap test2/cm, no kubeClient defined"},
		{name: "nil enableServiceLinks", pod: func(p *corev1.Pod) { p.Spec.EnableServiceLinks = nil },
			wantErr: "nil pod.spec.enableServiceLinks encountered, cannot construct envvars"},
		{name: "no host IP", pod: func(p *corev1.Pod) {}, c: corev1.Container{Env: []corev1.EnvVar{fieldEnv("H", "status.hostIP")}},
			wantErr: "host IP unknown; known addresses: []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := envPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			n := node
			if tc.name == "no host IP" {
				n.IPs = nil
			}
			podIP := ""
			if len(tc.podIPs) > 0 {
				podIP = tc.podIPs[0]
			}
			got, err := Env(ContainerInput{Pod: pod, Container: &tc.c, PodIP: podIP, PodIPs: tc.podIPs}, n)
			if tc.wantErr != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Message != tc.wantErr {
					t.Errorf("error %v, want ConfigError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Rows of kubelet's TestMakeEnvironmentVariablesWithFileKeyRef and
// pkg/kubelet/util/env's TestParseEnv.
func TestFileKeyRef(t *testing.T) {
	files := map[string]string{
		"/vol/config/env": "# comment\n\nDB_HOST='db.local'\nMULTI='a\nb'\nSPACED= 'ignored'\nEMPTY=''\n",
		"/vol/bad":        "NOQUOTE=value\n",
	}
	read := func(dir, path string) ([]byte, error) {
		data, ok := files[dir+"/"+path]
		if !ok {
			return nil, errors.New("no such file")
		}
		return []byte(data), nil
	}
	ref := func(name, path, key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "vol", Path: path, Key: key, Optional: &optional}}}
	}
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		read    func(string, string) ([]byte, error)
		want    []EnvVar
		wantErr string
	}{
		{name: "values", env: []corev1.EnvVar{ref("H", "config/env", "DB_HOST", false), ref("M", "config/env", "MULTI", false)}, read: read,
			want: []EnvVar{{"H", "db.local"}, {"M", "a\nb"}}},
		{name: "optional missing key", env: []corev1.EnvVar{ref("X", "config/env", "NOPE", true), ref("Y", "config/env", "SPACED", true)}, read: read, want: nil},
		{name: "missing key", env: []corev1.EnvVar{ref("X", "config/env", "NOPE", false)}, read: read,
			wantErr: `environment variable key "NOPE" not found in file "/vol/config/env"`},
		{name: "empty value is missing", env: []corev1.EnvVar{ref("X", "config/env", "EMPTY", false)}, read: read,
			wantErr: `environment variable key "EMPTY" not found in file "/vol/config/env"`},
		{name: "bad file", env: []corev1.EnvVar{ref("X", "bad", "NOQUOTE", false)}, read: read, wantErr: "couldn't parse env file"},
		{name: "no file", env: []corev1.EnvVar{ref("X", "none", "K", true)}, read: read, wantErr: "couldn't parse env file"},
		{name: "no reader", env: []corev1.EnvVar{ref("X", "config/env", "DB_HOST", false)}, wantErr: "couldn't parse env file"},
		{name: "no volume", env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "other", Path: "p", Key: "k"}}}},
			read: read, wantErr: `cannot find the volume "other" referenced by FileKeyRef`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := ContainerInput{Pod: envPod(), Container: &corev1.Container{Env: tc.env}, Volumes: map[string]Volume{"vol": {HostPath: "/vol"}}, ReadEnvFile: tc.read}
			got, err := Env(in, Node{})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ data, key, want, err string }{
		{"A='1'\n", "A", "1", ""},
		{"  A='1' # trailing comment\n", "A", "1", ""},
		{"A='1' junk\n", "A", "", "invalid environment variable format at line 1: unexpected content after closing quote"},
		{"A ='1'\n", "A", "", "invalid environment variable format at line 1: whitespace before '=' is not allowed"},
		{"='1'\n", "A", "", "invalid environment variable format at line 1: empty variable name"},
		{"\nA\n", "A", "", "invalid environment variable format at line 2: missing '='"},
		{"A='open\nstill\n", "A", "", "invalid environment variable format starting at line 1: unclosed single quote"},
		{"B='x'\nA= 'y'\n", "A", "", ""},
	} {
		got, err := EnvFileValue([]byte(tc.data), tc.key)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || got != tc.want {
			t.Errorf("EnvFileValue(%q, %s) = %q, %v; want %q, %q", tc.data, tc.key, got, err, tc.want, tc.err)
		}
	}
}

// ResourceValue is what a downwardAPI volume file shows.
func TestResourceValue(t *testing.T) {
	pod := envPod()
	pod.Spec.Containers = []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), "hugepages-2Mi": resource.MustParse("4Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), "hugepages-2Mi": resource.MustParse("4Mi")},
	}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "i"}}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	for _, tc := range []struct {
		container, res, divisor, want, err string
	}{
		{"a", "limits.cpu", "", "2", ""},
		{"a", "limits.cpu", "1m", "2000", ""},
		{"a", "requests.cpu", "1m", "250", ""},
		{"a", "requests.cpu", "", "1", ""},
		{"a", "limits.memory", "1Mi", "64", ""},
		{"a", "limits.ephemeral-storage", "1Gi", "10", ""},
		{"a", "requests.ephemeral-storage", "", "0", ""},
		{"a", "limits.hugepages-2Mi", "1Mi", "4", ""},
		{"a", "requests.hugepages-2Mi", "", "4194304", ""},
		{"i", "limits.cpu", "", "2", ""},
		{"x", "limits.cpu", "", "", "container x not found"},
		{"a", "limits.bogus", "", "", "unsupported container resource : limits.bogus"},
	} {
		fs := &corev1.ResourceFieldSelector{ContainerName: tc.container, Resource: tc.res}
		if tc.divisor != "" {
			fs.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := ResourceValue(fs, pod, alloc)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("ResourceValue(%s %s /%s) = %q, %v; want %q %q", tc.container, tc.res, tc.divisor, got, err, tc.want, tc.err)
		}
	}
}

// Rows of pkg/fieldpath's TestExtractFieldPathAsString: a downwardAPI
// volume file's values, the pod's metadata only.
func TestExtractFieldPath(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "ns", UID: "u-1",
		Labels:      map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"a.example/b": "c"},
	}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	for _, tc := range []struct {
		name, path, want, wantErr string
	}{
		{name: "name", path: "metadata.name", want: "web"},
		{name: "namespace", path: "metadata.namespace", want: "ns"},
		{name: "uid", path: "metadata.uid", want: "u-1"},
		{name: "labels", path: "metadata.labels", want: "app=\"web\"\ntier=\"front\""},
		{name: "one label", path: "metadata.labels['tier']", want: "front"},
		{name: "one annotation", path: "metadata.annotations['a.example/b']", want: "c"},
		{name: "missing label", path: "metadata.labels['none']", want: ""},
		{name: "invalid subscript", path: "metadata.labels['a b']", wantErr: "invalid key subscript in metadata.labels['a b']"},
		{name: "subscript of a name", path: "metadata.name['x']", wantErr: `fieldPath "metadata.name['x']" does not support subscript`},
		// The env var's spec and status fields are not a volume file's.
		{name: "node name", path: "spec.nodeName", wantErr: "unsupported fieldPath: spec.nodeName"},
		{name: "pod IP", path: "status.podIP", wantErr: "unsupported fieldPath: status.podIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExtractFieldPath(pod, tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}
