// SPDX-License-Identifier: GPL-2.0

//! This module's own FFI, the only policy allowed under `rust/`: its
//! parameters ([`params`], declared in `params.c`), its trace events
//! ([`trace`], defined in `rpcrdma_trace.h`) and the counts of the live
//! objects `rust/` creates ([`live`]).

pub mod live;
pub mod params;
pub mod trace;
