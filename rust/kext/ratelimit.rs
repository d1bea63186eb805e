// SPDX-License-Identifier: GPL-2.0

//! Rate limiting of log lines a peer can trigger (the kernel's
//! `printk_ratelimited`, `DEFAULT_RATELIMIT_INTERVAL`/`_BURST`).
//!
//! One RDMA Send from a hostile peer must not produce one console line: on
//! a serial console that is a soft lockup. Each call site of
//! [`pr_warn_ratelimited!`](crate::pr_warn_ratelimited) owns a static
//! [`RateLimit`]: at most [`BURST`] lines per [`INTERVAL_NS`], and the first
//! line of the next interval says how many were suppressed.

use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::time::{ClockSource, Monotonic};

/// Length of one interval (C `DEFAULT_RATELIMIT_INTERVAL`, 5 s).
pub const INTERVAL_NS: i64 = 5_000_000_000;

/// Lines allowed per interval (C `DEFAULT_RATELIMIT_BURST`).
pub const BURST: u32 = 10;

/// The state of one rate-limited call site.
///
/// # Invariants
///
/// `start` is the monotonic time (ns) the current interval began, or 0
/// before the first line; `count` counts the calls in that interval.
pub struct RateLimit {
    start: Atomic<i64>,
    count: Atomic<u32>,
    suppressed: Atomic<u32>,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimit {
    /// A call site that has printed nothing yet.
    pub const fn new() -> Self {
        Self {
            start: Atomic::new(0),
            count: Atomic::new(0),
            suppressed: Atomic::new(0),
        }
    }

    /// Whether this call may print. `Some(n)`: yes, and `n` earlier calls
    /// were suppressed since the last printed line; `None`: no.
    ///
    /// Lock-free and approximate under races (a burst may be exceeded by
    /// the number of CPUs racing at an interval's start), as is enough for
    /// log lines; callable from any context.
    pub fn check(&self) -> Option<u32> {
        let now = Monotonic::ktime_get();
        let start = self.start.load(Relaxed);
        if start == 0 || now.saturating_sub(start) >= INTERVAL_NS {
            // Whoever swaps the start opens the new interval.
            if self.start.cmpxchg(start, now.max(1), Relaxed).is_ok() {
                self.count.store(1, Relaxed);
                return Some(self.suppressed.xchg(0, Relaxed));
            }
        }
        if self.count.fetch_add(1, Relaxed) < BURST {
            Some(self.suppressed.xchg(0, Relaxed))
        } else {
            self.suppressed.fetch_add(1, Relaxed);
            None
        }
    }
}

/// `pr_warn!` limited to [`BURST`] lines per 5 s at this call site; the
/// next printed line is followed by how many were suppressed.
#[macro_export]
macro_rules! pr_warn_ratelimited {
    ($($arg:tt)*) => {{
        static RL: $crate::rust::kext::ratelimit::RateLimit = $crate::rust::kext::ratelimit::RateLimit::new();
        if let Some(n) = RL.check() {
            kernel::pr_warn!($($arg)*);
            if n > 0 {
                kernel::pr_warn!("rpcrdma_rs: {} similar messages suppressed\n", n);
            }
        }
    }};
}

/// `pr_info!` limited like [`pr_warn_ratelimited!`](crate::pr_warn_ratelimited),
/// for lines a peer causes once per connection.
#[macro_export]
macro_rules! pr_info_ratelimited {
    ($($arg:tt)*) => {{
        static RL: $crate::rust::kext::ratelimit::RateLimit = $crate::rust::kext::ratelimit::RateLimit::new();
        if let Some(n) = RL.check() {
            kernel::pr_info!($($arg)*);
            if n > 0 {
                kernel::pr_info!("rpcrdma_rs: {} similar messages suppressed\n", n);
            }
        }
    }};
}

/// `pr_err!` limited like [`pr_warn_ratelimited!`](crate::pr_warn_ratelimited).
#[macro_export]
macro_rules! pr_err_ratelimited {
    ($($arg:tt)*) => {{
        static RL: $crate::rust::kext::ratelimit::RateLimit = $crate::rust::kext::ratelimit::RateLimit::new();
        if let Some(n) = RL.check() {
            kernel::pr_err!($($arg)*);
            if n > 0 {
                kernel::pr_err!("rpcrdma_rs: {} similar messages suppressed\n", n);
            }
        }
    }};
}
