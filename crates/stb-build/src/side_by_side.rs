//! Independent warehouse reads sent at once instead of one after another. A plan's
//! measurements are a handful of requests whose answers do not depend on each other; sent
//! in turn, their round trips and the server's analysis of each add up (at 10,000 models
//! about 3.5 s of a cold plan), while the server answers several at once on its cores.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Requests in flight at once per call: a plan's measurements make a few such calls at
/// once (up to eight requests in all), enough to keep a small server's cores busy and far
/// below the server's own limit on a user's queries.
const IN_FLIGHT: usize = 2;

/// `work` applied to every item, a few at a time on their own threads; the results in the
/// items' order.
pub(crate) fn each<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.iter().map(&work).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..IN_FLIGHT.min(items.len()) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else { break };
                    let result = work(item);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[index] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .flatten()
        .collect()
}

/// A scoped thread's result; its panic goes on in the caller.
pub(crate) fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_worked_once_and_the_results_keep_the_items_order() {
        let items: Vec<u32> = (0..37).collect();
        let calls = AtomicUsize::new(0);
        let results = each(&items, |item| {
            calls.fetch_add(1, Ordering::Relaxed);
            item * 2
        });
        assert_eq!(calls.load(Ordering::Relaxed), 37);
        assert_eq!(results, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(each(&[] as &[u32], |i| *i).is_empty());
    }

    #[test]
    fn the_items_are_worked_at_the_same_time() {
        // Each item waits for the other to start: worked one after another, the first
        // would wait in vain and say so (after two minutes, so a busy machine cannot make
        // it fail).
        let started = std::sync::Mutex::new(0_usize);
        let both = std::sync::Condvar::new();
        let results = each(&[1, 2], |item| {
            let mut count = started.lock().expect("lock");
            *count += 1;
            both.notify_all();
            let (count, waited) = both
                .wait_timeout_while(count, std::time::Duration::from_secs(120), |c| *c < 2)
                .expect("lock");
            drop(count);
            (*item, !waited.timed_out())
        });
        assert_eq!(results, vec![(1, true), (2, true)]);
    }
}
