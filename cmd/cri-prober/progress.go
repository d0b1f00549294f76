package main

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// progressWanted decides whether to draw a progress line on w: auto draws
// it only on a terminal, so logs of CI runs get no carriage returns.
func progressWanted(mode string, w io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto", "":
		return isTerminal(w), nil
	}
	return false, errors.New("want auto, always or never")
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressLine is one line redrawn in place, as curl and apt draw theirs.
type progressLine struct {
	w     io.Writer
	shown bool
	on    bool
	last  string
}

func newProgressLine(w io.Writer, on bool) *progressLine { return &progressLine{w: w, on: on} }

// show replaces the line with text (at most 200 bytes: a line that wraps
// cannot be redrawn).
func (p *progressLine) show(text string) {
	if !p.on {
		return
	}
	if len(text) > 200 {
		text = text[:199] + "…"
	}
	if p.shown && text == p.last {
		return // a terminal redraws nothing that did not change
	}
	io.WriteString(p.w, "\r\x1b[K"+text)
	p.shown, p.last = true, text
}

// clear erases the line, so that what follows starts on a clean one.
func (p *progressLine) clear() {
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown, p.last = false, ""
	}
}
