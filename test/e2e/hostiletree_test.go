//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// A completed pod's emptyDir holding a tree its container made deeper than
// the agent may open descriptors is torn down all the same (kubelet
// v1.36.3's os.RemoveAll holds one descriptor per level, as today's agent
// did: the teardown failed with EMFILE, again at every collection, and
// starved the agent's other goroutines of descriptors meanwhile). The
// agent runs in this process, whose descriptor limit the test lowers
// under the tree's depth: it runs alone (not parallel) for that.
func TestCompletedPodDeepTreeTornDown(t *testing.T) {
	const limit, depth = 1024, 2000
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	if old.Cur > limit {
		require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: old.Max}))
		t.Cleanup(func() { require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &old)) })
	}
	c := dial(t)
	o := startCollectingOwner(t, c)
	name := uniqueName("gc-deep")
	o.write(t, "deep.yaml", ownedManifest(name, `  restartPolicy: Never
  volumes:
  - {name: scratch, emptyDir: {}}
  containers:
  - name: task
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: [sh, -c, "cd /scratch && i=0 && while [ $i -lt `+strconv.Itoa(depth)+` ]; do mkdir d && cd -P d || exit 1; i=$((i+1)); done && echo x > f"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
`))
	var uid string
	eventually(t, 60*time.Second, "the job Succeeded", func() bool {
		r, ok := o.report(name)
		uid = r.UID
		return ok && r.Phase == corev1.PodSucceeded
	})
	scratch := filepath.Join(o.rootDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "scratch")
	eventually(t, 30*gcPeriod, "the deep tree removed", func() bool {
		_, err := os.Lstat(filepath.Join(scratch, "d"))
		return os.IsNotExist(err)
	})
}
