package logs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// TestLinkName is kubelet's logSymlink (legacy_test.go's rows).
func TestLinkName(t *testing.T) {
	name, err := LinkName("shop", "web-node1", "app", "0123456789ab")
	require.NoError(t, err)
	assert.Equal(t, "web-node1_shop_app-0123456789ab.log", name)
	long, err := LinkName("ns", strings.Repeat("p", 300), "c", "id")
	require.NoError(t, err)
	assert.Len(t, long, 255)
	assert.True(t, strings.HasSuffix(long, "pppp.log"))
	for _, bad := range [][4]string{
		{"ns", "../../../etc/planted", "c", "id"}, {"ns/x", "pod", "c", "id"}, {"ns", "pod", "..", "id"},
		{"ns", "pod", "c", "."}, {"", "pod", "c", "id"}, {"ns", "pod", "c\x00", "id"},
	} {
		_, err := LinkName(bad[0], bad[1], bad[2], bad[3])
		assert.Error(t, err, "%q", bad)
	}
}

// Names from the runtime, which any CRI client sets, never place or
// remove a file outside the link directory (a pod named
// ../../../etc/planted).
func TestLinkNameTraversal(t *testing.T) {
	root := t.TempDir()
	linkDir := filepath.Join(root, "var", "log", "containers")
	victimDir := filepath.Join(root, "etc")
	require.NoError(t, os.MkdirAll(linkDir, 0o755))
	require.NoError(t, os.MkdirAll(victimDir, 0o755))
	writeFiles(t, root, map[string]string{"0.log": "x"})
	inst := &cri.Container{ID: "abc", Name: "c", LogPath: filepath.Join(root, "0.log")}
	l := Links{Dir: linkDir, Root: root}
	pod := "../../../etc/planted"
	assert.Error(t, l.Link("ns", pod, inst))
	assert.Empty(t, dirNames(t, victimDir), "no link made outside the link directory")
	writeFiles(t, victimDir, map[string]string{"planted_ns_c-abc.log": "victim"})
	assert.Error(t, l.Remove("ns", pod, &cri.Container{ID: "abc", Name: "c"}))
	assert.Equal(t, []string{"planted_ns_c-abc.log"}, dirNames(t, victimDir), "nothing removed outside it")
}

// A log path the runtime reports outside the pod logs directory (a
// sandbox another client made with /etc as its log directory) is neither
// removed nor linked, nor is one reached through a link under it.
func TestRemoveOnlyUnderThePodLogsDir(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "pods")
	etc := filepath.Join(root, "etc")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	require.NoError(t, os.MkdirAll(etc, 0o755))
	writeFiles(t, etc, map[string]string{"shadow": "root:x", "shadow.bak": "root:x", "passwd": "root:x"})
	require.NoError(t, os.Symlink(etc, filepath.Join(logs, "ns_pod_uid")))
	l := Links{Root: logs, Dir: filepath.Join(root, "containers")}
	for _, p := range []string{filepath.Join(etc, "shadow"), filepath.Join(logs, "..", "etc", "shadow"), filepath.Join(logs, "ns_pod_uid", "shadow"), logs + "/ns_pod_uid/../../etc/shadow"} {
		assert.Error(t, l.Remove("ns", "pod", &cri.Container{ID: "x", Name: "c", LogPath: p}), p)
		assert.Error(t, l.Link("ns", "pod", &cri.Container{ID: "x", Name: "c", LogPath: p}), p)
	}
	assert.Equal(t, []string{"passwd", "shadow", "shadow.bak"}, dirNames(t, etc))
	assert.NoDirExists(t, l.Dir)
}

// With a negative containerLogMaxSize (kubelet's stub log manager) the
// log files stay at a removal; the link goes.
func TestRemoveKeepFiles(t *testing.T) {
	logDir, linkDir := t.TempDir(), t.TempDir()
	writeFiles(t, logDir, map[string]string{"0.log": "x"})
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: filepath.Join(logDir, "0.log")}
	l := Links{Dir: linkDir, Root: os.TempDir(), KeepFiles: true}
	require.NoError(t, l.Link("ns", "pod", inst))
	require.NoError(t, l.Remove("ns", "pod", inst))
	assert.Equal(t, []string{"0.log"}, dirNames(t, logDir))
	assert.Empty(t, dirNames(t, linkDir))
}

