package podfs

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestWriteHosts(t *testing.T) {
	m, _ := newTestManager(t)
	if _, err := m.WriteHosts("u1", []byte("x")); err == nil {
		t.Error("wrote the hosts file of a pod that has no directory")
	}
	owned(t, m, "u1")
	path, err := m.WriteHosts("u1", []byte("127.0.0.1\tlocalhost\n10.0.0.1\tweb\n"))
	if err != nil {
		t.Fatal(err)
	}
	if path != m.Layout().EtcHosts("u1") {
		t.Errorf("path %s", path)
	}
	if got := mode(t, path); got != 0o644 {
		t.Errorf("mode %v, want -rw-r--r--", got)
	}
	before, _ := os.Stat(path)
	// Shorter content: rewritten in place, same inode (bind-mounted files
	// keep theirs), cut to the new length.
	if _, err := m.WriteHosts("u1", []byte("short\n")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("the hosts file was replaced, not rewritten: a running container would not see the change")
	}
	if data, _ := os.ReadFile(path); string(data) != "short\n" {
		t.Errorf("content %q", data)
	}

	// A link planted there is not written through.
	other := filepath.Join(t.TempDir(), "victim")
	writeFile(t, other, "keep")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteHosts("u1", []byte("evil")); err == nil {
		t.Error("wrote through a link")
	}
	if data, _ := os.ReadFile(other); string(data) != "keep" {
		t.Errorf("the link's target was changed: %q", data)
	}
}

func TestNodeHosts(t *testing.T) {
	node := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, node, "127.0.0.1 localhost\n192.168.1.5 node1\n")
	got, err := NodeHosts(node, corev1.HostAlias{IP: "10.1.2.3", Hostnames: []string{"foo", "foo.local"}}, corev1.HostAlias{IP: "10.1.2.4", Hostnames: []string{"bar"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file (host network).\n" +
		"127.0.0.1 localhost\n192.168.1.5 node1\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.1.2.3\tfoo\tfoo.local\n" +
		"10.1.2.4\tbar\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got, _ = NodeHosts(node)
	if string(got) != "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.1.5 node1\n" {
		t.Errorf("without aliases: %q", got)
	}
	if _, err := NodeHosts(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing node file: %v", err)
	}
}

func TestManagedHosts(t *testing.T) {
	base := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n"
	for _, tc := range []struct {
		ips     []string
		domain  string
		aliases []corev1.HostAlias
		want    string
	}{
		{[]string{"10.0.0.2"}, "", nil, base + "10.0.0.2\tweb\n"},
		{[]string{"10.0.0.2", "fd00::2"}, "sub.ns.svc.cluster.local", nil,
			base + "10.0.0.2\tweb.sub.ns.svc.cluster.local\tweb\nfd00::2\tweb.sub.ns.svc.cluster.local\tweb\n"},
		{nil, "", []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"a"}}}, base + "\n# Entries added by HostAliases.\n1.2.3.4\ta\n"},
	} {
		if got := string(ManagedHosts(tc.ips, "web", tc.domain, tc.aliases)); got != tc.want {
			t.Errorf("got\n%s\nwant\n%s", got, tc.want)
		}
	}
}

func TestTerminationMessageFile(t *testing.T) {
	m, _ := newTestManager(t)
	if _, err := m.TerminationMessageFile("u1", "app"); err == nil {
		t.Error("made a file for a pod that has no directory")
	}
	owned(t, m, "u1")
	seen := map[string]bool{}
	for range 3 {
		path, err := m.TerminationMessageFile("u1", "app")
		if err != nil {
			t.Fatal(err)
		}
		dir, name := filepath.Split(path)
		if filepath.Clean(dir) != m.Layout().ContainerDir("u1", "app") {
			t.Errorf("file %s not in the container's dir", path)
		}
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(name) {
			t.Errorf("name %q is not makeUID's", name)
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o666 || fi.Size() != 0 {
			t.Errorf("file mode %v size %d, want an empty -rw-rw-rw-", fi.Mode(), fi.Size())
		}
		if seen[name] {
			t.Errorf("name %s given twice", name)
		}
		seen[name] = true
	}
	if got := mode(t, m.Layout().ContainerDir("u1", "app")); got.Perm() != 0o750&^umask(t) {
		t.Errorf("container dir mode %v", got)
	}
	if _, err := m.TerminationMessageFile("u1", "../x"); err == nil {
		t.Error("a container name with a slash was accepted")
	}
	// A link planted for the containers dir is not followed.
	owned(t, m, "u2")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(m.Layout().PodDir("u2"), "containers")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TerminationMessageFile("u2", "app"); !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("through a link: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Error("made a file through a link")
	}
}
