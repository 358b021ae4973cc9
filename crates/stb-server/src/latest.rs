//! A value a background task keeps current and requests read (a worker's health): a
//! change made under a lock another thread poisoned is dropped, a read still answers.

use std::sync::Mutex;

pub struct Latest<T>(Mutex<T>);

impl<T: Clone> Latest<T> {
    pub fn new(value: T) -> Self {
        Self(Mutex::new(value))
    }

    pub fn update(&self, change: impl FnOnce(&mut T)) {
        if let Ok(mut value) = self.0.lock() {
            change(&mut value);
        }
    }

    #[must_use]
    pub fn get(&self) -> T {
        self.0
            .lock()
            .map(|v| v.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}