func TestLinkAndRemove(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "ns_pod_uid", "app")
	require.NoError(t, os.MkdirAll(logDir, 0o755))
	linkDir := filepath.Join(t.TempDir(), "containers") // made by Link
	log := filepath.Join(logDir, "0.log")
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: log}
	links := Links{Dir: linkDir, Root: os.TempDir()}
	linkPath := filepath.Join(linkDir, "pod_ns_app-abc.log")

	require.NoError(t, links.Link("ns", "pod", inst))
	_, err := os.Lstat(linkPath)
	assert.ErrorIs(t, err, os.ErrNotExist, "no link before the log file exists")

	writeFiles(t, logDir, map[string]string{"0.log": "x", "0.log.20260101-000000.gz": "y", "0.log.20260101-000001": "z", "1.log": "other", "0.logx": "not a rotation"})
	require.NoError(t, links.Link("ns", "pod", inst))
	target, err := os.Readlink(linkPath)
	require.NoError(t, err)
	assert.Equal(t, log, target)
	require.NoError(t, links.Link("ns", "pod", inst), "linking again replaces the link")

	require.NoError(t, links.Remove("ns", "pod", inst))
	assert.Equal(t, []string{"0.logx", "1.log"}, dirNames(t, logDir))
	assert.Empty(t, dirNames(t, linkDir))
	require.NoError(t, links.Remove("ns", "pod", inst), "removing twice is no error")
}

// A link planted at the link's path is replaced, never followed; one
// planted among an instance's log files is removed, its target kept.
func TestLinkPlanted(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	writeFiles(t, outside, map[string]string{"secret": "keep"})
	logDir := t.TempDir()
	linkDir := t.TempDir()
	log := filepath.Join(logDir, "0.log")
	writeFiles(t, logDir, map[string]string{"0.log": "x"})
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: log}
	linkPath := filepath.Join(linkDir, "pod_ns_app-abc.log")
	require.NoError(t, os.Symlink(secret, linkPath))
	require.NoError(t, os.Symlink(secret, log+".20260101-000000"))

	links := Links{Dir: linkDir, Root: os.TempDir()}
	require.NoError(t, links.Link("ns", "pod", inst))
	target, err := os.Readlink(linkPath)
	require.NoError(t, err)
	assert.Equal(t, log, target)

	require.NoError(t, links.Remove("ns", "pod", inst))
	assert.Empty(t, dirNames(t, logDir))
	assert.Empty(t, dirNames(t, linkDir))
	content, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(content))

	// The link directory itself a link: refused.
	real := t.TempDir()
	linked := filepath.Join(t.TempDir(), "containers")
	require.NoError(t, os.Symlink(real, linked))
	writeFiles(t, logDir, map[string]string{"0.log": "x"})
	assert.Error(t, Links{Dir: linked, Root: os.TempDir()}.Link("ns", "pod", inst))
	assert.Empty(t, dirNames(t, real))
}

func TestLinkDisabled(t *testing.T) {
	logDir := t.TempDir()
	writeFiles(t, logDir, map[string]string{"0.log": "x"})
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: filepath.Join(logDir, "0.log")}
	require.NoError(t, Links{Root: os.TempDir()}.Link("ns", "pod", inst))
	require.NoError(t, Links{Root: os.TempDir()}.Remove("ns", "pod", inst))
	assert.Empty(t, dirNames(t, logDir), "the log files go even without links")
}

// A link whose log file under the pod logs directory is gone (its instance
// removed by another client, or while the agent was down) is removed;
// one whose file exists, one pointing outside the pod logs directory (a
// kubelet's) and what is not a link stay.
func TestPruneDangling(t *testing.T) {
	root, dir, other := t.TempDir(), t.TempDir(), t.TempDir()
	live, gone := filepath.Join(root, "ns_p_u", "c", "1.log"), filepath.Join(root, "ns_p_u", "c", "0.log")
	require.NoError(t, os.MkdirAll(filepath.Dir(live), 0o755))
	require.NoError(t, os.WriteFile(live, nil, 0o640))
	require.NoError(t, os.Symlink(live, filepath.Join(dir, "p_ns_c-live.log")))
	require.NoError(t, os.Symlink(gone, filepath.Join(dir, "p_ns_c-gone.log")))
	require.NoError(t, os.Symlink(filepath.Join(other, "0.log"), filepath.Join(dir, "k_ns_c-kubelets.log")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain.log"), nil, 0o644))

	n, err := Links{Dir: dir, Root: root}.PruneDangling()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"p_ns_c-live.log", "k_ns_c-kubelets.log", "plain.log"}, names)
}
