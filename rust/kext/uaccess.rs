// SPDX-License-Identifier: GPL-2.0

//! A number written to a file by user space (C `kstrtouint_from_user`,
//! [`include/linux/kstrtox.h`](srctree/include/linux/kstrtox.h)), for the
//! module's debugfs files that take one.

use kernel::prelude::*;
use kernel::uaccess::UserSliceReader;

/// Longest text read: ten digits and a newline, and one more byte so that
/// a longer text is refused rather than cut.
const MAX_TEXT: usize = 12;

/// The decimal `u32` user space wrote to `r`, surrounding white space
/// allowed; `EINVAL` for anything else.
pub fn read_u32(r: &mut UserSliceReader) -> Result<u32> {
    let mut buf = [0u8; MAX_TEXT];
    let n = r.len();
    let text = buf.get_mut(..n).ok_or(EINVAL)?;
    r.read_slice(text)?;
    core::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .ok_or(EINVAL)
}
