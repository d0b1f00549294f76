# cri-prober. On a fresh machine, as root:
#   make demo   the private containerd, a demo pod and what cri-prober sees
#   make test   everything: lint, unit tests (-race), fuzzers (briefly), e2e on real containerd
#   make bench  benchmarks, the load harness and the node cases (~10 min, optional; BENCH_RUNS=3,
#               BENCH_* sizes: hack/bench.sh); writes docs/performance.md
#   make soak   10 minutes of flapping targets; writes docs/reliability.md
#   make bench-kubelet  the same 10 pods under a real kubelet, then cri-prober (optional,
#               not part of make test; ~3 min a run, BENCH_KUBELET_RUNS=3); writes docs/performance.md
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
GOFILES = $(shell find cmd pkg test hack -name '*.go')

.PHONY: build test test-unit test-soak test-e2e lint fuzz bench bench-kubelet soak demo demo-down crictl clean

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/cri-prober ./cmd/cri-prober

test: lint test-unit fuzz test-soak test-e2e

test-unit:
	$(GO) test -race -count=1 ./...

# The soak's short variant on the fake runtime (make soak: the long one).
test-soak:
	$(GO) test -tags soak -count=1 -timeout 10m -run '^TestSoak$$' ./test/soak -args -duration $${SOAK_DURATION:-1m}

# Starts a private containerd, runs the e2e tests, and stops and cleans it
# up whatever happens. Pass go test flags with E2E_FLAGS="-run TestExit".
test-e2e: build
	hack/e2e.sh $(E2E_FLAGS)

lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/...
	$(GO) vet -tags bench ./test/bench/...
	$(GO) vet -tags soak ./test/soak/...
	hack/verify-imports.sh

# Every fuzz target for FUZZTIME each (make test: 5s).
fuzz:
	FUZZTIME=$${FUZZTIME:-5s} hack/fuzz.sh

bench:
	hack/bench.sh

# Beside a real kubelet (issue 15): builds kubelet from the Go module proxy
# once, measures both on one private containerd. Not part of make test.
bench-kubelet: build
	hack/bench-kubelet.sh

soak:
	hack/soak.sh

demo: build
	hack/demo.sh

demo-down:
	hack/containerd-down.sh

crictl:
	@hack/crictl.sh

clean: demo-down
	rm -rf bin
