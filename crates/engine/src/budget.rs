//! The work one review may do. Every loop a tenant's input can lengthen (list entries
//! read, merged or matched; bytes of text the engine derives, such as `$(VAR)`
//! expansions; patch operations written) draws units from the review's [`Budget`].
//! The budget is sized from the request body with a floor and a fixed ceiling, so the
//! work of one review is bounded whatever its shape. When a draw finds the budget
//! spent, the loop stops, every later draw fails too, and the review ends with
//! [`OverBudget`] instead of a verdict: the validating webhook denies the object
//! naming the field and the limit, the mutating one allows it without a layout.
//!
//! The meter is per thread: a review runs on one thread from start to end, and the
//! loops that draw sit deep below the functions that take a review's arguments.
//! [`metered`] installs a budget for the closure it runs and restores what was there
//! before, so reviews never share a count.

use std::cell::Cell;

use thiserror::Error;

/// How much work one review may do, in units (one list entry visited, one byte of
/// derived text, one patch operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    units: u64,
}

impl Budget {
    /// Units granted per byte of the request body. A linear reading of a template
    /// visits each list entry a few times; an entry is at least a few bytes of JSON.
    pub const UNITS_PER_BYTE: u64 = 8;
    /// What any review gets, however small its body.
    pub const FLOOR: u64 = 1 << 18;
    /// What no review gets more than, however large its body: about 32 M units, which
    /// a release build spends in well under a second.
    pub const CEILING: u64 = 32 << 20;

    /// The budget of a review whose request body is `bytes` long.
    pub fn for_body(bytes: usize) -> Self {
        Self::per_byte(bytes, Self::UNITS_PER_BYTE)
    }

    /// The budget of a `bytes` long body at `units` per byte (`Limits::work_per_byte`).
    pub fn per_byte(bytes: usize, units: u64) -> Self {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        Budget {
            units: bytes
                .saturating_mul(units)
                .clamp(Self::FLOOR, Self::CEILING),
        }
    }

    /// The largest budget: for objects judged without a request body (the CLI's
    /// files, [`crate::evaluate`]).
    pub fn ceiling() -> Self {
        Budget {
            units: Self::CEILING,
        }
    }

    /// The units this budget grants.
    pub fn units(&self) -> u64 {
        self.units
    }
}

/// What a review spent, and of how much.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Units drawn (past the limit, the draw that failed is counted too).
    pub spent: u64,
    /// The units the review's budget granted.
    pub limit: u64,
}

/// A review that ran out of budget: the field whose loop found it spent, and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "reading {field} needed more than the {limit} units of work one review of this size may do (a list entry visited, a byte of derived text or a patch operation is one unit)"
)]
pub struct OverBudget {
    /// The field (in the object's terms, `spec.containers[].env`) being read.
    pub field: &'static str,
    pub limit: u64,
}

struct Meter {
    spent: Cell<u64>,
    limit: Cell<u64>,
    /// A budget is installed on this thread.
    active: Cell<bool>,
    /// The field whose draw first failed.
    over: Cell<Option<&'static str>>,
}

thread_local! {
    static METER: Meter = const {
        Meter {
            spent: Cell::new(0),
            limit: Cell::new(u64::MAX),
            active: Cell::new(false),
            over: Cell::new(None),
        }
    };
}

/// Draw `units` for work on `field`. `false` when the budget is spent (now or before):
/// the caller stops its loop, and the review ends with [`OverBudget`].
pub(crate) fn draw(field: &'static str, units: u64) -> bool {
    METER.with(|m| {
        let spent = m.spent.get().saturating_add(units);
        m.spent.set(spent);
        if spent <= m.limit.get() && m.over.get().is_none() {
            return true;
        }
        if m.over.get().is_none() {
            m.over.set(Some(field));
        }
        false
    })
}

/// [`draw`] for `n` list entries.
pub(crate) fn draw_len(field: &'static str, n: usize) -> bool {
    draw(field, u64::try_from(n).unwrap_or(u64::MAX))
}

/// Whether the budget of the review on this thread is spent.
pub(crate) fn spent() -> Option<OverBudget> {
    METER.with(|m| {
        m.over.get().map(|field| OverBudget {
            field,
            limit: m.limit.get(),
        })
    })
}

/// The work the review on this thread has done so far.
pub(crate) fn work() -> Work {
    METER.with(|m| Work {
        spent: m.spent.get(),
        limit: m.limit.get(),
    })
}

/// Restores the thread's previous meter when a metered closure ends (or unwinds).
struct Restore {
    spent: u64,
    limit: u64,
    active: bool,
    over: Option<&'static str>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        METER.with(|m| {
            m.spent.set(self.spent);
            m.limit.set(self.limit);
            m.active.set(self.active);
            m.over.set(self.over);
        });
    }
}

/// Run `f` with `budget` as the review's budget; its result and the work it did.
pub(crate) fn metered<R>(budget: Budget, f: impl FnOnce() -> R) -> (R, Work) {
    let _restore = METER.with(|m| Restore {
        spent: m.spent.replace(0),
        limit: m.limit.replace(budget.units),
        active: m.active.replace(true),
        over: m.over.replace(None),
    });
    let out = f();
    (out, work())
}

/// Whether a review's budget is installed on this thread.
pub(crate) fn installed() -> bool {
    METER.with(|m| m.active.get())
}

#[cfg(test)]
mod tests {
    use super::{Budget, draw, metered, spent, work};

    #[test]
    fn a_budget_grows_with_the_body_between_its_floor_and_ceiling() {
        assert_eq!(Budget::for_body(0).units(), Budget::FLOOR);
        assert_eq!(
            Budget::for_body(1 << 20).units(),
            (1 << 20) * Budget::UNITS_PER_BYTE
        );
        assert_eq!(Budget::for_body(usize::MAX).units(), Budget::CEILING);
    }

    #[test]
    fn a_spent_budget_stays_spent_and_names_the_first_field() {
        let (over, w) = metered(Budget::for_body(0), || {
            assert!(draw("a", Budget::FLOOR));
            assert!(!draw("b", 1));
            assert!(!draw("c", 0), "every later draw fails");
            spent()
        });
        let over = over.expect("spent");
        assert_eq!((over.field, over.limit), ("b", Budget::FLOOR));
        assert_eq!(w.spent, Budget::FLOOR + 1);
        // Outside the closure the thread's meter is what it was.
        assert!(spent().is_none());
        assert_eq!(work().spent, 0);
    }
}
