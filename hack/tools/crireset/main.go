// Command crireset stops and removes every pod sandbox of a CRI runtime,
// through CRI so that the runtime tears down each pod's network as well.
// hack/containerd-down.sh runs it against the private test containerd
// before stopping it; never point it at a runtime you care about.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

func main() {
	endpoint := flag.String("runtime-endpoint", os.Getenv(cri.EndpointEnv), "CRI endpoint to reset")
	flag.Parse()
	if err := run(*endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "crireset:", err)
		os.Exit(1)
	}
}

func run(endpoint string) error {
	if endpoint == "" {
		return fmt.Errorf("no endpoint: set --runtime-endpoint or %s", cri.EndpointEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	pods, err := c.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	var failed int
	for _, p := range pods {
		if err := c.StopPodSandbox(ctx, p.GetId()); err != nil {
			fmt.Fprintln(os.Stderr, "crireset:", err)
			failed++
			continue
		}
		if err := c.RemovePodSandbox(ctx, p.GetId()); err != nil {
			fmt.Fprintln(os.Stderr, "crireset:", err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sandboxes could not be removed", failed, len(pods))
	}
	fmt.Printf("removed %d pod sandboxes\n", len(pods))
	return nil
}
