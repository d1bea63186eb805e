# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma-rs developer entry points. The kernel build is cached outside the
# repository by scripts/setup; KDIR points at it.

CACHE_DIR ?= $(or $(RPCRDMA_CACHE),/var/cache/rpcrdma-rs)
# bindgen is installed into the cache by scripts/setup.
export PATH := $(CACHE_DIR)/bin:$(HOME)/.cargo/bin:$(PATH)
export LIBCLANG_PATH ?= /usr/lib/llvm-19/lib

KDIR ?= $(shell scripts/kdir 2>/dev/null)
KSRC ?= $(shell bash -c '. scripts/common.sh && ksrc_dir')
LLVM ?= -19
RUSTFMT ?= rustfmt
SCENARIO ?= kunit

KMAKE = $(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM)

RUST_SOURCES = $(shell git ls-files '*.rs' 2>/dev/null | grep -v '^host/fuzz/\|_generated\.rs$$')

.PHONY: all modules clippy fmt fmt-check clean setup test vmtest check-kdir

all: modules

check-kdir:
	@test -n "$(KDIR)" || { echo "kernel not built: run scripts/setup" >&2; exit 1; }

modules: check-kdir
	$(KMAKE) modules

clippy: check-kdir
	$(KMAKE) CLIPPY=1 modules

fmt:
	$(RUSTFMT) --edition 2021 --config-path $(KSRC)/.rustfmt.toml $(RUST_SOURCES)

fmt-check:
	$(RUSTFMT) --check --edition 2021 --config-path $(KSRC)/.rustfmt.toml $(RUST_SOURCES)

clean:
	@test -z "$(KDIR)" || $(KMAKE) clean

setup:
	scripts/setup

test:
	scripts/test

vmtest:
	scripts/vm $(SCENARIO)
