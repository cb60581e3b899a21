# payonce — the README's two commands:
#   make demo   builds and runs the end-to-end demonstration on SQLite
#   make test   the whole test suite (sanitizers, both stores, races, faults)
# Both install the Debian packages they need first (scripts/deps.sh).
.PHONY: all build deps demo test lint bench bench-cluster soak fuzz-corpus clean install deb

JOBS := $(shell nproc 2>/dev/null || echo 2)
# Warnings are errors in `make test` (PO_WERROR=ON); a user's `make` with a
# newer compiler does not fail on a warning it adds.
PO_WERROR ?= OFF

all: build

deps:
	@scripts/deps.sh

# make build (and make demo) install only the build's packages; make test
# the rest. The build prints its progress (scripts/build.sh).
build:
	@scripts/deps.sh build
	@scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPO_WERROR=$(PO_WERROR)
	@echo "built build/payonce"

demo: build
	@scripts/demo.sh

test:
	@scripts/test.sh

lint:
	@scripts/lint.sh

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, its man page
# (made from its own help; it points at the docs installed beside), the
# README and docs, the systemd unit and an example configuration.
PREFIX ?= /usr/local
install: build
	install -D -m 0755 build/payonce $(DESTDIR)$(PREFIX)/bin/payonce
	scripts/manpage.sh build/payonce build/payonce.1 $(PREFIX)/share/doc/payonce
	install -D -m 0644 build/payonce.1 $(DESTDIR)$(PREFIX)/share/man/man1/payonce.1
	install -D -m 0644 -t $(DESTDIR)$(PREFIX)/share/doc/payonce README.md docs/*.md
	install -D -m 0644 contrib/payonce.conf $(DESTDIR)$(PREFIX)/share/doc/payonce/payonce.conf.example
	install -D -m 0644 contrib/payonce.service $(DESTDIR)$(PREFIX)/share/doc/payonce/payonce.service

# make deb: build/payonce_VERSION_ARCH.deb for Debian 12 (scripts/deb.sh).
deb: build
	@scripts/deb.sh

bench: build
	@bench/run.sh

# The local HA cluster (scripts/cluster.sh): credited/s with 1, 2, 3 nodes
# behind HAProxy and a failover timeline (docs/scaling.md).
bench-cluster: build
	@bench/cluster.sh

# The reliability suite's long versions (hours): scripts/soak.sh.
soak:
	@scripts/soak.sh

# Grow the committed fuzz corpus: every target until its coverage plateaus
# (at most 15 minutes each), merged back within bounds; commit the result.
fuzz-corpus: deps
	@scripts/fuzz.sh --plateau 60 900
	@git status --short tests/fuzz/corpus | sed -n '1,5p;$$p'

clean:
	rm -rf build build-asan build-tsan
