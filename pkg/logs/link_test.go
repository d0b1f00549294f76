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
	assert.Equal(t, "web-node1_shop_app-0123456789ab.log", LinkName("shop", "web-node1", "app", "0123456789ab"))
	long := LinkName("ns", strings.Repeat("p", 300), "c", "id")
	assert.Len(t, long, 255)
	assert.True(t, strings.HasSuffix(long, "pppp.log"))
}

func TestLinkAndRemove(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "ns_pod_uid", "app")
	require.NoError(t, os.MkdirAll(logDir, 0o755))
	linkDir := filepath.Join(t.TempDir(), "containers") // made by Link
	log := filepath.Join(logDir, "0.log")
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: log}
	links := Links{Dir: linkDir}
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

	links := Links{Dir: linkDir}
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
	assert.Error(t, Links{Dir: linked}.Link("ns", "pod", inst))
	assert.Empty(t, dirNames(t, real))
}

func TestLinkDisabled(t *testing.T) {
	logDir := t.TempDir()
	writeFiles(t, logDir, map[string]string{"0.log": "x"})
	inst := &cri.Container{ID: "abc", Name: "app", LogPath: filepath.Join(logDir, "0.log")}
	require.NoError(t, Links{}.Link("ns", "pod", inst))
	require.NoError(t, Links{}.Remove("ns", "pod", inst))
	assert.Empty(t, dirNames(t, logDir), "the log files go even without links")
}
