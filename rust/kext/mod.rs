// SPDX-License-Identifier: GPL-2.0

//! What the kernel crate of Linux 7.3 lacks and this module needs, each a
//! candidate for `rust/kernel/` on its own: slab caches, shrinkers, sysctl
//! tables, workqueues, per-CPU counters, allocation scopes, rate limits,
//! module-wide locks, a spinlock whose guard makes no lockdep call
//! without lockdep, debugfs files that take a number, a value parked
//! while the operations its holder started complete.

pub mod debugfs;
pub mod global;
pub mod memalloc;
pub mod park;
pub mod park_count;
pub mod percpu;
pub mod ratelimit;
pub mod shrinker;
pub mod slab;
pub mod spin_lock;
pub mod sysctl;
pub mod workqueue;
