//! One process-wide helper thread that runs a task *beside* the calling thread: a `join` for
//! exactly one extra core, made for the few hundred microseconds of one request's host work.
//!
//! Why not `rayon::join`: called from outside rayon's pool (an HTTP worker), rayon injects the
//! whole join into the pool and parks the caller, so every request pays two sleeping-thread
//! wake-ups (a worker, then the caller) and keeps a thread idle. Those wake-ups were the
//! largest part of the gap between the fastest and the median `/predict` on the 2-core VM.
//! Here the caller runs its half itself and the helper is kept warm: it spins for
//! [`SPIN`] after each job or [`wake`] before it parks, and a request calls [`wake`] when it
//! arrives, so the wake-up overlaps the JSON parse instead of the image decode.
//!
//! When the helper is busy (another request has it) the caller runs both halves itself, `a`
//! first, so `a` must never wait on `b` (a producer/consumer pair where `a` produces).

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the helper spins for work after a job or a [`wake`] before it parks: longer than
/// the gap between a request's arrival and its image job (the JSON parse), far shorter than a
/// model forward (so it does not compete with the forward's threads for long).
pub const SPIN: Duration = Duration::from_micros(300);

// Slot states.
const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const READY: u8 = 2;
const DONE: u8 = 3;

type Job = *mut (dyn FnMut() + Send);

struct Slot {
    state: AtomicU8,
    /// Written by the claimer before `READY`, read by the helper after; a job's panic is
    /// written by the helper before `DONE`, read by the claimer after.
    job: UnsafeCell<Option<Job>>,
    panic: UnsafeCell<Option<Box<dyn Any + Send>>>,
}

// SAFETY: the cells are only touched by the side that owns the slot's current state (see
// above); the state transitions are release/acquire.
unsafe impl Sync for Slot {}
unsafe impl Send for Slot {}

struct Helper {
    slot: Slot,
    thread: Thread,
}

static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();

fn helper() -> Option<&'static Helper> {
    *HELPER.get_or_init(|| {
        let slot = Slot {
            state: AtomicU8::new(FREE),
            job: UnsafeCell::new(None),
            panic: UnsafeCell::new(None),
        };
        // The helper needs its own `Thread` handle inside the struct it reads, so it waits
        // for the handle to be published.
        let (tx, rx) = std::sync::mpsc::channel::<&'static Helper>();
        let handle = std::thread::Builder::new()
            .name("gr00t-beside".into())
            .spawn(move || {
                let Ok(h) = rx.recv() else { return };
                run_helper(h)
            })
            .ok()?;
        let h: &'static Helper = Box::leak(Box::new(Helper {
            slot,
            thread: handle.thread().clone(),
        }));
        tx.send(h).ok()?;
        Some(h)
    })
}

fn run_helper(h: &'static Helper) {
    let s = &h.slot;
    loop {
        let mut until = Instant::now() + SPIN;
        while s.state.load(Ordering::Acquire) != READY {
            if Instant::now() >= until {
                // `unpark` before `park` leaves a token, so a job or wake posted in between is
                // not lost; spurious returns just spin again.
                std::thread::park();
                until = Instant::now() + SPIN;
            } else {
                std::hint::spin_loop();
            }
        }
        // SAFETY: READY means the claimer stored a job that stays valid until we store DONE.
        let job = unsafe { (*s.job.get()).take() }.expect("a READY slot holds a job");
        let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*job)() }));
        if let Err(p) = result {
            // SAFETY: the claimer reads this only after DONE.
            unsafe { *s.panic.get() = Some(p) };
        }
        s.state.store(DONE, Ordering::Release);
    }
}

/// Start the helper spinning now (it will take a job within microseconds for the next
/// [`SPIN`]); call when a request arrives. Cheap when it is already awake.
pub fn wake() {
    if let Some(h) = helper() {
        h.thread.unpark();
    }
}

