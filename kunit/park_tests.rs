// SPDX-License-Identifier: GPL-2.0

//! A value parked while its operations complete (`rust/kext/park.rs`, the
//! state of the server's Call being read): a fresh park is taken empty and
//! once only; a value parked with operations pending is handed on by the
//! last completion, not before, and a value parked with none by the
//! parking thread; a failed completion is reported to the next taker
//! once; a value kept for good is never taken again, however its
//! operations complete. (Every order of park, completion and take is
//! checked on the host: `host/tests/park_count.rs`.)

use crate::rust::kext::park::CountedPark;
use kernel::prelude::*;

#[kunit_tests(rpcrdma_rs_park)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_park_is_taken_empty_and_once() -> Result {
        let park = CountedPark::<u32>::new();
        let t = park.take().ok_or(EINVAL)?;
        assert!(t.value.is_none());
        assert!(!t.failed);
        // Not taken twice.
        assert!(park.take().is_none());
        t.holder.release();
        // Released, takeable again.
        assert!(park.take().is_some());
        Ok(())
    }

    #[test]
    fn the_last_completion_hands_the_value_on() -> Result {
        let park = CountedPark::<u32>::new();
        let t = park.take().ok_or(EINVAL)?;
        // One of two operations completes before the park.
        assert!(!park.complete(true));
        // One is still pending.
        assert!(!t.holder.park(Some(7), 2));
        // Not taken with one pending.
        assert!(park.take().is_none());
        // The last hands it on.
        assert!(park.complete(true));
        let t = park.take().ok_or(EINVAL)?;
        assert_eq!(t.value, Some(7));
        assert!(!t.failed);
        // Parked with nothing started: the parking thread hands it on.
        assert!(t.holder.park(Some(8), 0));
        let t = park.take().ok_or(EINVAL)?;
        assert_eq!(t.value, Some(8));
        t.holder.release();
        Ok(())
    }

    #[test]
    fn a_failure_is_reported_to_the_next_taker_once() -> Result {
        let park = CountedPark::<u32>::new();
        let t = park.take().ok_or(EINVAL)?;
        assert!(!t.holder.park(Some(1), 1));
        assert!(park.complete(false));
        let t = park.take().ok_or(EINVAL)?;
        assert!(t.failed);
        assert!(t.holder.park(Some(2), 0));
        let t = park.take().ok_or(EINVAL)?;
        // Cleared by the take that reported it.
        assert!(!t.failed);
        t.holder.release();
        Ok(())
    }

    #[test]
    fn a_kept_value_is_never_taken() -> Result {
        let park = CountedPark::<u32>::new();
        let t = park.take().ok_or(EINVAL)?;
        // Given up on with two operations pending.
        t.holder.keep(3);
        assert!(!park.complete(true));
        assert!(!park.complete(false));
        assert!(park.take().is_none());
        Ok(())
    }
}
