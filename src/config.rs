// SPDX-License-Identifier: GPL-2.0

//! Module parameters, checked once at load time, and the ranges of the
//! sysctls that change some of them later (`/proc/sys/sunrpc/rdma_*` and
//! `/proc/sys/sunrpc/svc_rdma/*`, with C's ranges).
//!
//! Pure logic (`core` only) so the same checks run on the host.

/// The module version, printed at load time.
pub(crate) const VERSION: &str = "0.1.0";

/// Credits per connection: the protocol minimum and Linux's maximum
/// (`RPCRDMA_MIN_SLOT_TABLE`, `RPCRDMA_MAX_SLOT_TABLE`); also the range of
/// the client's `rdma_slot_table_entries` and the server's `max_requests`.
pub(crate) const REQUESTS_MIN: u32 = 4;
pub(crate) const REQUESTS_MAX: u32 = 16384;

/// Inline thresholds: RFC 8166's default and the largest Linux accepts
/// (`RPCRDMA_MIN_INLINE`, `RPCRDMA_MAX_INLINE`); also the range of the
/// client's `rdma_max_inline_read` and `rdma_max_inline_write`.
pub(crate) const INLINE_MIN: u32 = 1024;
pub(crate) const INLINE_MAX: u32 = 65536;

/// The smallest value a write to the server's `max_req_size` sysctl may
/// set (C `RPCRDMA_DEF_INLINE_THRESH`; the module parameter allows 1024).
pub(crate) const SVC_REQ_SIZE_MIN: u32 = 4096;

/// Pages one MR may map: 1 MiB of payload plus a page of misalignment
/// (`RPCRDMA_MAX_DATA_SEGS`).
const FMR_PAGES_MAX: u32 = 257;

/// Bounds of `cache_max_mb`: at least one 1 MiB chunk's pages, at most
/// 64 GiB per connection.
const CACHE_MB_MIN: u32 = 1;
const CACHE_MB_MAX: u32 = 65536;

/// Effective settings of the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) max_requests: u32,
    pub(crate) max_inline_read: u32,
    pub(crate) max_inline_write: u32,
    /// MRs per client connection ("fmr" strategy); 0 picks 4 per credit
    /// of each connection ([`fmr_pool`]).
    pub(crate) fmr_pool_size: u32,
    /// Pages per MR; 0 picks the device's limit (at most 1 MiB + 1 page).
    pub(crate) fmr_pages_per_mr: u32,
    /// MRs left dirty before a batched invalidation; 0 invalidates every
    /// registration before its RPC completes.
    pub(crate) fmr_dirty_watermark: u32,
    /// MiB of pages a client connection keeps registered across RPCs
    /// ("cache" strategy).
    pub(crate) cache_max_mb: u32,
    /// Server: reuse mapped buffers and registered sinks.
    pub(crate) svc_buf_cache: bool,
    /// Server: register RDMA Read sinks on every device.
    pub(crate) force_mr: bool,
}

/// Why a parameter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConfigError(&'static str);

impl ConfigError {
    /// What was wrong, for the log.
    pub(crate) fn reason(&self) -> &'static str {
        self.0
    }
}

impl Config {
    /// Checks the parameters as loaded (`raw`); the result is what the
    /// transports use. The pool and batch sizes are checked against the
    /// credits of `max_requests`; a connection made after a change of the
    /// slot table sysctl sizes them with [`fmr_pool`] and
    /// [`fmr_dirty_watermark`].
    pub(crate) fn from_params(raw: &Config) -> Result<Self, ConfigError> {
        let Config {
            max_requests,
            max_inline_read,
            max_inline_write,
            fmr_pool_size,
            fmr_pages_per_mr,
            fmr_dirty_watermark,
            cache_max_mb,
            svc_buf_cache,
            force_mr,
        } = *raw;
        if !(REQUESTS_MIN..=REQUESTS_MAX).contains(&max_requests) {
            return Err(ConfigError("max_requests must be between 4 and 16384"));
        }
        if !(INLINE_MIN..=INLINE_MAX).contains(&max_inline_read) {
            return Err(ConfigError(
                "max_inline_read must be between 1024 and 65536",
            ));
        }
        if !(INLINE_MIN..=INLINE_MAX).contains(&max_inline_write) {
            return Err(ConfigError(
                "max_inline_write must be between 1024 and 65536",
            ));
        }
        if fmr_pool_size != 0 && fmr_pool_size < 8 {
            return Err(ConfigError(
                "fmr_pool_size must be 0 (automatic) or at least 8",
            ));
        }
        if fmr_pages_per_mr > FMR_PAGES_MAX {
            return Err(ConfigError("fmr_pages_per_mr must be at most 257"));
        }
        if !(CACHE_MB_MIN..=CACHE_MB_MAX).contains(&cache_max_mb) {
            return Err(ConfigError("cache_max_mb must be between 1 and 65536"));
        }
        let pool = fmr_pool(fmr_pool_size, max_requests);
        if fmr_dirty_watermark >= pool / 2 {
            return Err(ConfigError(
                "fmr_dirty_watermark must be below half the MR pool",
            ));
        }
        Ok(Self {
            max_requests,
            max_inline_read,
            max_inline_write,
            fmr_pool_size,
            fmr_pages_per_mr,
            fmr_dirty_watermark,
            cache_max_mb,
            svc_buf_cache,
            force_mr,
        })
    }
}

/// MRs of a client connection with `credits` credits: `fmr_pool_size`, or
/// 4 per credit when it is 0 (automatic), and never fewer than one per
/// credit.
pub(crate) fn fmr_pool(fmr_pool_size: u32, credits: u32) -> u32 {
    if fmr_pool_size == 0 {
        credits.saturating_mul(4)
    } else {
        fmr_pool_size.max(credits)
    }
}

/// The batch size of batched invalidation for a pool of `pool` MRs: the
/// `fmr_dirty_watermark` parameter, checked at load to be below half the
/// pool then, and kept there for a pool that a smaller slot table
/// (`rdma_slot_table_entries`) made smaller since, so that dirty MRs never
/// hold most of the pool.
pub(crate) fn fmr_dirty_watermark(watermark: u32, pool: u32) -> u32 {
    watermark.min((pool / 2).saturating_sub(1))
}
