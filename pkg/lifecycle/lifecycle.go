// Package lifecycle runs containers' postStart and preStop handlers (exec,
// httpGet and sleep) as kubelet's lifecycle handler runner does.
package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// UserAgent is what HTTP hooks send: kubelet's "kube-lifecycle/<version>".
const UserAgent = "kube-lifecycle/" + spec.KubeletMinorVersion

// maxHeaderBytes bounds a hook response's headers.
const maxHeaderBytes = 64 * 1024

// Execer runs a command in a container and waits for it with no deadline
// of its own, as kubelet runs hook commands (cri.Client.RunInContainer).
type Execer interface {
	RunInContainer(ctx context.Context, containerID string, cmd []string) (*runtimeapi.ExecSyncResponse, error)
}

// Target is the container a handler runs for.
type Target struct {
	ContainerID string
	// Container gives named ports for httpGet.
	Container *spec.Container
	// PodIP is where httpGet goes when the handler names no host.
	PodIP string
	// OnHTTPFallback, if set, is told when an HTTPS hook was answered over
	// plain HTTP and retried that way (kubelet's LifecycleHTTPFallback).
	OnHTTPFallback func(host string)
}

// Runner runs lifecycle handlers.
type Runner struct {
	exec   Execer
	client *http.Client
	after  func(time.Duration) <-chan time.Time
}

// NewRunner returns a runner that executes commands through exec.
func NewRunner(exec Execer) *Runner {
	return &Runner{
		exec: exec,
		// kubelet's insecureContainerLifecycleHTTPClient: no verification,
		// same-host redirects only, no timeout but the caller's context.
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:                  nil,
				TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet does not verify hook targets.
				DisableKeepAlives:      true,
				MaxResponseHeaderBytes: maxHeaderBytes,
			},
			CheckRedirect: probe.SameHostRedirects,
		},
		after: time.After,
	}
}

// Run runs handler h for t until it ends or ctx is done. It returns
// kubelet's message for a failure (for logs; kubelet keeps it out of events
// so that secrets do not leak) and the error.
func (r *Runner) Run(ctx context.Context, h *corev1.LifecycleHandler, t Target) (string, error) {
	switch {
	case h.Exec != nil:
		resp, err := r.exec.RunInContainer(ctx, t.ContainerID, h.Exec.Command)
		var output string
		if resp != nil {
			output = bounded.String(string(resp.GetStdout())+string(resp.GetStderr()), bounded.Output)
			if err == nil && resp.GetExitCode() != 0 {
				err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), resp.GetExitCode(), bounded.String(string(resp.GetStderr()), bounded.Message))
			}
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q failed - error: %v, message: %q", h.Exec.Command, t.Container.Name, err, output), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := r.runHTTP(ctx, h.HTTPGet, t); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q failed - error: %v", h.HTTPGet.Path, t.Container.Name, err), err
		}
		return "", nil
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q failed - error: %v", h.Sleep.Seconds, t.Container.Name, err), err
		case <-r.after(time.Duration(h.Sleep.Seconds) * time.Second):
			return "", nil
		}
	default:
		// kubelet fails a tcpSocket handler (kept in the API for backward
		// compatibility only) every time.
		err := fmt.Errorf("invalid handler: %v", h)
		return fmt.Sprintf("Cannot run handler: %v", err), err
	}
}

// runHTTP sends the hook's request. Any response is a success (kubelet
// looks at no status code); only a failure to get one is an error.
func (r *Runner) runHTTP(ctx context.Context, h *corev1.HTTPGetAction, t Target) error {
	host := h.Host
	if host == "" {
		host = t.PodIP
	}
	if host == "" {
		return errors.New("the pod has no IP address to send the hook to")
	}
	var ports []corev1.ContainerPort
	if t.Container != nil {
		ports = t.Container.Ports
	}
	port, err := spec.ResolvePort(h.Port, ports)
	if err != nil {
		return err
	}
	headers := make(http.Header, len(h.HTTPHeaders))
	for _, hdr := range h.HTTPHeaders {
		headers.Add(hdr.Name, hdr.Value)
	}
	req, err := probe.NewRequest(strings.ToLower(string(h.Scheme)), host, port, h.Path, headers, UserAgent)
	if err != nil {
		return err
	}
	err = r.do(req.WithContext(ctx))
	if isHTTPResponseToHTTPS(err) {
		// kubelet retries over plain HTTP, without credentials.
		retry := req.Clone(ctx)
		retry.URL.Scheme = "http"
		retry.Header.Del("Authorization")
		if r.do(retry) == nil {
			if t.OnHTTPFallback != nil {
				t.OnHTTPFallback(req.URL.Host)
			}
			err = nil
		}
	}
	return err
}

func (r *Runner) do(req *http.Request) error {
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, bounded.Output)) //nolint:errcheck // the body is not judged
	return nil
}

func isHTTPResponseToHTTPS(err error) bool {
	var urlErr *url.Error
	return errors.As(err, &urlErr) && strings.Contains(urlErr.Err.Error(), "server gave HTTP response to HTTPS client")
}
