// SPDX-License-Identifier: GPL-2.0

//! A debugfs file that takes a number
//! ([`include/linux/debugfs.h`](srctree/include/linux/debugfs.h); C parses
//! one with `kstrtouint_from_user`), for the module's fault-injection
//! files.

use kernel::debugfs::{Dir, File};
use kernel::prelude::*;
use kernel::uaccess::UserSliceReader;

/// What a number written to the file is handed to; it may refuse one.
pub type SetU32 = fn(u32) -> Result;

/// Longest text read: ten digits and a newline, and one more byte so that
/// a longer text is refused rather than cut.
const MAX_TEXT: usize = 12;

/// The decimal `u32` user space wrote to `r`, surrounding white space
/// allowed; `EINVAL` for anything else.
fn read_u32(r: &mut UserSliceReader) -> Result<u32> {
    let mut buf = [0u8; MAX_TEXT];
    let n = r.len();
    let text = buf.get_mut(..n).ok_or(EINVAL)?;
    r.read_slice(text)?;
    core::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .ok_or(EINVAL)
}

/// A write-only file `name` in `dir`: each decimal `u32` written to it is
/// handed to `set`, whose error the write returns.
pub fn write_u32_file<'a>(
    dir: &'a Dir,
    name: &'a CStr,
    set: SetU32,
) -> impl PinInit<File<SetU32>> + 'a {
    dir.write_callback_file(name, set, &|set: &SetU32, r: &mut UserSliceReader| {
        set(read_u32(r)?)
    })
}
