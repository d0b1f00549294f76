package logs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// watcher wakes a follow when the log file changes: inotify on its
// directory, so that the new file of a rotation is seen being created.
// Events are hints, coalesced: the follow reads the file itself to learn
// what changed.
type watcher struct {
	file   *os.File
	name   []byte
	wake   chan struct{}
	closed atomic.Bool // the runtime closed the file after writing: the container's output may have ended
	done   chan struct{}
}

const watchMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

func watch(dir, name string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err) // EMFILE: fs.inotify.max_user_instances reached
	}
	if _, err := unix.InotifyAddWatch(fd, dir, watchMask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, os.NewSyscallError("inotify_add_watch", err))
	}
	w := &watcher{
		// Non-blocking, so the runtime's poller owns it: close ends a read
		// in progress, and the reading goroutine with it.
		file: os.NewFile(uintptr(fd), "inotify"),
		name: []byte(name),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go w.run()
	return w, nil
}

func (w *watcher) run() {
	defer close(w.done)
	buf := make([]byte, 4096) // whole events only: the kernel never splits one
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return // closed; or broken, and the follow's timer takes over
		}
		if w.relevant(buf[:n]) {
			select {
			case w.wake <- struct{}{}:
			default: // one pending wake-up is enough
			}
		}
	}
}

// relevant reports whether events concern the log file (or the watch
// itself), noting a close after writing.
func (w *watcher) relevant(b []byte) bool {
	found := false
	for len(b) >= unix.SizeofInotifyEvent {
		mask := binary.NativeEndian.Uint32(b[4:8])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
		if end > len(b) {
			break
		}
		name := bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00")
		b = b[end:]
		switch {
		case bytes.Equal(name, w.name):
			found = true
			if mask&unix.IN_CLOSE_WRITE != 0 {
				w.closed.Store(true)
			}
		case mask&(unix.IN_Q_OVERFLOW|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
			found = true // events lost, or the directory went: look
		}
	}
	return found
}

// events delivers wake-ups (never, for no watcher).
func (w *watcher) events() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// closedByWriter reports, once, that the runtime closed the file.
func (w *watcher) closedByWriter() bool { return w != nil && w.closed.Swap(false) }

// close stops the watcher and waits for its goroutine.
func (w *watcher) close() {
	w.file.Close()
	<-w.done
}
