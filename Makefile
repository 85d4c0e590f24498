# lease — build and test.
#   make            build bin/lease (with MPI support when Open MPI is installed)
#   make install    install lease, its man pages and completions under PREFIX
#                   (default /usr/local; PREFIX=$HOME/.local for your own account)
#   make check      every test, as CI (.ci/run) runs them: make test and then
#                   make test-nfs, beside make test-cluster and then make
#                   test-long (scripts/check.sh: two lanes on 2 cores, their
#                   logs printed whole when both are done, then each target's
#                   skips and the targets that failed)
#   make test       every test but the cluster suites, with the safety
#                   harness's crash states sampled (7 minutes on 2 cores with
#                   nothing else running); what to run while working
#   make test-long  the full enumeration of internal/safety (make test samples it)
#   make test-cluster  the cluster suites: GlusterFS, CephFS, Slurm and power
#                   cuts (User-Mode Linux); root, about 15 minutes
#   make cross      build and vet for darwin and freebsd (make vet, and so make test, does it too)
#   make demo       run the demo campaign on a fresh local table
#   make man        regenerate the man pages and completions from the commands' help
#   make fuzz       run every fuzz target for FUZZTIME seconds each (default 20;
#                   not part of make test)
#   make powercut FS=ext4|ext4-writeback|xfs|btrfs CUTS=N [SYNC=auto]
#                   N real power cuts of a User-Mode Linux kernel's filesystem
#                   under lease (internal/powercut; needs root and
#                   user-mode-linux); ends with one line "powercut: FS: ..."
#   make bench-worker  bench/worker as root: lease work beside the floor (a C
#                   rename-and-fsync queue), a flock(1) file queue and GNU
#                   parallel --sqlworker, 1 to 16 workers on ext4 and XFS loop
#                   images (bench/results/worker-floor/; not part of make test
#                   or make check, whose bench tests run its --quick mode);
#                   BENCH_WORKER_ARGS adds arguments (--reps 5, --items 5000)
#   make test-nfs   NFS (v3 and v4.2) in User-Mode Linux kernels, a server and two
#                   clients: the lock race (internal/nfsrace), the multi-client
#                   suite, the NFS cases and the server cut (internal/nfstest);
#                   root, about 15 minutes
GO    ?= go
TAGS  := $(shell pkg-config --exists ompi 2>/dev/null && echo mpi)
# Tests that need root, mounts, FUSE or MPI skip with a message when those are
# missing; LEASE_TEST_REQUIRE=all turns every such skip into a failure (CI).
TESTFLAGS ?= -count=1 -timeout 75m
# make test lists its skips at the end (scripts/test-skips.sh): each skipped
# test appends a line to this file (internal/testenv.Missing).
export LEASE_TEST_SKIPS ?= $(CURDIR)/.test-skips
MPI_MISSING := Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev pkg-config)
PREFIX ?= /usr/local
DESTDIR ?=
# bench/ is its own module (gonum/plot stays out of the product's go.mod):
# ./... at the root does not reach it, so vet and test run there too.

FUZZTIME ?= 20

