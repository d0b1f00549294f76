# cri-prober. On a fresh machine, as root:
#   make demo   the private containerd, a demo pod and what cri-prober sees
#   make test   everything: lint, unit tests (-race), the deploy files, fuzzers (briefly), e2e on real containerd;
#               ends with each stage's wall time and the slowest tests (go test -json kept in
#               TEST_TIMINGS_DIR=bin/test-timings, earlier runs in /var/tmp/cri-prober-test-timings)
#   make bench  benchmarks, the load harness and the node cases (~10 min, optional; BENCH_RUNS=3,
#               BENCH_* sizes: hack/bench.sh); writes docs/performance.md
#   make soak   10 minutes of flapping targets; writes docs/reliability.md
#   make bench-kubelet  the same 10 pods under a real kubelet, then cri-prober (optional,
#               not part of make test; ~3 min a run, BENCH_KUBELET_RUNS=3); writes docs/performance.md
#   make bench-startup  manifests to Ready pods: kubelet, cri-prober and the CRI floor, 1 and
#               30 pods (optional; ~5 min, BENCH_STARTUP_RUNS=3); writes docs/performance.md
# Installing (docs/deployment.md):
#   make install  the binary, the systemd unit and /etc/cri-prober/config.yaml (kept if there);
#               PREFIX=/usr/local, DESTDIR=, SYSTEMDUNITDIR=/etc/systemd/system
#   make image    dist/cri-prober-image.tar: the container image for `ctr images import`, no registry
#   make release  dist/: tar.gz, .deb and image per arch, SHA256SUMS (RELEASE_ARCHES=amd64,arm64)
#   make man      bin/man: the man pages, generated from the commands
SHELL := /bin/bash
# A recipe's pipeline fails when go test does (go test -json | testjson).
.SHELLFLAGS := -o pipefail -c
export PATH := /usr/local/go/bin:$(PATH)

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
GOFILES = $(shell find cmd pkg test hack -name '*.go')

PREFIX ?= /usr/local
SYSTEMDUNITDIR ?= /etc/systemd/system
IMAGE ?= localhost/cri-prober
IMAGE_OUT ?= dist/cri-prober-image.tar
RELEASE_ARCHES ?= amd64,arm64

.PHONY: build test test-unit test-soak test-e2e lint fuzz bench bench-kubelet bench-startup soak demo demo-down crictl clean
.PHONY: install image release test-deploy man

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/cri-prober ./cmd/cri-prober

# Each stage timed, in this order, stopping at the first that fails
# (hack/test.sh); the summary's last line counts the tests passed and failed.
# The soak (a minute of wall clock on the fake runtime, about a quarter of a
# core) runs beside e2e, which mostly waits on containers: on 2 cores that
# keeps make test within 10 minutes, with nothing left out.
test:
	@hack/test.sh lint test-unit test-deploy fuzz test-soak+test-e2e

# The go test stages print what go test prints (an ok or FAIL line per
# package, failed tests' output) and keep every event, with its timing, in
# $(TEST_TIMINGS_DIR)/<stage>.json (hack/tools/testjson).
TEST_TIMINGS_DIR ?= bin/test-timings
export TEST_TIMINGS_DIR
TESTJSON = bin/testjson filter -o $(TEST_TIMINGS_DIR)

bin/testjson: hack/tools/testjson/main.go
	CGO_ENABLED=0 $(GO) build -o $@ ./hack/tools/testjson

test-unit: bin/testjson
	$(GO) test -json -race -count=1 ./... | $(TESTJSON)/unit.json

# The soak's short variant on the fake runtime (make soak: the long one).
test-soak: bin/testjson
	$(GO) test -json -tags soak -count=1 -timeout 10m -run '^TestSoak$$' ./test/soak -args -duration $${SOAK_DURATION:-1m} | $(TESTJSON)/soak.json

# Starts a private containerd, runs the e2e tests, and stops and cleans it
# up whatever happens. Pass go test flags with E2E_FLAGS="-run TestExit".
test-e2e: build
	hack/e2e.sh $(E2E_FLAGS)

# The deploy files as shipped (issue 16): systemd-analyze verify and the
# unit's sandbox, promtool on the Prometheus files, the DaemonSet against
# the Kubernetes API types, make install, make image and make release.
# Installs promtool and systemd-analyze from Debian packages if missing. The
# release cross-builds two architectures: 10 minutes leaves room for a busy
# machine (5 ran out once, at a load average of 20).
test-deploy: bin/testjson
	$(GO) vet -tags deploy ./test/deploy/...
	$(GO) test -json -tags deploy -race -count=1 -timeout 10m ./test/deploy/... | $(TESTJSON)/deploy.json

# Man pages (and Markdown pages) generated from the commands themselves.
man: build
	bin/cri-prober gen-docs --man bin/man --markdown bin/man/markdown

install: build
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" SYSTEMDUNITDIR="$(SYSTEMDUNITDIR)" hack/install.sh bin/cri-prober

image: build
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" IMAGE="$(IMAGE)" hack/image.sh bin/cri-prober "$(IMAGE_OUT)"

release:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" hack/release.sh --arch "$(RELEASE_ARCHES)" --out dist

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

# From manifests written to pods Ready, beside kubelet and the CRI floor
# (issue 20): 1 and 30 pods, 3 runs. Not part of make test.
bench-startup: build
	hack/bench-kubelet.sh startup

soak:
	hack/soak.sh

demo: build
	hack/demo.sh

demo-down:
	hack/containerd-down.sh

crictl:
	@hack/crictl.sh

clean: demo-down
	rm -rf bin dist
