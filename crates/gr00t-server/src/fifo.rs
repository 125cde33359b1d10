//! A first-come, first-served lock for the one device.
//!
//! `std::sync::Mutex` makes no ordering promise: under load a request can be overtaken again
//! and again while the forward of others runs, so its latency has no bound. A robot calling
//! `/predict` at a fixed rate needs the opposite: requests are served in arrival order, and
//! each one waits at most for the ones that came before it. This is a ticket lock: taking a
//! ticket is O(1), the holder's drop hands the device to the next ticket, waiters sleep on a
//! condition variable (a forward is milliseconds to seconds; spinning would steal the core
//! the host work of the next request needs).

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct Tickets {
    /// The ticket the next arrival gets.
    next: u64,
    /// The ticket allowed to hold the device now.
    serving: u64,
}

/// The device lock: [`FifoLock::lock`] returns in ticket (arrival) order.
#[derive(Default)]
pub struct FifoLock {
    tickets: Mutex<Tickets>,
    turn: Condvar,
}

/// Holding the device; dropping it (also while unwinding from a panic) serves the next ticket.
pub struct FifoGuard<'a> {
    lock: &'a FifoLock,
}

impl FifoLock {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The ticket state. No code panics while holding this mutex, but recover from poison
    /// anyway: the two counters are always consistent between statements.
    fn tickets(&self) -> MutexGuard<'_, Tickets> {
        self.tickets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for this caller's turn (callers are served in the order they called `lock`).
    pub fn lock(&self) -> FifoGuard<'_> {
        let mut t = self.tickets();
        let mine = t.next;
        t.next += 1;
        while t.serving != mine {
            t = self.turn.wait(t).unwrap_or_else(|p| p.into_inner());
        }
        FifoGuard { lock: self }
    }

    /// Callers waiting for their turn (not counting the holder).
    pub fn waiting(&self) -> u64 {
        let t = self.tickets();
        let in_system = t.next - t.serving;
        in_system.saturating_sub(1)
    }
}

impl Drop for FifoGuard<'_> {
    fn drop(&mut self) {
        let mut t = self.lock.tickets();
        t.serving += 1;
        drop(t);
        // Every waiter checks whether it holds the next ticket; one of them does.
        self.lock.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Block until `n` callers wait (each spawned thread has taken its ticket).
    fn until_waiting(l: &FifoLock, n: u64) {
        let t0 = Instant::now();
        while l.waiting() != n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "waiters never queued"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn callers_are_served_in_arrival_order() {
        let lock = Arc::new(FifoLock::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = lock.lock();
        let mut threads = vec![];
        for i in 0..16u64 {
            let (l, o) = (lock.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _g = l.lock();
                o.lock().unwrap().push(i);
            }));
            // Thread i has its ticket before thread i+1 is started: arrival order is 0..16.
            until_waiting(&lock, i + 1);
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..16).collect::<Vec<_>>());
        assert_eq!(lock.waiting(), 0);
    }

    #[test]
    fn a_panicking_holder_hands_the_device_on() {
        let lock = Arc::new(FifoLock::new());
        let l2 = lock.clone();
        let r = std::thread::spawn(move || {
            let _g = l2.lock();
            panic!("forward failed");
        })
        .join();
        assert!(r.is_err());
        // Not deadlocked: the guard's drop ran while unwinding.
        let _g = lock.lock();
        assert_eq!(lock.waiting(), 0);
    }
}
