//go:build deploy

package deploy

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Contract: a `git describe` version becomes a Debian version that dpkg
// accepts and that sorts as the releases do.
func TestReleaseDebVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ version, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234+dirty"},
		{"v1.2.3-rc.1", "1.2.3~rc.1"},
		{"v1.2.3-rc.1-2-gabc1234", "1.2.3~rc.1.2.gabc1234"},
		{"baac71b-dirty", "0~gbaac71b+dirty"},
		{"1234567", "0~g1234567"},
		{"dev", "0~dev"},
	} {
		t.Run(c.version, func(t *testing.T) {
			t.Parallel()
			got := strings.TrimSpace(run(t, repoRoot, nil, "hack/release.sh", "--deb-version", c.version))
			if got != c.want {
				t.Errorf("%s: %s, want %s", c.version, got, c.want)
			}
			run(t, "", nil, "dpkg", "--validate-version", got)
		})
	}
	// Each sorts after the one before it.
	order := []string{"0~gbaac71b", "1.2.3~rc.1", "1.2.3~rc.1.2.gabc1234", "1.2.3", "1.2.3+4.gabc1234", "1.2.3+4.gabc1234+dirty", "1.2.4"}
	for i := 1; i < len(order); i++ {
		run(t, "", nil, "dpkg", "--compare-versions", order[i-1], "lt", order[i])
	}
}

// tarEntries lists a .tar.gz: path → header.
func tarEntries(t *testing.T, path string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[strings.TrimSuffix(hdr.Name, "/")] = hdr
	}
}

// Contract (issue 16, item 8): make release's script writes, for an
// architecture, a tar.gz of the binary, LICENSE, README and deploy/; a
// .deb with the binary in /usr/bin, the unit in /lib/systemd/system and
// the config as a conffile; the image; and SHA256SUMS that verify.
func TestRelease(t *testing.T) {
	t.Parallel()
	arch := runtime.GOARCH
	if arch != "amd64" && arch != "arm64" {
		t.Skipf("releases are made for amd64 and arm64, not %s", arch)
	}
	out := t.TempDir()
	const (
		version   = "v1.2.3-4-gabcdef0"
		debVer    = "1.2.3+4.gabcdef0"
		commitAt  = 1700000000
		commitRev = "abcdef012345"
	)
	// gzip, not xz, in the .deb: 2 s instead of 20 s, the same contents.
	run(t, repoRoot, []string{"VERSION=" + version, "COMMIT=" + commitRev, "SOURCE_DATE_EPOCH=" + strconv.Itoa(commitAt), "DEB_COMPRESSION=gzip"},
		"hack/release.sh", "--arch", arch, "--out", out)

	base := "cri-prober-" + version + "-linux-" + arch
	archive, deb, image := base+".tar.gz", "cri-prober_"+debVer+"_"+arch+".deb", base+"-image.tar"
	sums := run(t, out, nil, "sha256sum", "--check", "--strict", "SHA256SUMS")
	for _, f := range []string{archive, deb, image} {
		if !strings.Contains(sums, f+": OK") {
			t.Errorf("SHA256SUMS does not cover %s:\n%s", f, sums)
		}
	}

	t.Run("archive", func(t *testing.T) {
		entries := tarEntries(t, filepath.Join(out, archive))
		want := []string{base, base + "/cri-prober", base + "/LICENSE", base + "/README.md"}
		err := filepath.WalkDir(filepath.Join(repoRoot, "deploy"), func(path string, d fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(repoRoot, path)
			want = append(want, base+"/"+rel)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, 0, len(entries))
		for p, hdr := range entries {
			got = append(got, p)
			if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(time.Unix(commitAt, 0)) {
				t.Errorf("%s: owner %d:%d, time %v: want 0:0 and the commit's time (reproducible)", p, hdr.Uid, hdr.Gid, hdr.ModTime)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("archive holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		dir := t.TempDir()
		run(t, "", nil, "tar", "-xzf", filepath.Join(out, archive), "-C", dir)
		if got := checkBinary(t, filepath.Join(dir, base, "cri-prober")); got != version {
			t.Errorf("the archive's binary says version %s, want %s", got, version)
		}
	})

	t.Run("deb", func(t *testing.T) {
		path := filepath.Join(out, deb)
		for field, want := range map[string]string{
			"Package": "cri-prober", "Version": debVer, "Architecture": arch,
			"Depends": "", "Pre-Depends": "", // a static binary
		} {
			if got := strings.TrimSpace(run(t, "", nil, "dpkg-deb", "--field", path, field)); got != want {
				t.Errorf("%s: %q, want %q", field, got, want)
			}
		}
		for _, field := range []string{"Maintainer", "Description", "Installed-Size", "Section", "Priority"} {
			if strings.TrimSpace(run(t, "", nil, "dpkg-deb", "--field", path, field)) == "" {
				t.Errorf("no %s field", field)
			}
		}
		if got := run(t, "", nil, "dpkg-deb", "--info", path, "conffiles"); got != "/etc/cri-prober/config.yaml\n" {
			t.Errorf("conffiles %q, want /etc/cri-prober/config.yaml", got)
		}
		contents := run(t, "", nil, "dpkg-deb", "--contents", path)
		for _, want := range []string{
			"-rwxr-xr-x root/root .* ./usr/bin/cri-prober",
			"-rw-r--r-- root/root .* ./lib/systemd/system/cri-prober.service",
			"-rw-r--r-- root/root .* ./lib/systemd/system/cri-prober.socket",
			"-rw------- root/root .* ./etc/cri-prober/config.yaml",
			"drwxr-xr-x root/root .* ./etc/cri-prober/pods/",
			"./usr/share/doc/cri-prober/copyright",
			"-rw-r--r-- root/root .* ./usr/share/man/man1/cri-prober-probe.1.gz",
			"./usr/share/bash-completion/completions/cri-prober",
		} {
			if !matchLine(contents, want) {
				t.Errorf("dpkg-deb --contents: no line like %q:\n%s", want, contents)
			}
		}

		// Installed (extracted) beside the host's units, the unit verifies
		// with its ExecStart at /usr/bin and the binary there is the release's.
		root := t.TempDir()
		hostUnits(t, root)
		run(t, "", nil, "dpkg-deb", "--extract", path, root)
		if got := checkBinary(t, filepath.Join(root, "usr/bin/cri-prober")); got != version {
			t.Errorf("the .deb's binary says version %s, want %s", got, version)
		}
		checkFile(t, filepath.Join(root, "etc/cri-prober/config.yaml"), 0o600, readFile(t, "deploy/config.yaml"))
		verifyUnit(t, root)
	})

	t.Run("image", func(t *testing.T) {
		a := readImageArchive(t, filepath.Join(out, image), t.TempDir())
		if !slices.Contains(a.tags, "localhost/cri-prober:"+version) || a.arch != arch {
			t.Errorf("image tags %v, architecture %s: want localhost/cri-prober:%s for %s", a.tags, a.arch, version, arch)
		}
		if got := a.labels["org.opencontainers.image.revision"]; got != commitRev {
			t.Errorf("revision label %q, want %s", got, commitRev)
		}
	})
}

// matchLine says whether a line of text matches the pattern, where " .* "
// stands for anything between two words.
func matchLine(text, pattern string) bool {
	parts := strings.Split(pattern, " .* ")
	for _, line := range strings.Split(text, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}
