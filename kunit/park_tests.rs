// SPDX-License-Identifier: GPL-2.0

//! A value parked while its operations complete (`rust/kext/park.rs`, the
//! work of the server's Call being read, in its read context): a parked
//! value is taken once only; a value parked with operations pending is
//! handed on by the last completion, not before, and a value parked with
//! none by the parking thread; a failed completion is reported to the
//! next taker once; a value kept for good is never taken again, however
//! its operations complete; an idle park is never taken. (Every order of
//! park, completion and take is checked on the host:
//! `host/tests/park_count.rs`; a claim's hold, through the read contexts:
//! `read_ctxts_tests.rs`.)

use crate::rust::kext::park::CountedPark;
use kernel::prelude::*;

#[kunit_tests(rpcrdma_rs_park)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_value_is_taken_once() -> Result {
        let park = CountedPark::parked(Some(5u32));
        let (mut holder, failed) = park.take().ok_or(EINVAL)?;
        assert!(!failed);
        assert_eq!(*holder.value(), Some(5));
        // Not taken twice.
        assert!(park.take().is_none());
        // Left idle, not takeable either.
        holder.idle();
        assert!(park.take().is_none());
        // An idle park is never taken.
        assert!(CountedPark::<u32>::new().take().is_none());
        Ok(())
    }

    #[test]
    fn the_last_completion_hands_the_value_on() -> Result {
        let park = CountedPark::parked(None::<u32>);
        let (mut holder, _) = park.take().ok_or(EINVAL)?;
        *holder.value() = Some(7);
        // One of two operations completes before the park.
        assert!(!park.complete(true));
        // One is still pending.
        assert!(!holder.park(2));
        // Not taken with one pending.
        assert!(park.take().is_none());
        // The last hands it on.
        assert!(park.complete(true));
        let (mut holder, failed) = park.take().ok_or(EINVAL)?;
        assert!(!failed);
        assert_eq!(holder.value().take(), Some(7));
        // Parked with nothing started: the parking thread hands it on.
        *holder.value() = Some(8);
        assert!(holder.park(0));
        let (mut holder, _) = park.take().ok_or(EINVAL)?;
        assert_eq!(*holder.value(), Some(8));
        holder.idle();
        Ok(())
    }

    #[test]
    fn a_failure_is_reported_to_the_next_taker_once() -> Result {
        let park = CountedPark::parked(Some(1u32));
        let (holder, _) = park.take().ok_or(EINVAL)?;
        assert!(!holder.park(1));
        assert!(park.complete(false));
        let (holder, failed) = park.take().ok_or(EINVAL)?;
        assert!(failed);
        assert!(holder.park(0));
        let (holder, failed) = park.take().ok_or(EINVAL)?;
        // Cleared by the take that reported it.
        assert!(!failed);
        holder.idle();
        Ok(())
    }

    #[test]
    fn a_kept_value_is_never_taken() -> Result {
        let park = CountedPark::parked(Some(3u32));
        let (holder, _) = park.take().ok_or(EINVAL)?;
        // Given up on with two operations pending.
        holder.keep();
        assert!(!park.complete(true));
        assert!(!park.complete(false));
        assert!(park.take().is_none());
        Ok(())
    }
}
