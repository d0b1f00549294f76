//go:build !linux

package logs

import "errors"

// watcher is Linux's inotify; elsewhere a follow looks every pollPeriod.
type watcher struct{}

func watch(string, string) (*watcher, error) { return nil, errors.New("inotify is Linux's") }

func (*watcher) events() <-chan struct{} { return nil }
func (*watcher) closedByWriter() bool    { return false }
func (*watcher) close()                  {}
