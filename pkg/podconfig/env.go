package podconfig

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	netutils "k8s.io/utils/net"

	"github.com/cri-prober/cri-prober/pkg/podip"
)

// EnvVar is one variable of a container's environment.
type EnvVar struct {
	Name, Value string
}

// envList keeps variables in the order they were first set, with the last
// value set: kubelet collects them in a map and hands them to the runtime
// in Go's random map order, so any fixed order is as good as kubelet's;
// this one reads like the manifest.
type envList struct {
	vars  []EnvVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].Value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, EnvVar{name, value})
}

func (l *envList) get(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].Value, true
}

// environment is kubelet's makeEnvironmentVariables for a pod without an
// API server: no service links (kubelet without a service lister adds
// none), envFrom and configMapKeyRef/secretKeyRef fail as they do when
// kubelet has no client, fieldRef, resourceFieldRef and fileKeyRef
// resolve, and $(VAR) in values expands over the variables before.
func environment(in ContainerInput, node Node) ([]EnvVar, error) {
	pod, c := in.Pod, in.Container
	if pod.Spec.EnableServiceLinks == nil {
		return nil, configErrorf("nil pod.spec.enableServiceLinks encountered, cannot construct envvars")
	}
	var env envList
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			return nil, configErrorf("couldn't get configMap %v/%v, no kubeClient defined", pod.Namespace, from.ConfigMapRef.Name)
		case from.SecretRef != nil:
			return nil, configErrorf("couldn't get secret %v/%v, no kubeClient defined", pod.Namespace, from.SecretRef.Name)
		}
	}
	mapping := func(name string) string {
		if v, ok := env.get(name); ok {
			return v
		}
		return "$(" + name + ")"
	}
	for _, e := range c.Env {
		value := e.Value
		switch {
		case value != "":
			value = Expand(value, mapping)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			v, err := FieldValue(e.ValueFrom.FieldRef, pod, in.PodIP, in.PodIPs, node)
			if err != nil {
				return nil, &ConfigError{Message: err.Error()}
			}
			value = v
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := envResourceValue(e.ValueFrom.ResourceFieldRef, pod, c, node.Allocatable)
			if err != nil {
				return nil, &ConfigError{Message: err.Error()}
			}
			value = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			return nil, configErrorf("couldn't get configMap %v/%v, no kubeClient defined", pod.Namespace, e.ValueFrom.ConfigMapKeyRef.Name)
		case e.ValueFrom.SecretKeyRef != nil:
			return nil, configErrorf("couldn't get secret %v/%v, no kubeClient defined", pod.Namespace, e.ValueFrom.SecretKeyRef.Name)
		case e.ValueFrom.FileKeyRef != nil:
			v, skip, err := fileKeyValue(e.ValueFrom.FileKeyRef, in)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			value = v
		}
		env.set(e.Name, value)
	}
	return env.vars, nil
}

// fileKeyValue resolves a fileKeyRef as makeEnvironmentVariables does
// (gate EnvFiles, on in 1.36): the key's value in the env file at path
// inside the volume; skip for a missing key that is optional.
func fileKeyValue(f *corev1.FileKeySelector, in ContainerInput) (value string, skip bool, err error) {
	vol, ok := in.Volumes[f.VolumeName]
	if !ok || vol.HostPath == "" {
		return "", false, configErrorf("cannot find the volume %q referenced by FileKeyRef", f.VolumeName)
	}
	if in.ReadEnvFile == nil {
		return "", false, configErrorf("couldn't parse env file")
	}
	data, err := in.ReadEnvFile(vol.HostPath, f.Path)
	if err != nil {
		return "", false, configErrorf("couldn't parse env file")
	}
	value, err = EnvFileValue(data, f.Key)
	if err != nil {
		return "", false, configErrorf("couldn't parse env file")
	}
	if value == "" {
		if f.Optional != nil && *f.Optional {
			return "", true, nil
		}
		return "", false, configErrorf("environment variable key %q not found in file %q", f.Key, filepath.Join(vol.HostPath, f.Path))
	}
	return value, false, nil
}