# The cluster suites (make test-cluster): real GlusterFS and CephFS
# (internal/multiclient, internal/clusterbox) and power cuts
# (internal/powercut) in User-Mode Linux kernels (internal/uml), and the job
# scripts of commands/ under sbatch and srun (CLUSTER_TESTS: the Slurm
# cluster of .ci/slurm-up.sh). NFS has a target of its own (make test-nfs:
# NFS_PKGS), so that make check can run it in the other lane. make test runs
# everything else.
MODULE        := github.com/leasetool/lease
CLUSTER_PKGS  := internal/multiclient internal/clusterbox internal/powercut internal/uml
NFS_PKGS      := internal/nfsrace internal/nfstest
CLUSTER_TESTS := ^(TestSlurm[A-Za-z0-9_]*|TestReadmeClusterWorkers)$$
# commands' own MPI tests (the files under //go:build mpi): make test runs
# them with -tags mpi, after every test of commands in the plain build. Only
# the mpi package differs between the builds (mpi_active.go, mpi_inactive.go),
# and its tests run in both (./mpi/ with and without -tags mpi, among them
# TestActiveWithoutLauncher: the MPI build outside mpirun acts alone), so the
# rest of commands' tests are not run a second time with the tag.
MPI_TESTS     := ^($(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $$(grep -l '^//go:build mpi$$' commands/*_test.go) | paste -sd'|'))$$

.PHONY: build install check test test-cluster test-long vet cross demo man fuzz powercut test-nfs bench-worker

build:
	$(GO) build -tags "$(TAGS)" -o bin/lease .
	@case ":$$PATH:" in *":$(CURDIR)/bin:"*) ;; *) if [ "$$(command -v lease)" != "$(CURDIR)/bin/lease" ]; then \
	  echo "built bin/lease; to run it as lease: make install (PREFIX=$$HOME/.local for your own account), or export PATH=\"$(CURDIR)/bin:\$$PATH\""; fi;; esac

# install puts lease on PATH (PREFIX/bin), its pages where man finds them
# (PREFIX/share/man/man1, man5) and the completions where bash-completion,
# zsh and fish look.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 755 bin/lease $(DESTDIR)$(PREFIX)/bin/lease
	install -m 644 man/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/man5/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 completions/lease.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/lease
	install -m 644 completions/_lease $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lease
	install -m 644 completions/lease.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lease.fish
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "installed $(DESTDIR)$(PREFIX)/bin/lease; $(PREFIX)/bin is not on PATH: export PATH=\"$(PREFIX)/bin:\$$PATH\"";; esac

vet: cross
	gofmt -l . | (! grep .) || (echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	@if [ -n "$(TAGS)" ]; then echo "$(GO) vet -tags mpi ./mpi/ ./commands/"; $(GO) vet -tags mpi ./mpi/ ./commands/; \
	else scripts/test-skips.sh skip "go vet -tags mpi" "$(MPI_MISSING)"; fi
	cd bench && $(GO) vet ./...
	cd examples/harness && GOWORK=off $(GO) vet ./...

# The packages build elsewhere too (a Go program embedding leases compiles
# on a laptop); opening a table there fails with "lease tables need Linux"
# (commit/seam/os_other.go).
# vet, not only build: the tests compile there too (a Linux-only test lives
# in a _linux_test.go file or under //go:build linux).
cross:
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...

# Every part runs, and the skips are listed at the end, whatever failed;
# the exit status is the tests' (a skip fails only under LEASE_TEST_REQUIRE=all).
# Each of test, test-cluster and test-long keeps its skips in a file of its
# own, so that they can run at once (as .ci/run does).
test:
	@rm -f "$(LEASE_TEST_SKIPS)"
	@st=0; $(MAKE) --no-print-directory vet || st=1; \
	pkgs=$$($(GO) list ./... | grep -v -x $(foreach p,$(CLUSTER_PKGS) $(NFS_PKGS),-e '$(MODULE)/$(p)')); \
	echo "LEASE_SAFETY_SIZE=sample $(GO) test $(TESTFLAGS) -skip '$(CLUSTER_TESTS)' ./... but $(CLUSTER_PKGS) $(NFS_PKGS)"; \
	LEASE_SAFETY_SIZE=sample $(GO) test $(TESTFLAGS) -skip '$(CLUSTER_TESTS)' $$pkgs || st=1; \
	echo "cd bench && $(GO) test $(TESTFLAGS) ./..."; (cd bench && $(GO) test $(TESTFLAGS) ./...) || st=1; \
	if [ -n "$(TAGS)" ]; then echo "$(GO) test $(TESTFLAGS) -tags mpi ./mpi/; $(GO) test $(TESTFLAGS) -tags mpi -run '$(MPI_TESTS)' ./commands/"; \
	  $(GO) test $(TESTFLAGS) -tags mpi ./mpi/ || st=1; \
	  $(GO) test $(TESTFLAGS) -tags mpi -run '$(MPI_TESTS)' ./commands/ || st=1; \
	else scripts/test-skips.sh skip "go test -tags mpi ./mpi/ ./commands/" "$(MPI_MISSING)" || st=1; fi; \
	scripts/test-skips.sh list "make test"; exit $$st

# -p 1: one cluster at a time, and room for make test beside it on 2 cores.
test-cluster: LEASE_TEST_SKIPS := $(CURDIR)/.test-skips-cluster
test-cluster:
	@rm -f "$(LEASE_TEST_SKIPS)"
	@st=0; echo "$(GO) test $(TESTFLAGS) -p 1 $(addprefix ./,$(CLUSTER_PKGS))"; \
	$(GO) test $(TESTFLAGS) -p 1 $(addprefix ./,$(CLUSTER_PKGS)) || st=1; \
	echo "$(GO) test $(TESTFLAGS) -run '$(CLUSTER_TESTS)' ./commands/"; \
	$(GO) test $(TESTFLAGS) -run '$(CLUSTER_TESTS)' ./commands/ || st=1; \
	scripts/test-skips.sh list "make test-cluster"; exit $$st

test-long: LEASE_TEST_SKIPS := $(CURDIR)/.test-skips-long
test-long:
	@rm -f "$(LEASE_TEST_SKIPS)"
	@st=0; echo "$(GO) test $(TESTFLAGS) ./internal/safety/"; $(GO) test $(TESTFLAGS) ./internal/safety/ || st=1; \
	scripts/test-skips.sh list "make test-long"; exit $$st

# check runs the three test targets as CI does (scripts/check.sh says how).
check:
	@MAKE="$(MAKE)" scripts/check.sh

demo:
	./examples/demo.sh

# man regenerates the man pages, docs/lease-format.md and the completions
# from the commands' help (commands/gen); a test fails when they are stale.
man:
	$(GO) generate ./commands

# test-nfs runs the NFS suites (User-Mode Linux kernels; needs root,
# user-mode-linux, uml-utilities, nfs-kernel-server, nfs-common, rpcbind), one
# package at a time, both NFS versions side by side: internal/nfsrace, the
# lock race of docs/safety.md (NFS) through two clients of one server
# (scripts/nfs-race.sh; it fails on a token written twice; MODE=rec
# scripts/nfs-race.sh 4.2 shows NFSv4.2's stale reads without lease's
# revalidation); internal/nfstest, the multi-client suite on NFS (qualify
# through each client, the claim --next race, held through the other client,
# fenced publish, a lease work campaign with worker trees killed, fsck on the
# live table), the NFS cases (nolock/local_lock, .nfsXXXX silly renames, the
# attribute caches against noac, each beside the default mount) and the
# server cut (the server kernel killed under a workload in both clients and
# booted again on its export's image, then knfsd alone restarted).
# LEASE_NFS_VERS=3 or 4.2 runs one version; LEASE_NFS_OPTS=nolock (say) adds
# mount options the suite must fail on.
test-nfs: LEASE_TEST_SKIPS := $(CURDIR)/.test-skips-nfs
test-nfs:
	@rm -f "$(LEASE_TEST_SKIPS)"
	@st=0; echo "$(GO) test $(TESTFLAGS) -p 1 $(addprefix ./,$(NFS_PKGS))"; \
	$(GO) test $(TESTFLAGS) -p 1 $(addprefix ./,$(NFS_PKGS)) || st=1; \
	scripts/test-skips.sh list "make test-nfs"; exit $$st

# fuzz runs each go test -fuzz target (every func Fuzz of the module's
# tests) for FUZZTIME seconds and prints executions and crashes per target
# (scripts/fuzz.sh); a crasher fails it and is kept in PACKAGE/testdata/fuzz/.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# powercut makes CUTS power cuts on FS (default: 10 on each filesystem);
# POWERCUT_SEED=S reruns the cuts from seed S; POWERCUT_MINUTES=M starts no
# cut past M minutes (the line counts the cuts made); BROKEN=1 cuts under a
# lease built without fsyncs (what the harness must catch) and counts the
# losses without failing; SYNC=auto (or record, syncfs) sets the table's sync
# strategy in the guest (LEASE_SYNC; the summary line says which). The summary lines are the
# last lines of its output.
FS ?=
CUTS ?= 10
powercut:
	@log=$$(mktemp); echo "go test -run 'TestPowerCut$$' ./internal/powercut/ (FS=$(FS) CUTS=$(CUTS) SYNC=$(SYNC))"; \
	POWERCUT_FS="$(FS)" POWERCUT_CUTS="$(CUTS)" POWERCUT_BROKEN="$(BROKEN)" POWERCUT_SYNC="$(SYNC)" $(GO) test -v -count=1 -timeout 0 -run 'TestPowerCut$$' ./internal/powercut/ > $$log 2>&1; st=$$?; \
	grep -v '^powercut: ' $$log | grep -v '^=== ' | tail -n 60; grep '^powercut: ' $$log; rm -f $$log; exit $$st

# bench-worker runs issue 39's side-by-side benchmark (bench/worker --help):
# about 1.5 hours at its defaults (2000 items, 3 repetitions) on 2 quiet cores.
BENCH_WORKER_ARGS ?=
bench-worker:
	bench/worker $(BENCH_WORKER_ARGS)
