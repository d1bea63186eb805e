# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma-rs developer entry points. The kernel build is cached outside the
# repository by scripts/setup; KDIR points at it.

CACHE_DIR ?= $(or $(RPCRDMA_CACHE),/var/cache/rpcrdma-rs)
# bindgen is installed into the cache by scripts/setup. rustup's directory
# comes last: the rustc used is the one the kernel names (below), and a
# distribution's rustc must not lose to a rustup one merely by PATH order.
export PATH := $(CACHE_DIR)/bin:$(PATH):$(HOME)/.cargo/bin

KDIR ?= $(shell scripts/kdir 2>/dev/null)
KSRC ?= $(shell bash -c '. scripts/common.sh && ksrc_dir')
RUSTFMT ?= rustfmt
SCENARIO ?= kunit

# The toolchain is the one the kernel in KDIR was built with, read from its
# .config by scripts/kernel-toolchain: clang (LLVM=-NN) or gcc, the rustc
# whose version is CONFIG_RUSTC_VERSION_TEXT exactly (Rust symbol names
# depend on it), bindgen, libclang. A mismatch stops here with one line.
KT_GOALS := $(filter all modules clippy,$(or $(MAKECMDGOALS),all))
ifneq ($(KDIR),)
ifneq ($(filter all modules clippy clean,$(or $(MAKECMDGOALS),all)),)
KT_FILE := $(CURDIR)/.kernel-toolchain.mk
KT_RUN := $(shell scripts/kernel-toolchain '$(KDIR)' | sed 's/^/KT_/' > '$(KT_FILE)')
include $(KT_FILE)
ifneq ($(KT_GOALS),)
ifneq ($(KT_ERROR),)
$(error rpcrdma-rs: $(KT_ERROR))
endif
endif
endif
endif
LLVM ?= $(KT_LLVM)
export LIBCLANG_PATH ?= $(or $(KT_LIBCLANG_PATH),/usr/lib/llvm-19/lib)
KT_TOOLS = $(if $(KT_RUSTC),RUSTC=$(KT_RUSTC)) $(if $(KT_BINDGEN),BINDGEN=$(KT_BINDGEN)) \
	$(if $(KT_CLIPPY_DRIVER),CLIPPY_DRIVER=$(KT_CLIPPY_DRIVER))

# Headers without the kernel's Rust build products (Debian's: no
# rust/*.rmeta, no scripts/target.json): scripts/stock-rust-objects builds
# them once per kernel release from the same kernel source and the headers'
# .config, checks them against the headers, and gives a directory that is
# the headers plus those products. KBUILD_DIR is where the module is built.
KBUILD_DIR := $(KDIR)
ifneq ($(KT_GOALS),)
ifneq ($(KDIR),)
ifeq ($(wildcard $(KDIR)/rust/libkernel.rmeta),)
KBUILD_DIR := $(shell RUSTC='$(KT_RUSTC)' BINDGEN='$(KT_BINDGEN)' scripts/stock-rust-objects '$(KDIR)')
else ifeq ($(wildcard $(KDIR)/scripts/target.json),)
KBUILD_DIR := $(shell RUSTC='$(KT_RUSTC)' BINDGEN='$(KT_BINDGEN)' scripts/stock-rust-objects '$(KDIR)')
endif
ifeq ($(KBUILD_DIR),)
$(error rpcrdma-rs: no Rust build products for the kernel in $(KDIR) (scripts/stock-rust-objects failed, see above))
endif
endif
endif

# dkms appends CC=clang LD=ld.lld to the make command when the kernel was built
# with LLVM. With a versioned LLVM=-19 the kernel names its tools clang-19 and
# ld.lld-19, and a plain clang may not exist: name them explicitly, which wins
# over what the sub-make inherits.
ifneq ($(filter -%,$(LLVM)),)
KMAKE_TOOLS = CC=clang$(LLVM) LD=ld.lld$(LLVM)
endif
KMAKE = $(MAKE) -C $(KBUILD_DIR) M=$(CURDIR) $(if $(LLVM),LLVM=$(LLVM)) $(KMAKE_TOOLS) $(KT_TOOLS)

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
