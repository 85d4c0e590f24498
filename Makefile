# lease — build and test.
#   make            build bin/lease (with MPI support when Open MPI is installed)
#   make test       run every test (what .ci/run calls)
#   make cross      build for darwin and freebsd (make vet, and so make test, does it too)
#   make demo       run the demo campaign on a fresh local table
GO    ?= go
TAGS  := $(shell pkg-config --exists ompi 2>/dev/null && echo mpi)
# Tests that need root, mounts, FUSE or MPI skip with a message when those are
# missing; LEASE_TEST_REQUIRE=all turns every such skip into a failure (CI).
TESTFLAGS ?= -count=1 -timeout 75m
# bench/ is its own module (gonum/plot stays out of the product's go.mod):
# ./... at the root does not reach it, so vet and test run there too.

.PHONY: build test vet cross demo man

build:
	$(GO) build -tags "$(TAGS)" -o bin/lease .

vet: cross
	gofmt -l . | (! grep .) || (echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) vet -tags mpi ./mpi/ ./commands/
	cd bench && $(GO) vet ./...

# The packages build elsewhere too (a Go program embedding leases compiles
# on a laptop); opening a table there fails with "lease tables need Linux"
# (commit/seam/os_other.go).
cross:
	GOOS=darwin $(GO) build ./...
	GOOS=freebsd $(GO) build ./...

test: vet
	$(GO) test $(TESTFLAGS) ./...
	cd bench && $(GO) test $(TESTFLAGS) ./...
	@if [ -n "$(TAGS)" ]; then $(GO) test $(TESTFLAGS) -tags mpi ./mpi/ ./commands/; \
	else echo "MPI tests under -tags mpi: Open MPI not installed (apt-get install openmpi-bin libopenmpi-dev)"; \
	     if [ "$$LEASE_TEST_REQUIRE" = all ]; then exit 1; fi; fi

demo:
	./examples/demo.sh
