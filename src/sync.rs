//! Locks that stay usable after a panic elsewhere.
//!
//! cosched's mutexes guard state that every critical section leaves whole
//! (a database connection, a map updated by one insert or remove, a value
//! replaced whole), so a panic in one task, which is reported where it
//! happens, leaves nothing half-written for the next holder. Poisoning would
//! only turn one failed run into a daemon whose every run fails, so it is
//! ignored, here and only here. Imports nothing of the crate: any layer may
//! use it.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] without poisoning.
pub trait Locked<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// [`RwLock::read`] and [`RwLock::write`] without poisoning.
pub trait ReadWriteLocked<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> ReadWriteLocked<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_hands_out_its_value() {
        let m = Arc::new(Mutex::new(7));
        let rw = Arc::new(RwLock::new(8));
        let (m2, rw2) = (Arc::clone(&m), Arc::clone(&rw));
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            let _w = rw2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && rw.is_poisoned());
        assert_eq!(*m.locked(), 7);
        *rw.writing() += 1;
        assert_eq!(*rw.reading(), 9);
    }
}
