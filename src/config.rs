// SPDX-License-Identifier: GPL-2.0

//! Module parameters, checked once at load time.
//!
//! Pure logic (`core` only) so the same checks run on the host.

/// The module version, printed at load time.
pub(crate) const VERSION: &str = "0.1.0";

/// Credits per connection: the protocol minimum and Linux's maximum
/// (`RPCRDMA_MIN_SLOT_TABLE`, `RPCRDMA_MAX_SLOT_TABLE`).
const REQUESTS_MIN: u32 = 4;
const REQUESTS_MAX: u32 = 16384;

/// Inline thresholds: RFC 8166's default and the largest Linux accepts
/// (`RPCRDMA_MIN_INLINE`, `RPCRDMA_MAX_INLINE`).
const INLINE_MIN: u32 = 1024;
const INLINE_MAX: u32 = 65536;

/// Effective settings of the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) max_requests: u32,
    pub(crate) max_inline_read: u32,
    pub(crate) max_inline_write: u32,
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
    /// Checks the raw parameter values.
    pub(crate) fn from_params(
        max_requests: u32,
        max_inline_read: u32,
        max_inline_write: u32,
    ) -> Result<Self, ConfigError> {
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
        Ok(Self {
            max_requests,
            max_inline_read,
            max_inline_write,
        })
    }
}