/// Run `a` on the helper thread and `b` on this one, and return both results. If the helper
/// is busy or cannot exist, `a` then `b` run here. Panics in either propagate after both are
/// finished.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    RA: Send,
    B: FnOnce() -> RB,
{
    let Some(h) = helper().filter(|h| {
        h.slot
            .state
            .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }) else {
        let ra = a();
        return (ra, b());
    };
    let mut a = Some(a);
    let mut ra: Option<RA> = None;
    let mut task = || ra = Some((a.take().expect("run once"))());
    let task: &mut (dyn FnMut() + Send + '_) = &mut task;
    // SAFETY: the lifetime is erased so the helper can hold the pointer; `Claim::drop` waits
    // for DONE before this frame (and what `task` borrows) can go away, even on a panic in `b`.
    let job: Job = unsafe { std::mem::transmute::<&mut (dyn FnMut() + Send + '_), Job>(task) };
    // SAFETY: we own the CLAIMED slot; the helper reads `job` only after READY.
    unsafe { *h.slot.job.get() = Some(job) };
    h.slot.state.store(READY, Ordering::Release);
    h.thread.unpark();
    let claim = Claim { h };
    let rb = catch_unwind(AssertUnwindSafe(b));
    let panic_a = claim.finish();
    match (rb, panic_a) {
        (Err(p), _) | (Ok(_), Some(p)) => resume_unwind(p),
        (Ok(rb), None) => (ra.expect("the helper ran the job"), rb),
    }
}

/// The claimer's hold on the slot: waits for the helper and frees the slot.
struct Claim {
    h: &'static Helper,
}

impl Claim {
    fn wait(&self) -> Option<Box<dyn Any + Send>> {
        let s = &self.h.slot;
        let mut spins = 0u32;
        while s.state.load(Ordering::Acquire) != DONE {
            // The helper's half is usually the longer one but ends within microseconds of
            // ours; past that, give the core away.
            if spins < 1 << 12 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // SAFETY: DONE hands the slot's cells back to us.
        let p = unsafe { (*s.panic.get()).take() };
        s.state.store(FREE, Ordering::Release);
        p
    }

    fn finish(self) -> Option<Box<dyn Any + Send>> {
        let p = self.wait();
        std::mem::forget(self);
        p
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Only reached if `finish` was not (an unwind past it): still wait, the job borrows
        // this frame.
        let _ = self.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn runs_both_halves_and_returns_both_results() {
        let data: Vec<u64> = (0..10_000).collect();
        for _ in 0..200 {
            let (a, b) = join(|| data.iter().sum::<u64>(), || data.len());
            assert_eq!((a, b), (49_995_000, 10_000));
        }
    }

    #[test]
    fn the_helper_half_runs_on_another_thread_when_free() {
        // Other tests may hold the helper for a while; retry until one join gets it.
        let me = std::thread::current().id();
        let got = (0..5000).any(|_| {
            let on_helper = join(|| std::thread::current().id(), || ()).0 != me;
            if !on_helper {
                std::thread::sleep(Duration::from_millis(1));
            }
            on_helper
        });
        assert!(got);
    }

    #[test]
    fn a_producer_never_blocks_when_the_helper_is_busy() {
        // Many threads at once: most find the helper busy and run `a` then `b` inline, where
        // `b` consumes what `a` produced.
        let done = AtomicUsize::new(0);
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(|| {
                    for i in 0..100u64 {
                        let (tx, rx) = std::sync::mpsc::channel();
                        let (_, got) = join(
                            move || {
                                for k in 0..10 {
                                    tx.send(i + k).unwrap();
                                }
                            },
                            || rx.iter().sum::<u64>(),
                        );
                        assert_eq!(got, 10 * i + 45);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(done.load(Ordering::Relaxed), 800);
    }

    #[test]
    fn a_panic_on_either_side_propagates_and_the_helper_survives() {
        let r = std::panic::catch_unwind(|| join(|| panic!("in a"), || 1));
        assert!(r.is_err());
        let r = std::panic::catch_unwind(|| join(|| 1, || panic!("in b")));
        assert!(r.is_err());
        assert_eq!(join(|| 2, || 3), (2, 3));
    }
}
