package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

// follow reads what is written after the end of the file until the
// container no longer runs and the file is read to its end, or ctx is
// done. Writes wake it through inotify (else it looks every pollPeriod);
// it asks whether the container runs every checkPeriod, and at once when
// the runtime closed the file (as it does when the container's output
// ends), so that an exit ends the follow in well under a second.
func (s *session) follow(ctx context.Context, r Reader, running Running) error {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var w *watcher
	if !r.poll {
		var err error
		if w, err = watch(filepath.Dir(s.path), filepath.Base(s.path)); err != nil {
			s.logger.V(2).Info("Looking at the log file periodically: inotify is not available", "err", err, "period", pollPeriod)
		} else {
			defer w.close()
		}
	}

	var lastCheck time.Time
	exited := false
	for {
		if err := s.drain(ctx); err != nil {
			return err
		}
		if exited {
			return nil // read to the end after the container stopped: nothing more comes
		}
		switch rotated, err := s.reopenIfReplaced(ctx); {
		case err != nil:
			return err
		case rotated:
			continue
		}
		if lastCheck.IsZero() || clk.Since(lastCheck) >= checkPeriod || w.closedByWriter() {
			run := false
			if running != nil {
				var err error
				if run, err = running(ctx); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("ask whether the container still runs: %w", err)
				}
			}
			lastCheck = clk.Now()
			if !run {
				exited = true // read once more what it wrote before it stopped
				continue
			}
		}

		wait := checkPeriod - clk.Since(lastCheck)
		if w == nil {
			wait = min(wait, pollPeriod)
		}
		t := clk.NewTimer(wait)
		if r.waiting != nil {
			r.waiting()
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.events():
			t.Stop()
		case <-t.C():
		}
	}
}

// reopenIfReplaced switches to the file now at the path when the one read
// was rotated away (kubelet renames it to 0.log.<time> and the runtime
// creates a new one) after reading the old one to its end, and starts
// over a file truncated under the reader. It reports whether it did
// either.
func (s *session) reopenIfReplaced(ctx context.Context) (bool, error) {
	cur, err := s.f.Stat()
	if err != nil {
		return false, err
	}
	if cur.Size() < s.off {
		s.logger.Info("The log file was truncated; reading it again from its start", "offset", s.off, "size", cur.Size())
		if _, err := s.f.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		s.restart(s.f)
		return true, nil
	}
	now, err := os.Stat(s.path)
	if err != nil || os.SameFile(cur, now) {
		return false, nil // none at the path (between the rename and the new file, or removed): stay on this one
	}
	// What the runtime wrote before it reopened is in the old file.
	if err := s.drain(ctx); err != nil {
		return false, err
	}
	f, err := openLog(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.logger.V(2).Info("The log file was rotated; reading the new one")
	s.f.Close()
	s.restart(f)
	return true, nil
}

// restart reads f from its start: a record the old file ended inside
// ends there; a line continued in partial records goes on in the new one.
func (s *session) restart(f *os.File) {
	s.finish()
	s.f, s.off = f, 0
	s.br.Reset(f)
	s.inBody, s.skipping = false, false
	s.cut = [2]int64{-1, -1} // --tail spoke of the old file
}
