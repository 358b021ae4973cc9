//! The planner's lookups of models by name, counted. A plan must grow linearly with the
//! project; tests prove it by counting the work a plan does (these lookups and the
//! relations it asks about), not by timing it.

use std::cell::Cell;
use std::collections::HashMap;

use stb_model::planning::PlanModel;

thread_local! {
    static LOOKUPS: Cell<u64> = const { Cell::new(0) };
}

/// Lookups made on this thread so far (a test reads it before and after a plan).
#[must_use]
pub fn lookups() -> u64 {
    LOOKUPS.with(Cell::get)
}

/// A project's models by name, built once per plan.
pub struct ModelIndex<'m> {
    by_name: HashMap<&'m str, &'m PlanModel>,
}

impl<'m> ModelIndex<'m> {
    #[must_use]
    pub fn new(models: &'m [PlanModel]) -> Self {
        Self {
            by_name: models.iter().map(|m| (m.name.as_str(), m)).collect(),
        }
    }

    /// The model called `name`, if the project has one.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&'m PlanModel> {
        LOOKUPS.with(|count| count.set(count.get() + 1));
        self.by_name.get(name).copied()
    }

    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests;
