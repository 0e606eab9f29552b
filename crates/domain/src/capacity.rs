//! Space accounting on media: what booking a placement or a resize plan adds,
//! whether the media still have room for it, and how a booking shrinks as a
//! moved slice lands.
//!
//! A medium's `used` space is its allocated slices plus the space booked
//! (reserved) by running jobs. A new volume's slices are allocated at once; a
//! resize books its growth and move targets as reservations, which shrink as
//! moved slices switch over and are released whole when the job ends.
//!
//! The planner decides with the same arithmetic; the store runs
//! [`check_room`] again inside the transaction that books, against what is
//! stored at that moment, so a plan computed from a stale reading can never
//! over-book a medium.

use crate::model::{Gib, SlicePlacement};
use crate::planner::Reservation;
use std::collections::BTreeMap;
use thiserror::Error;

/// A medium's size and what is taken on it, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediumSpace {
    pub medium: String,
    pub size: Gib,
    /// Sum of the sizes of the slices placed on it.
    pub allocated: Gib,
    /// Space booked by running jobs.
    pub reserved: Gib,
}

impl MediumSpace {
    pub fn used(&self) -> Gib {
        self.allocated.saturating_add(self.reserved)
    }

    pub fn free(&self) -> Gib {
        self.size.saturating_sub(self.used())
    }
}

/// A booking does not fit: the medium was filled since the plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("medium '{medium}' no longer has room for this plan")]
pub struct InsufficientSpace {
    pub medium: String,
}

/// The space a new volume's placement takes, per medium.
pub fn placement_bookings(placements: &[SlicePlacement]) -> Vec<Reservation> {
    let mut per_medium: BTreeMap<&str, Gib> = BTreeMap::new();
    for p in placements {
        let total = per_medium.entry(p.medium.as_str()).or_insert(0);
        *total = total.saturating_add(p.size);
    }
    per_medium
        .into_iter()
        .map(|(medium, gib)| Reservation {
            medium: medium.to_string(),
            gib,
        })
        .collect()
}

/// Checks that every medium has room for what `bookings` add to it (amounts
/// for one medium are summed). A medium missing from `media` has no room.
/// Like the planner, a booking fits when it is at most the medium's free
/// space, so booking nothing always fits.
pub fn check_room(
    media: &[MediumSpace],
    bookings: &[Reservation],
) -> Result<(), InsufficientSpace> {
    let mut per_medium: BTreeMap<&str, Gib> = BTreeMap::new();
    for b in bookings {
        let total = per_medium.entry(b.medium.as_str()).or_insert(0);
        *total = total.saturating_add(b.gib);
    }
    for (medium, wanted) in per_medium {
        let free = media
            .iter()
            .find(|m| m.medium == medium)
            .map_or(0, MediumSpace::free);
        if wanted > free {
            return Err(InsufficientSpace {
                medium: medium.to_string(),
            });
        }
    }
    Ok(())
}

/// A move's booking on its target once the slice lives there: the slice now
/// counts as allocated at its old size, so only the growth stays booked.
pub fn reservation_after_switch(reserved: Gib, moved_slice_size: Gib) -> Gib {
    reserved.saturating_sub(moved_slice_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(medium: &str, size: Gib, allocated: Gib, reserved: Gib) -> MediumSpace {
        MediumSpace {
            medium: medium.into(),
            size,
            allocated,
            reserved,
        }
    }

    fn booking(medium: &str, gib: Gib) -> Reservation {
        Reservation {
            medium: medium.into(),
            gib,
        }
    }

    #[test]
    fn a_booking_up_to_the_free_space_fits() {
        let media = [space("m1", 20, 10, 2)];
        assert_eq!(check_room(&media, &[booking("m1", 8)]), Ok(()));
    }

    #[test]
    fn a_booking_beyond_the_free_space_names_the_medium() {
        let media = [space("m1", 20, 0, 0), space("m2", 20, 10, 2)];
        let refused = check_room(&media, &[booking("m1", 5), booking("m2", 9)]);
        assert_eq!(
            refused,
            Err(InsufficientSpace {
                medium: "m2".into()
            })
        );
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("medium 'm2' no longer has room for this plan".to_string())
        );
    }

    #[test]
    fn bookings_on_one_medium_are_summed() {
        let media = [space("m1", 20, 0, 0)];
        assert!(check_room(&media, &[booking("m1", 10), booking("m1", 10)]).is_ok());
        assert!(check_room(&media, &[booking("m1", 10), booking("m1", 11)]).is_err());
    }

    #[test]
    fn an_unknown_medium_has_no_room_but_booking_nothing_always_fits() {
        assert!(check_room(&[], &[booking("gone", 1)]).is_err());
        let full = [space("m1", 10, 12, 0)];
        assert!(check_room(&full, &[booking("m1", 0)]).is_ok());
    }

    #[test]
    fn a_placement_books_its_slice_sizes_per_medium() {
        let placement = |copy, medium: &str| SlicePlacement {
            copy,
            column: 0,
            medium: medium.into(),
            size: 7,
        };
        let bookings =
            placement_bookings(&[placement(0, "m2"), placement(1, "m1"), placement(2, "m2")]);
        assert_eq!(bookings, vec![booking("m1", 7), booking("m2", 14)]);
    }

    #[test]
    fn a_switched_move_keeps_only_its_growth_booked() {
        assert_eq!(reservation_after_switch(12, 10), 2);
        assert_eq!(reservation_after_switch(5, 10), 0, "never below zero");
    }

    #[test]
    fn free_space_never_goes_below_zero() {
        let over = space("m1", 10, 8, 4);
        assert_eq!((over.used(), over.free()), (12, 0));
    }
}
