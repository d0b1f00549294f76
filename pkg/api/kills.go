package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
)

// KillController is the node's restart budget and pause
// (killbudget.Budget): read by GET /api/v1/kills, changed by POST
// /api/v1/kills/pause and /api/v1/kills/resume.
type KillController interface {
	Kills() killbudget.Status
	PauseKills(ctx context.Context, by, reason string) (killbudget.Status, error)
	ResumeKills(ctx context.Context, by string) (killbudget.Status, error)
}

var _ KillController = (*killbudget.Budget)(nil)

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

func (s *Server) getKills(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.kills.Kills())
}

// changeKills serves POST /api/v1/kills/{pause,resume}: only on a vetted
// listener, only with a JSON body (a web page cannot send one to another
// origin without a CORS preflight, which the API never grants).
func (s *Server) changeKills(pause bool) func(w http.ResponseWriter, r *http.Request, by string) {
	return func(w http.ResponseWriter, r *http.Request, by string) {
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
		var st killbudget.Status
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
