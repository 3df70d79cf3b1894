// SPDX-License-Identifier: GPL-2.0

//! The connection's RDMA-CM id as its [`super::Conn`] holds it.

use crate::sys::rdma_cm::CmId;
use kernel::sync::lock::{mutex::MutexBackend, Guard};

/// A connection's id, kept under the `Conn`'s lock.
///
/// Dropping a [`CmId`] outside its own handler takes the CM's handler lock and
/// waits for the QP's holders, and handlers take the `Conn` lock: an id
/// dropped under that lock could deadlock. The slot is how the rule is kept.
///
/// # Invariants
///
/// The id is never dropped while the lock guarding the slot is held: it is put
/// only into an empty slot (a second id is handed back to the caller), and it
/// leaves only through [`IdSlot::take_unlocked`], which releases the lock
/// before it returns the id, or with the slot itself (when its owner is freed,
/// and no one can hold the lock any more).
pub(super) struct IdSlot(Option<CmId>);

impl IdSlot {
    /// An empty slot: the connection has no id yet.
    pub(super) const fn new() -> Self {
        IdSlot(None)
    }

    /// The id, while the connection holds it.
    pub(super) fn get(&self) -> Option<&CmId> {
        self.0.as_ref()
    }

    /// Keeps `cm` if the slot is empty; an occupied slot hands it back, for
    /// the caller to drop once unlocked.
    pub(super) fn put(&mut self, cm: CmId) -> Result<(), CmId> {
        if self.0.is_some() {
            return Err(cm);
        }
        self.0 = Some(cm);
        Ok(())
    }

    /// Takes the id out of the slot `slot` finds in the locked value, and
    /// releases the lock before the id is returned.
    pub(super) fn take_unlocked<T: Unpin>(
        mut g: Guard<'_, T, MutexBackend>,
        slot: impl FnOnce(&mut T) -> &mut IdSlot,
    ) -> Option<CmId> {
        let cm = slot(&mut g).0.take();
        drop(g);
        cm
    }
}
