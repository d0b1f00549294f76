// Command mkimage builds a single-layer container image from local files and
// writes it as an image archive that `ctr images import` accepts. No registry
// is reachable on the machines the project runs on, so every test image is
// made this way: busybox-static for shell images and the pause image, and
// static Go binaries for test targets and for cri-prober's own image (make
// image), which is the static binary alone on an empty base.
//
//	mkimage -o busybox.tar -name localhost/busybox:test \
//	    -busybox /usr/bin/busybox -entrypoint '["/bin/sh"]'
//	mkimage -o cri-prober.tar -name localhost/cri-prober:latest -name localhost/cri-prober:v1.2.3 \
//	    -file bin/cri-prober=/usr/bin/cri-prober -entrypoint '["/usr/bin/cri-prober"]' \
//	    -label org.opencontainers.image.version=v1.2.3 -arch arm64
//
// The output is reproducible: the same inputs give the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	out := fs.String("o", "", "output archive `path` (required)")
	arch := fs.String("arch", runtime.GOARCH, "the image's `architecture` (GOARCH): what its binaries are built for")
	busybox := fs.String("busybox", "", "static busybox `binary` to install as /bin/busybox with a symlink per applet")
	entrypoint := fs.String("entrypoint", "", "entrypoint as a JSON array")
	cmd := fs.String("cmd", "", "command as a JSON array")
	var refs, files, env, labels listFlag
	fs.Var(&refs, "name", "image `reference`, e.g. localhost/busybox:test (required; repeatable: one archive, several tags)")
	fs.Var(&files, "file", "`SRC=DST` file to add (repeatable)")
	fs.Var(&env, "env", "`NAME=VALUE` for the image config (repeatable; default PATH=/bin)")
	fs.Var(&labels, "label", "`KEY=VALUE` label of the image config, e.g. org.opencontainers.image.version=v1.2.3 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || len(refs) == 0 {
		return errors.New("-o and -name are required")
	}
	tags := make([]name.Tag, 0, len(refs))
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image name %q: %w", ref, err)
		}
		tags = append(tags, tag)
	}

	var entries []entry
	if *busybox != "" {
		bb, err := busyboxEntries(*busybox)
		if err != nil {
			return err
		}
		entries = append(entries, bb...)
	}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("-file %q: want SRC=DST", f)
		}
		e, err := fileEntry(src, dst)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	layerTar, err := buildTar(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("add layer: %w", err)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", *arch
	cfg.Config.Env = env
	if len(cfg.Config.Env) == 0 {
		cfg.Config.Env = []string{"PATH=/bin"}
	}
	if cfg.Config.Entrypoint, err = jsonList("entrypoint", *entrypoint); err != nil {
		return err
	}
	if cfg.Config.Cmd, err = jsonList("cmd", *cmd); err != nil {
		return err
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q: want KEY=VALUE", l)
		}
		if cfg.Config.Labels == nil {
			cfg.Config.Labels = map[string]string{}
		}
		cfg.Config.Labels[k] = v
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	byRef := make(map[name.Reference]v1.Image, len(tags))
	for _, tag := range tags {
		byRef[tag] = img
	}
	if err := tarball.MultiRefWriteToFile(*out, byRef); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	return nil
}

func jsonList(flagName, v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return nil, fmt.Errorf("-%s %q: want a JSON array of strings: %w", flagName, v, err)
	}
	return l, nil
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func fileEntry(src, dst string) (entry, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return entry{}, fmt.Errorf("read %s: %w", src, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return entry{}, err
	}
	return entry{
		hdr:  tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path.Clean(dst), "/"), Mode: int64(fi.Mode().Perm()), Size: int64(len(data))},
		data: data,
	}, nil
}

// busyboxEntries installs the binary as /bin/busybox with one symlink per
// applet, the layout busybox's own installer makes.
func busyboxEntries(bin string) ([]entry, error) {
	e, err := fileEntry(bin, "/bin/busybox")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets of %s: %w", bin, err)
	}
	entries := []entry{e}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" {
			continue
		}
		entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777}})
	}
	return entries, nil
}

// buildTar writes the base directories and entries in a stable order with
// zero timestamps, so that equal inputs give equal digests.
func buildTar(entries []entry) ([]byte, error) {
	dirs := map[string]int64{"bin": 0o755, "etc": 0o755, "tmp": 0o1777, "proc": 0o555, "sys": 0o555, "dev": 0o755, "var": 0o755, "var/www": 0o755}
	for _, e := range entries {
		for d := path.Dir(e.hdr.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	all := make([]entry, 0, len(names)+len(entries)+2)
	for _, d := range names {
		all = append(all, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: dirs[d]}})
	}
	passwd := []byte("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
	group := []byte("root:x:0:\nnogroup:x:65534:\n")
	all = append(all,
		entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))}, data: passwd},
		entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644, Size: int64(len(group))}, data: group},
	)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].hdr.Name < entries[j].hdr.Name })
	all = append(all, entries...)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		hdr := e.hdr
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", hdr.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
