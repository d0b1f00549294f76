package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Gater sets the conditions of pods' readiness gates, which nothing else
// sets without an API server (`cri-prober gate`). by says who asks, for
// the audit event.
type Gater interface {
	SetGate(ctx context.Context, namespace, name string, t corev1.PodConditionType, status corev1.ConditionStatus, by string) (pods.GateResult, error)
	UnsetGate(ctx context.Context, namespace, name string, t corev1.PodConditionType, by string) (pods.GateResult, error)
	ListGates() (gates []pods.Gate, persistent bool)
}

// GateList is GET /api/v1/gates: every condition set with `cri-prober
// gate set`, and whether they survive the agent's restart (--state-dir).
type GateList struct {
	Persistent bool   `json:"persistent"`
	Gates      []Gate `json:"gates"`
}

// Gate is one condition set on a pod.
type Gate struct {
	Namespace          string    `json:"namespace"`
	Name               string    `json:"name"`
	UID                string    `json:"uid"`
	ConditionType      string    `json:"conditionType"`
	Status             string    `json:"status"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	By                 string    `json:"by,omitempty"`
}

// GateRequest is the body of PUT /api/v1/pods/{namespace}/{name}/gates/{condition}.
type GateRequest struct {
	Status string `json:"status"`
}

// GateAnswer is the answer of PUT and DELETE
// /api/v1/pods/{namespace}/{name}/gates/{condition}: the condition now,
// whether it changed, whether the pod declares a readiness gate of it,
// and the pod's readiness after.
type GateAnswer struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	ConditionType string `json:"conditionType"`
	// Status is the condition's status now ("" once unset), Previous the
	// one before ("": it was not set).
	Status   string `json:"status"`
	Previous string `json:"previous"`
	Changed  bool   `json:"changed"`
	// Declared: the pod's spec has a readiness gate of the condition;
	// otherwise the condition is kept and shown but does not change the
	// pod's readiness (Warning says so).
	Declared   bool   `json:"declared"`
	Ready      bool   `json:"ready"`
	Persistent bool   `json:"persistent"`
	Warning    string `json:"warning,omitempty"`
}

// maxGateRequest bounds a gate request's body.
const maxGateRequest = 4 << 10

// mutationRefused is why a request that changes the agent's state is
// refused where its client is not vetted.
const mutationRefused = "this request changes the agent's state, which is allowed only to clients the agent can name: " +
	"on a unix socket (--listen unix:///run/cri-prober/api.sock, or the systemd socket unit's /run/cri-prober/api.sock; `cri-prober` uses it by default), " +
	"or with --web.config.file requiring basic auth (basic_auth_users) or verified client certificates (client_auth_type: RequireAndVerifyClientCert); " +
	"on %s any local user (and any web page) could send it"

// requester says who sent r, for the audit, and whether the agent can
// tell: the peer's uid on a unix socket (SO_PEERCRED), the verified client
// certificate's subject, or the basic auth user the web configuration
// checked; "" when none (a plain TCP client, whoever it is).
func requester(r *http.Request, webConfigFile string) string {
	remote := r.RemoteAddr
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		if uc, ok := c.Conn.(*net.UnixConn); ok {
			if cred, err := peerCred(uc); err == nil {
				return fmt.Sprintf("uid %d (pid %d) on the unix socket", cred.Uid, cred.Pid)
			}
			return "a client of the unix socket" // 0600: the agent's user
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return fmt.Sprintf("client certificate %q from %s", r.TLS.VerifiedChains[0][0].Subject.String(), remote)
	}
	if user, _, ok := r.BasicAuth(); ok && basicAuthChecked(webConfigFile) {
		return fmt.Sprintf("user %q from %s", user, remote)
	}
	return ""
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// basicAuthChecked says whether the web configuration file has basic auth
// users, so that exporter-toolkit checked the request's password before
// it got here (read again at each request, as exporter-toolkit does).
func basicAuthChecked(webConfigFile string) bool {
	if webConfigFile == "" {
		return false
	}
	raw, err := os.ReadFile(webConfigFile)
	if err != nil {
		return false
	}
	var c struct {
		Users map[string]any `json:"basic_auth_users"`
	}
	return yaml.Unmarshal(raw, &c) == nil && len(c.Users) > 0
}

// named serves h only to a client requester can name (Go's profiles);
// to any other it is not found, as where profiling is off.
func named(webConfigFile string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if requester(r, webConfigFile) == "" {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}
}

// mutating serves h only to a client requester can name, with its name.
func mutating(webConfigFile string, h func(w http.ResponseWriter, r *http.Request, by string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		by := requester(r, webConfigFile)
		if by == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf(mutationRefused, r.Host)})
			return
		}
		h(w, r, by)
	}
}

func (s *Server) listGates(w http.ResponseWriter, _ *http.Request) {
	list, persistent := s.gates.ListGates()
	out := GateList{Persistent: persistent, Gates: make([]Gate, 0, len(list))}
	for _, g := range list {
		out.Gates = append(out.Gates, Gate{Namespace: g.Namespace, Name: g.Pod, UID: g.PodKey, ConditionType: string(g.Type), Status: string(g.Status),
			LastTransitionTime: g.LastTransitionTime, By: g.By})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setGate(w http.ResponseWriter, r *http.Request, by string) {
	var req GateRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxGateRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(`want a JSON body {"status":"True"} or {"status":"False"}: %v`, err)})
		return
	}
	status, err := pods.ParseGateStatus(req.Status)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	res, err := s.gates.SetGate(r.Context(), r.PathValue("namespace"), r.PathValue("name"), corev1.PodConditionType(r.PathValue("condition")), status, by)
	s.gateAnswer(w, r, res, err, by)
}

func (s *Server) unsetGate(w http.ResponseWriter, r *http.Request, by string) {
	res, err := s.gates.UnsetGate(r.Context(), r.PathValue("namespace"), r.PathValue("name"), corev1.PodConditionType(r.PathValue("condition")), by)
	s.gateAnswer(w, r, res, err, by)
}

func (s *Server) gateAnswer(w http.ResponseWriter, r *http.Request, res pods.GateResult, err error, by string) {
	switch {
	case errors.Is(err, pods.ErrPodNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	case errors.Is(err, pods.ErrInvalidGate):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	case errors.Is(err, pods.ErrTooManyGates):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	case err != nil:
		klog.FromContext(r.Context()).Error(err, "Cannot change a readiness gate", "by", by)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	t := r.PathValue("condition")
	out := GateAnswer{Namespace: res.Pod.Namespace, Name: res.Pod.Name, ConditionType: t, Previous: string(res.Previous),
		Changed: res.Changed, Declared: res.Declared, Ready: res.Pod.Ready, Persistent: res.Persistent}
	if r.Method == http.MethodPut {
		out.Status = string(res.Gate.Status)
	}
	if !res.Declared {
		out.Warning = fmt.Sprintf("pod %s/%s has no readiness gate %q: the condition is kept and shown, and does not change the pod's readiness (as under kubelet)",
			res.Pod.Namespace, res.Pod.Name, t)
	}
	writeJSON(w, http.StatusOK, out)
}

// ReadinessGatesText is kubectl get -o wide's READINESS GATES column: how
// many of the pod's readiness gates have their condition True, of how
// many; <none> for a pod without.
func (p Pod) ReadinessGatesText() string {
	if len(p.ReadinessGates) == 0 {
		return "<none>"
	}
	n := 0
	for _, g := range p.ReadinessGates {
		for _, c := range p.Conditions {
			if c.Type == g {
				if c.Status == string(corev1.ConditionTrue) {
					n++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", n, len(p.ReadinessGates))
}

// gateStatuses are a pod's readiness gates and whether each one's
// condition is True, for /ready.
func gateStatuses(r pods.PodReport) map[string]bool {
	if len(r.ReadinessGates) == 0 {
		return nil
	}
	out := make(map[string]bool, len(r.ReadinessGates))
	for _, g := range r.ReadinessGates {
		out[string(g)] = false
		for _, c := range r.Conditions {
			if c.Type == g {
				out[string(g)] = c.Status == corev1.ConditionTrue
				break
			}
		}
	}
	return out
}