// EnvFileValue is the value of key in an env file as kubelet's
// pkg/kubelet/util/env ParseEnv reads it: KEY='value' lines (values may
// span lines), blank lines and # comments skipped, "" when the key is
// absent.
func EnvFileValue(data []byte, key string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		eq := strings.Index(line, "=")
		if eq == -1 {
			return "", fmt.Errorf("invalid environment variable format at line %d: missing '='", n)
		}
		namePart := line[:eq]
		name := strings.TrimRight(namePart, " \t")
		if name == "" {
			return "", fmt.Errorf("invalid environment variable format at line %d: empty variable name", n)
		}
		if namePart != name {
			return "", fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", n)
		}
		valuePart := line[eq+1:]
		trimmed := strings.TrimLeft(valuePart, " \t")
		if valuePart != trimmed {
			// As in bash, KEY= 'v' sets KEY to "".
			if name == key {
				return "", nil
			}
			continue
		}
		if !strings.HasPrefix(trimmed, "'") {
			return "", fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", n)
		}
		var value strings.Builder
		rest := trimmed[1:]
		start := n
		for {
			if end := strings.Index(rest, "'"); end != -1 {
				value.WriteString(rest[:end])
				after := strings.TrimLeft(rest[end+1:], " \t")
				if after != "" && !strings.HasPrefix(after, "#") {
					return "", fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", n)
				}
				if name == key {
					return value.String(), nil
				}
				break
			}
			value.WriteString(rest)
			value.WriteString("\n")
			if !sc.Scan() {
				return "", fmt.Errorf("invalid environment variable format starting at line %d: unclosed single quote", start)
			}
			n++
			rest = sc.Text()
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("error reading environment variable file: %w", err)
	}
	return "", nil
}

// FieldValue is the value of a downward API fieldRef for the pod, as
// kubelet resolves it for an env var (podFieldSelectorRuntimeValue):
// metadata.name, namespace, uid, labels, annotations (whole, as sorted
// k="v" lines, or one key), spec.nodeName, spec.serviceAccountName,
// status.hostIP(s) from the node, status.podIP(s) from podIPs (one per
// family, the node's family first). A downwardAPI volume file is not
// resolved this way: see ExtractFieldPath.
func FieldValue(fs *corev1.ObjectFieldSelector, pod *corev1.Pod, podIP string, podIPs []string, node Node) (string, error) {
	path, err := convertFieldLabel(fs.APIVersion, fs.FieldPath)
	if err != nil {
		return "", err
	}
	podIPs = podip.Sort(podIPs, node.IP())
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		ips, err := hostIPs(node.IPs)
		if err != nil {
			return "", err
		}
		if path == "status.hostIP" {
			return ips[0], nil
		}
		return strings.Join(ips, ","), nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return ExtractFieldPath(pod, path)
}

// convertFieldLabel is pkg/apis/core/pods' ConvertDownwardAPIFieldLabel.
func convertFieldLabel(version, label string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if path, _, ok := splitSubscript(label); ok {
		switch path {
		case "metadata.annotations", "metadata.labels":
			return label, nil
		default:
			return "", fmt.Errorf("field label does not support subscript: %s", label)
		}
	}
	switch label {
	case "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
		"status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return label, nil
	case "spec.host":
		return "spec.nodeName", nil
	}
	return "", fmt.Errorf("field label not supported: %s", label)
}

