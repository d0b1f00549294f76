package spec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cri-prober/cri-prober/pkg/credential"
)

// unpinnedWarnings warns about what a manifest of pods others make sends
// into its pod when it sets no metadata.uid: such a manifest applies to
// every sandbox with its namespace and name, whoever creates it (under
// kubelet names are unique and UIDs come from the API server; over CRI any
// client chooses both). What is sent: a credential header (credential.Header)
// of a probe's or a hook's httpGet, and an exec probe's command into which
// $(VAR) puts values of the container's env (hooks' commands are not
// expanded, as under kubelet). A pod the agent makes is its own, matched
// by the UID it gives it: never call this for one.
func unpinnedWarnings(source string, pod *corev1.Pod) []*Error {
	if pod.UID != "" {
		return nil
	}
	var out []*Error
	warn := func(c *corev1.Container, path *field.Path, detail string) {
		out = append(out, &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name, Field: path.String(),
			Detail: fmt.Sprintf("%s every sandbox named %s/%s, whoever creates it, as the manifest sets no metadata.uid: set metadata.uid to the UID the pod's sandbox is created with, so that only that pod gets it", detail, pod.Namespace, pod.Name)})
	}
	headers := func(c *corev1.Container, h *corev1.HTTPGetAction, path *field.Path) {
		if h == nil {
			return
		}
		for i, hdr := range h.HTTPHeaders {
			if credential.Header(hdr.Name) {
				warn(c, path.Child("httpGet", "httpHeaders").Index(i).Child("name"), fmt.Sprintf("credential header %q is sent to", hdr.Name))
			}
		}
	}
	specPath := field.NewPath("spec")
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.containers {
			c := &list.containers[i]
			path := specPath.Child(list.field).Index(i)
			for _, p := range []struct {
				field probeField
				probe *corev1.Probe
			}{{livenessField, c.LivenessProbe}, {readinessField, c.ReadinessProbe}, {startupField, c.StartupProbe}} {
				if p.probe == nil {
					continue
				}
				pp := path.Child(string(p.field))
				headers(c, p.probe.HTTPGet, pp)
				if p.probe.Exec != nil && expandsEnv(p.probe.Exec.Command, c.Env) {
					warn(c, pp.Child("exec", "command"), "$(VAR) puts values of the container's env into this command, which runs in")
				}
			}
			if c.Lifecycle != nil {
				for _, h := range []struct {
					name    string
					handler *corev1.LifecycleHandler
				}{{"postStart", c.Lifecycle.PostStart}, {"preStop", c.Lifecycle.PreStop}} {
					if h.handler != nil {
						headers(c, h.handler.HTTPGet, path.Child("lifecycle", h.name))
					}
				}
			}
		}
	}
	return out
}
