package logs

import (
	"slices"
	"strings"
	"time"
)

const (
	// TimestampFormat is the suffix of a rotated log file
	// (<log>.20060102-150405): kubelet's timestampFormat.
	TimestampFormat = "20060102-150405"
	// CompressSuffix ends a compressed rotated log file: kubelet's
	// compressSuffix.
	CompressSuffix = ".gz"
	// TmpSuffix ends a file being compressed: kubelet's tmpSuffix.
	TmpSuffix = ".tmp"
)

// Policy is kubelet's LogRotatePolicy: when a container's log file is
// rotated and how many of its files are kept.
type Policy struct {
	// MaxSize is the size in bytes at which the current file is rotated
	// (kubelet's containerLogMaxSize).
	MaxSize int64
	// MaxFiles is the most files kept, the current one included
	// (containerLogMaxFiles, at least 2).
	MaxFiles int
}

// Rotation is what one rotation of a log file does in its directory, in
// this order, as kubelet's rotateLog does it: remove the files left by an
// interrupted rotation (temporary files, files already compressed) and
// then the oldest rotated files beyond MaxFiles-2, compress the rotated
// files left uncompressed, rename the current file to Rotate, then have
// the runtime reopen the log. Names are the files' base names.
type Rotation struct {
	Remove   []string
	Compress []string
	// Rotate is the current file's new name (<log>.<timestamp>); "": the
	// file is not rotated.
	Rotate string
}

// Plan decides a rotation, as kubelet's processContainer and rotateLog
// do: nothing while the current file (log, its base name) holds fewer
// than policy.MaxSize bytes, else the rotation at now. rotated are the
// base names of the regular files beside it named <log>.* (kubelet's
// glob), in any order.
func Plan(log string, size int64, rotated []string, policy Policy, now time.Time) Rotation {
	if size < policy.MaxSize {
		return Rotation{}
	}
	inuse, unused := filterUnused(rotated)
	r := Rotation{Remove: unused}
	// The runtime writes a new file and the current one is rotated: other
	// than those two, at most MaxFiles-2 rotated files, the oldest removed
	// first, so that a reader of the newer ones is not disturbed.
	slices.Sort(inuse)
	excess := max(len(inuse)-max(policy.MaxFiles-2, 0), 0)
	r.Remove = append(r.Remove, inuse[:excess]...)
	for _, l := range inuse[excess:] {
		if !strings.HasSuffix(l, CompressSuffix) {
			r.Compress = append(r.Compress, l)
		}
	}
	r.Rotate = log + "." + now.Format(TimestampFormat)
	return r
}

// filterUnused splits rotated files into those in use and those an
// interrupted rotation left: temporary files, and files whose compressed
// copy exists (kubelet's filterUnusedLogs).
func filterUnused(logs []string) (inuse, unused []string) {
	for _, l := range logs {
		if isInUse(l, logs) {
			inuse = append(inuse, l)
		} else {
			unused = append(unused, l)
		}
	}
	return inuse, unused
}

func isInUse(l string, logs []string) bool {
	switch {
	case strings.HasSuffix(l, TmpSuffix):
		return false
	case strings.HasSuffix(l, CompressSuffix):
		return true
	}
	return !slices.Contains(logs, l+CompressSuffix)
}

// InUse are the rotated files of a log that hold its older lines, oldest
// first (kubelet's GetAllLogs without the current file): what a reader
// reads before the current file.
func InUse(rotated []string) []string {
	inuse, _ := filterUnused(rotated)
	slices.Sort(inuse)
	return inuse
}