// splitSubscript is pkg/fieldpath's SplitMaybeSubscriptedPath.
func splitSubscript(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

// ExtractFieldPath is pkg/fieldpath's ExtractFieldPathAsString on a pod:
// the value of a downwardAPI volume file's fieldRef (downwardapi's
// CollectData calls it with the fieldPath as written, without the env
// var's version conversion or its spec and status fields): metadata.name,
// namespace, uid, labels and annotations (whole, as sorted k="v" lines, or
// one key); anything else is an error.
func ExtractFieldPath(pod *corev1.Pod, fieldPath string) (string, error) {
	if path, sub, ok := splitSubscript(fieldPath); ok {
		switch path {
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(sub)); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Annotations[sub], nil
		case "metadata.labels":
			if errs := validation.IsQualifiedName(sub); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Labels[sub], nil
		default:
			return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
		}
	}
	switch fieldPath {
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
}

// formatMap is pkg/fieldpath's FormatMap: key="value" lines, keys sorted,
// values Go-quoted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// hostIPs is pkg/util/node's GetNodeHostIPs over the node's addresses:
// the first, and the first of the other family.
func hostIPs(addrs []string) ([]string, error) {
	var all []net.IP
	for _, a := range addrs {
		if ip := netutils.ParseIPSloppy(a); ip != nil {
			all = append(all, ip)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("host IP unknown; known addresses: %v", addrs)
	}
	out := []string{all[0].String()}
	for _, ip := range all[1:] {
		if (ip.To4() == nil) != (all[0].To4() == nil) {
			out = append(out, ip.String())
			break
		}
	}
	return out, nil
}

// envResourceValue resolves a resourceFieldRef for an env var as kubelet
// does: limits the pod does not set read the node's allocatable (or the
// pod-level limit), merged into the pod's regular containers and the
// container itself but not into other init containers
// (defaultPodLimitsForDownwardAPI, containerResourceRuntimeValue).
func envResourceValue(fs *corev1.ResourceFieldSelector, pod *corev1.Pod, c *corev1.Container, allocatable corev1.ResourceList) (string, error) {
	alloc := downwardAllocatable(pod, allocatable)
	if fs.ContainerName == "" {
		cc := c.DeepCopy()
		mergeLimits(cc, alloc)
		return containerResourceValue(fs, cc)
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == fs.ContainerName {
			cc := pod.Spec.Containers[i].DeepCopy()
			mergeLimits(cc, alloc)
			return containerResourceValue(fs, cc)
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == fs.ContainerName {
			return containerResourceValue(fs, &pod.Spec.InitContainers[i])
		}
	}
	return "", fmt.Errorf("container %s not found", fs.ContainerName)
}

// ResourceValue is the value of a downwardAPI volume file's
// resourceFieldRef (ExtractResourceValueByContainerNameAndNodeAllocatable,
// which downwardapi's CollectData calls with the node's allocatable): the
// named container's resource, its unset limits read from the node's
// allocatable.
func ResourceValue(fs *corev1.ResourceFieldSelector, pod *corev1.Pod, allocatable corev1.ResourceList) (string, error) {
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if c == nil && list[i].Name == fs.ContainerName {
				c = list[i].DeepCopy()
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("container %s not found", fs.ContainerName)
	}
	mergeLimits(c, allocatable)
	return containerResourceValue(fs, c)
}

// downwardAllocatable is the allocatable of defaultPodLimitsForDownwardAPI:
// the node's, with pod-level cpu and memory limits in their place.
func downwardAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) corev1.ResourceList {
	r := pod.Spec.Resources
	if r == nil || !hasPodLevelLimits(pod) {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if v, ok := r.Limits[name]; ok && !v.IsZero() {
			if _, ok := out[name]; ok {
				out[name] = v.DeepCopy()
			}
		}
	}
	return out
}

// mergeLimits is MergeContainerResourceLimits: unset or zero cpu, memory
// and ephemeral-storage limits take the allocatable.
func mergeLimits(c *corev1.Container, allocatable corev1.ResourceList) {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := c.Resources.Limits[name]; !ok || q.IsZero() {
			if a, ok := allocatable[name]; ok {
				c.Resources.Limits[name] = a.DeepCopy()
			}
		}
	}
}

// containerResourceValue is pkg/api/v1/resource's
// ExtractContainerResourceValue: the amount divided by the divisor (1 when
// unset), rounded up.
func containerResourceValue(fs *corev1.ResourceFieldSelector, c *corev1.Container) (string, error) {
	divisor := fs.Divisor
	if divisor.Cmp(resource.Quantity{}) == 0 {
		divisor = resource.MustParse("1")
	}
	ceil := func(a, b int64) (string, error) {
		return strconv.FormatInt(int64(math.Ceil(float64(a)/float64(b))), 10), nil
	}
	lim, req := c.Resources.Limits, c.Resources.Requests
	switch fs.Resource {
	case "limits.cpu":
		return ceil(lim.Cpu().MilliValue(), divisor.MilliValue())
	case "limits.memory":
		return ceil(lim.Memory().Value(), divisor.Value())
	case "limits.ephemeral-storage":
		return ceil(lim.StorageEphemeral().Value(), divisor.Value())
	case "requests.cpu":
		return ceil(req.Cpu().MilliValue(), divisor.MilliValue())
	case "requests.memory":
		return ceil(req.Memory().Value(), divisor.Value())
	case "requests.ephemeral-storage":
		return ceil(req.StorageEphemeral().Value(), divisor.Value())
	}
	if name, ok := strings.CutPrefix(fs.Resource, "requests."); ok && strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return ceil(req.Name(corev1.ResourceName(name), resource.BinarySI).Value(), divisor.Value())
	}
	if name, ok := strings.CutPrefix(fs.Resource, "limits."); ok && strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return ceil(lim.Name(corev1.ResourceName(name), resource.BinarySI).Value(), divisor.Value())
	}
	return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
}

// Expand replaces $(VAR) references in s through mapping, as kubelet's
// third_party/forked/golang/expansion Expand: $$ is a literal $, an
// unclosed $( or a $ before another character stays as written.
func Expand(s string, mapping func(string) string) string {
	var b strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(s); cursor++ {
		if s[cursor] != '$' || cursor+1 >= len(s) {
			continue
		}
		b.WriteString(s[checkpoint:cursor])
		read, isVar, advance := readVariable(s[cursor+1:])
		if isVar {
			b.WriteString(mapping(read))
		} else {
			b.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return b.String() + s[checkpoint:]
}

// readVariable is expansion's tryReadVariableName.
func readVariable(s string) (string, bool, int) {
	r, size := utf8.DecodeRuneInString(s)
	switch r {
	case '$':
		return s[:size], false, size
	case '(':
		for i := 1; i < len(s); i++ {
			if s[i] == ')' {
				return s[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + string(r), false, size
	}
}

// envMapping is expansion.MappingFuncFor over the resolved environment:
// an unknown name stays $(NAME).
func envMapping(env []EnvVar) func(string) string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) string {
		if v, ok := m[name]; ok {
			return v
		}
		return "$(" + name + ")"
	}
}
