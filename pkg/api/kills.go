package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// KillController is the node's restart budget and pause
// (restart.Restarter): read by GET /api/v1/kills, changed by POST
// /api/v1/kills/pause and /api/v1/kills/resume.
type KillController interface {
	Kills() restart.KillsStatus
	PauseKills(ctx context.Context, by, reason string) (restart.KillsStatus, error)
	ResumeKills(ctx context.Context, by string) (restart.KillsStatus, error)
}

var _ KillController = (*restart.Restarter)(nil)

// PauseRequest is the body of POST /api/v1/kills/pause (optional fields).
type PauseRequest struct {
	// Reason is told in the KillsPaused event and the status (at most
	// MaxPauseReason bytes).
	Reason string `json:"reason,omitempty"`
}

// MaxPauseReason bounds a pause's reason.
const MaxPauseReason = 256

// maxPauseBody bounds what is read of a pause's body.
const maxPauseBody = 4096

// mutationRefused is the answer to a change asked on an address where
// any local user (or a web page) could ask it.
const mutationRefused = "cri-prober: pause and resume change what the agent does, so they are served only where every client is vetted: " +
	"on a unix socket (run --listen unix:///run/cri-prober/api.sock, or the systemd socket unit) or behind --web.config.file (TLS, basic auth). " +
	"This address is open to any local user.\n"

func (s *Server) getKills(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.kills.Kills())
}

// changeKills serves POST /api/v1/kills/{pause,resume}: only on a vetted
// listener, only with a JSON body (a web page cannot send one to another
// origin without a CORS preflight, which the API never grants).
func (s *Server) changeKills(vetted, pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !vetted {
			http.Error(w, mutationRefused, http.StatusForbidden)
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			http.Error(w, "cri-prober: send Content-Type: application/json (a JSON object, {} for none)", http.StatusUnsupportedMediaType)
			return
		}
		var req PauseRequest
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPauseBody+1))
		if err == nil && len(body) > maxPauseBody {
			err = fmt.Errorf("over %d bytes", maxPauseBody)
		}
		if err == nil && len(body) > 0 {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, "cri-prober: the body is not a JSON object such as {\"reason\": \"maintenance\"}: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.Reason) > MaxPauseReason {
			http.Error(w, fmt.Sprintf("cri-prober: reason is %d bytes: at most %d", len(req.Reason), MaxPauseReason), http.StatusBadRequest)
			return
		}
		by := requester(r)
		var st restart.KillsStatus
		if pause {
			st, err = s.kills.PauseKills(r.Context(), by, bounded.String(Printable(req.Reason), MaxPauseReason))
		} else {
			st, err = s.kills.ResumeKills(r.Context(), by)
		}
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Kill pause", "pause", pause, "by", by)
			http.Error(w, "cri-prober: "+err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

// requester says who sent r, for the audit: the basic-auth user the web
// configuration let through, else the peer's uid on a unix socket, and
// the remote address.
func requester(r *http.Request) string {
	if user, _, ok := r.BasicAuth(); ok {
		return "user " + strconv.Quote(bounded.String(user, 64)) + " from " + r.RemoteAddr
	}
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		if uid, ok := peerUID(c.Conn); ok {
			return "uid " + strconv.FormatUint(uint64(uid), 10) + " (unix socket)"
		}
	}
	if r.RemoteAddr == "" || r.RemoteAddr == "@" {
		return "a client of the unix socket"
	}
	return r.RemoteAddr
}

// peerUID is the uid of a unix socket's peer (SO_PEERCRED).
func peerUID(c net.Conn) (uint32, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, false
	}
	return cred.Uid, true
}
