// Package imagegc is kubelet's image garbage collector
// (pkg/kubelet/images/image_gc_manager.go, started by kubelet.go's
// StartGarbageCollection): every 5 minutes it lists the runtime's images
// and the images its containers use, keeps in memory when it first saw
// each image and when it last saw one in use, removes unused images not
// seen in use for longer than the maximum age, and, when the image
// filesystem is used at or above the high threshold, removes the least
// recently used images down to the low threshold, none younger than the
// minimum age, never a pinned one or the runtime's sandbox image.
//
// The decisions are pure functions over values (plan.go: Detect,
// EvictionOrder, TooOld, SpaceGoal, Freeable), tested as kubelet's own
// tests; Manager carries them out through CRI (manager.go) and Run is its
// loop. The image filesystem is measured as kubelet's CRI stats provider
// measures it: CRI ImageFsInfo says where the images live, and statfs of
// that mountpoint gives its capacity and what is available (fs.go).
//
// It imports pkg/cri (the runtime's types) and pkg/events (its events)
// only; pkg/agent wires it in.
package imagegc
