// SPDX-License-Identifier: GPL-2.0
/*
 * Instantiates the trace events of rpcrdma_trace.h: the tracepoints, their
 * tracefs entries under events/rpcrdma/, and the rust_do_trace_<name>()
 * entry points rust/module/trace.rs calls once it has seen an event enabled.
 * Linked into rpcrdma_rs.ko only (see Kbuild): the KUnit module compiles
 * the Rust side with its events as no-ops, so the two modules never
 * register the same events.
 */
#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include "rpcrdma_trace.h"
