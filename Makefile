# SPDX-License-Identifier: GPL-2.0
#
# rpcrdma_cm: one file for both jobs.
# - Included by kbuild (KERNELRELEASE set): the module's object list.
# - Run by a person or CI: the top-level targets (`make help`).

ifneq ($(KERNELRELEASE),)

# Kbuild part. Out of tree, CONFIG_RPCRDMA_CM=m comes from the command line; in a
# kernel tree it comes from Kconfig.
obj-$(CONFIG_RPCRDMA_CM) += rpcrdma_cm.o
# One Rust crate (its root is rust/rpcrdma_cm_main.rs) and the C half of the
# abstraction layer, linked into one module like Rust Binder.
rpcrdma_cm-y := rust/rpcrdma_cm_main.o rust/sys/param.o rust/sys/debugfs.o \
	rust/sys/cm.o rust/sys/qp.o rust/sys/chunk.o rust/sys/ib_client.o rust/sys/svc.o \
	rust/sys/trace.o
# The tracepoint header is found by define_trace.h through this path.
CFLAGS_rust/sys/trace.o := -I$(src)/rust/sys

else

SHELL := /bin/bash
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

.PHONY: help check check-debug demo deps kernel module host-test selftest fuzz bench bench-proto clean

help:
	@echo "make check      install what is missing, build, run host tests and VM selftests"
	@echo "make demo       install what is missing, build, boot a VM and show the module"
	@echo "make deps       install packages and tools (scripts/deps)"
	@echo "make kernel     build or reuse the cached test kernel (scripts/kernel)"
	@echo "make module     build rpcrdma_cm.ko (KDIR=<tree> to use another kernel)"
	@echo "make host-test  cargo test of the protocol core"
	@echo "make selftest   run the VM selftests (TESTS='name ...' for a subset)"
	@echo "make fuzz       fuzz the protocol core (FUZZ_RUNS=10000000 per target)"
	@echo "make check-debug  the VM selftests on a KASAN/lockdep/kmemleak kernel"
	@echo "make bench        benchmarks in one VM boot: table and plots in results/bench"
	@echo "make bench-proto  microbenchmark of parse and negotiate (host)"
	@echo "make clean      remove build products (not the kernel cache)"

check:
	@$(TOP)/scripts/check

check-debug:
	@$(TOP)/scripts/check-debug

demo:
	@$(TOP)/scripts/demo

deps:
	@$(TOP)/scripts/deps

kernel: deps
	@$(TOP)/scripts/kernel >/dev/null

module:
	@$(TOP)/scripts/module

host-test:
	@cd $(TOP)/rust/proto && cargo test --quiet

selftest: module
	@$(TOP)/scripts/selftest

fuzz:
	@$(TOP)/scripts/fuzz

bench:
	@$(TOP)/scripts/bench

bench-proto:
	@cd $(TOP)/rust/proto && cargo bench --quiet

clean:
	@kdir=$$($(TOP)/scripts/kernel --path); \
	if [ -d "$$kdir" ]; then $(MAKE) -s -C "$$kdir" M=$(TOP) clean; fi
	@rm -rf $(TOP)/results $(TOP)/rust/proto/target

endif
