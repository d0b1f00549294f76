// Package manifests reads Pod manifests from the file system, as kubelet's
// pkg/kubelet/config reads its static pod path apart from the API's
// defaulting and validation: the manifest directory (--pod-manifests,
// --static-pod-path) and its watch (Dir), the files the commands are given
// by name (Load, LoadFiles) and standard input (LoadData), within the
// limits of what a manifest directory can make the agent read, and the
// trust rules a directory and its files must meet (root's or the agent's
// alone: a manifest runs commands in containers). What a file's bytes
// mean is pkg/spec's (spec.DecodeFile, spec.Combine).
//
// It imports pkg/spec and the leaf pkg/statefile (the one trust check of
// a file's owner and mode).
package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Extensions are the files a manifest directory is read from.
var Extensions = []string{".yaml", ".yml", ".json"}

func hasManifestExtension(name string) bool {
	for _, ext := range Extensions {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// LoadOption changes how manifests are read.
type LoadOption func(*loadOptions)

type loadOptions struct {
	static       *spec.Static
	keepLastGood bool
}

func loadOptionsOf(opts []LoadOption) loadOptions {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// AsStatic reads the manifests as static pods the agent makes
// (spec.Static).
func AsStatic(s spec.Static) LoadOption {
	return func(o *loadOptions) { o.static = &s }
}

// KeepLastGood keeps a static pod file's last version that loaded in force
// while a newer one does not load, as the agent always does for the
// manifests of pods others made. Without it, a static pod file that does
// not load drops its pods (they are stopped and removed), as kubelet's
// file source drops them. Only a Dir keeps versions.
func KeepLastGood() LoadOption {
	return func(o *loadOptions) { o.keepLastGood = true }
}

// loadFile reads the file path with read: a file of a manifest directory
// (listing.read), or one given by name (named, readManifest): then a
// crictl config is validated as one. Only a regular file (directly or
// through a symbolic link) of at most MaxFileSize bytes is read: the
// agent's commands read a file as the agent does. gone says whether the
// file is gone (removed since it was listed, or a dangling link): its pods
// go with it.
func loadFile(path string, read func(string) ([]byte, error), named bool, static *spec.Static) (f spec.File, gone bool) {
	data, err := read(path)
	if err != nil {
		return spec.File{Errors: []*spec.Error{{Source: path, Detail: err.Error()}}}, errors.Is(err, fs.ErrNotExist)
	}
	if named {
		return spec.DecodeNamedFile(path, data, static), false
	}
	return spec.DecodeFile(path, data, static), false
}

// LoadDir reads every manifest file of dir (see listDir). A pod
// defined twice is an error: the first definition in file-name order wins.
// What is not a manifest is not reported here: Load says what it skipped.
func LoadDir(dir string) ([]*spec.Pod, []*spec.Error) {
	r := loadDir(dir, nil)
	return r.Pods, r.Errors
}

func loadDir(dir string, static *spec.Static) *spec.Result {
	l, err := listDir(dir, static != nil)
	if err != nil {
		return &spec.Result{Errors: []*spec.Error{{Source: dir, Detail: err.Error()}}}
	}
	defer l.close()
	loaded := make([]spec.File, 0, len(l.files)+1)
	loaded = append(loaded, l.report())
	for _, path := range l.files {
		f, _ := loadFile(path, l.read, false, static)
		loaded = append(loaded, f)
	}
	return spec.Combine(loaded...)
}

// Load reads path as the agent reads --pod-manifests: a directory's
// manifest files (see listDir; other names, subdirectories, and files or
// documents that are not Pod manifests are skipped with a notice; the
// directory and its files refused as the agent refuses them), or one file
// given by name, whatever its name and owner (see readManifest). A file
// given by name that is a crictl container or pod sandbox config (JSON or
// YAML without apiVersion and kind) is validated as such
// (spec.DecodeNamedFile).
func Load(path string, opts ...LoadOption) *spec.Result {
	o := loadOptionsOf(opts)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return loadDir(path, o.static)
	}
	return spec.Combine(loadNamed(path, o.static))
}

// loadNamed reads a file given by name (see readManifest).
func loadNamed(path string, static *spec.Static) spec.File {
	if _, err := os.Stat(path); err != nil {
		return cannotRead(path, err)
	}
	f, _ := loadFile(path, readManifest, true, static)
	return f
}

// cannotRead is a file given by name that cannot be read.
func cannotRead(path string, err error) spec.File {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return spec.File{Errors: []*spec.Error{{Source: path, Detail: "cannot read it: " + err.Error()}}}
}

// LoadData reads data as one file given by name, named source in what it
// reports: `validate -f -` and `explain -f -` read standard input with it,
// as kubectl reads -f -. Data over MaxFileSize is refused.
func LoadData(source string, data []byte, opts ...LoadOption) *spec.Result {
	return spec.Combine(decodeData(source, data, loadOptionsOf(opts).static))
}

// decodeData is LoadData's file.
func decodeData(source string, data []byte, static *spec.Static) spec.File {
	if len(data) > MaxFileSize {
		return spec.File{Errors: []*spec.Error{{Source: source, Detail: errTooLarge.Error()}}}
	}
	return spec.DecodeNamedFile(source, data, static)
}

// LoadFiles reads files given by name as Load reads one, "-" being stdin
// (read as LoadData reads it), and joins their pods under a manifest
// directory's rule (spec.Combine): a pod defined twice, in one file or in
// two, is an error, the first definition in the order given winning. The
// error is standard input's that could not be read. Give it no directory:
// Load reads one as --pod-manifests.
func LoadFiles(files []string, stdin io.Reader, opts ...LoadOption) (*spec.Result, error) {
	o := loadOptionsOf(opts)
	loaded := make([]spec.File, 0, len(files))
	for _, name := range files {
		if name == "-" {
			data, err := io.ReadAll(io.LimitReader(stdin, MaxFileSize+1))
			if err != nil {
				return nil, fmt.Errorf("read standard input: %w", err)
			}
			loaded = append(loaded, decodeData(name, data, o.static))
			continue
		}
		loaded = append(loaded, loadNamed(name, o.static))
	}
	return spec.Combine(loaded...), nil
}
