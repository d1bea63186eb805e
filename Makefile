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

# dkms appends CC=clang LD=ld.lld to the make command when the kernel was built
# with LLVM. With a versioned LLVM=-19 the kernel names its tools clang-19 and
# ld.lld-19, and a plain clang may not exist: name them explicitly, which wins
# over what the sub-make inherits.
ifneq ($(filter -%,$(LLVM)),)
KMAKE_TOOLS = CC=clang$(LLVM) LD=ld.lld$(LLVM)
endif
KMAKE = $(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) $(KMAKE_TOOLS)

RUST_SOURCES = $(shell git ls-files '*.rs' 2>/dev/null | grep -v '^host/fuzz/\|_generated\.rs$$')

.PHONY: all modules clippy fmt fmt-check clean setup test vmtest check-kdir install uninstall

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

# Installing: rpcrdma_rs.ko goes to lib/modules/<release>/updates, and a
# modprobe.d file aliases rpcrdma, rpcrdma6, xprtrdma and svcrdma to it. sunrpc
# asks for "rpcrdma"/"rpcrdma6" when a mount says proto=rdma/rdma6 and for
# "svcrdma" when nfsd opens an RDMA listener; rdma-core loads "xprtrdma" and
# "svcrdma" at boot. Aliases from modprobe.d win over module names, so all of
# these reach rpcrdma_rs although the in-tree rpcrdma.ko stays installed.
# The module must be built first (make modules), as for the kernel's own
# modules_install. INSTALL_MOD_PATH stages into another root (packaging,
# the drop-in scenario); depmod then indexes that root.
INSTALL_MOD_PATH ?=
INSTALL_MOD_DIR ?= updates
DEPMOD ?= /sbin/depmod
KERNELRELEASE_FILE = $(KDIR)/include/config/kernel.release
MODPROBE_CONF = $(INSTALL_MOD_PATH)/etc/modprobe.d/rpcrdma-rs.conf

install: check-kdir
	@test -f rpcrdma_rs.ko || { echo "rpcrdma_rs.ko not built: run make modules" >&2; exit 1; }
	@test -f $(KERNELRELEASE_FILE) || { echo "no kernel release in $(KDIR)" >&2; exit 1; }
	$(eval KREL := $(shell cat $(KERNELRELEASE_FILE)))
	install -D -m 0644 rpcrdma_rs.ko $(INSTALL_MOD_PATH)/lib/modules/$(KREL)/$(INSTALL_MOD_DIR)/rpcrdma_rs.ko
	install -D -m 0644 packaging/modprobe.d/rpcrdma-rs.conf $(MODPROBE_CONF)
	$(DEPMOD) -a $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) $(KREL)

uninstall: check-kdir
	$(eval KREL := $(shell cat $(KERNELRELEASE_FILE)))
	rm -f $(INSTALL_MOD_PATH)/lib/modules/$(KREL)/$(INSTALL_MOD_DIR)/rpcrdma_rs.ko $(MODPROBE_CONF)
	$(DEPMOD) -a $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) $(KREL)

setup:
	scripts/setup

test:
	scripts/test

vmtest:
	scripts/vm $(SCENARIO)
