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
//!
//! On Linux the helper is also kept off the caller's CPU (its affinity is every CPU the
//! process may use but the caller's, updated when the caller moves). Without that, a helper
//! woken from a park on a VM was queued on the waking CPU 86 % of the time (the scheduler
//! avoids an idle vCPU the host has descheduled), so it ran only when the caller gave its CPU
//! up: medians of 1.4–1.7 ms per `/predict` after 2–10 ms of idle instead of 0.35–0.53 ms
//! (`cargo bench -p gr00t-server --bench overhead_after_idle`).

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
// SAFETY: the slot holds a job pointer and a panic payload that are handed between exactly two
// threads under the same ownership protocol; nothing in it is tied to the creating thread.
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
                #[cfg(target_os = "linux")]
                steer::record_helper();
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
        // SAFETY: the job points at the claimer's closure, which stays alive (the claimer
        // waits for DONE) and is called exactly once, here.
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
        #[cfg(target_os = "linux")]
        steer::keep_off_caller();
        h.thread.unpark();
    }
}

/// Keeping the helper off the calling thread's CPU (see the module notes).
#[cfg(target_os = "linux")]
mod steer {
    use std::sync::Mutex;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The helper's thread id (0 until it has started).
    static TID: AtomicI32 = AtomicI32::new(0);
    /// The CPUs the helper may use at all: its affinity when it started (the process's).
    static ALLOWED: OnceLock<Option<libc::cpu_set_t>> = OnceLock::new();
    /// The CPU the helper is kept off now, if any. `try_lock`: a caller never waits here.
    static OFF: Mutex<Option<usize>> = Mutex::new(None);

    /// On the helper thread, once, before it takes any job.
    pub(super) fn record_helper() {
        // SAFETY: plain syscalls on this thread; the set is written by the kernel.
        let allowed = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            (libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) == 0).then_some(set)
        };
        let _ = ALLOWED.set(allowed);
        // SAFETY: gettid has no preconditions.
        TID.store(unsafe { libc::gettid() }, Ordering::Release);
    }

    /// The helper's thread id, 0 before it has started.
    #[cfg(test)]
    pub(super) fn helper_tid() -> i32 {
        TID.load(Ordering::Acquire)
    }

    /// The allowed CPUs without `cpu`, or `None` if that leaves none (or nothing is known).
    pub(super) fn all_but(allowed: &libc::cpu_set_t, cpu: usize) -> Option<libc::cpu_set_t> {
        let mut set = *allowed;
        // SAFETY: CPU_* only index the set (CPU_CLR ignores CPUs past its size).
        unsafe {
            libc::CPU_CLR(cpu, &mut set);
            (libc::CPU_COUNT(&set) > 0).then_some(set)
        }
    }

    /// Make the helper's affinity exclude the CPU this thread runs on (a no-op when it
    /// already does; one `sched_setaffinity` when the caller has moved).
    pub(super) fn keep_off_caller() {
        // SAFETY: sched_getcpu has no preconditions.
        let Ok(cpu) = usize::try_from(unsafe { libc::sched_getcpu() }) else {
            return;
        };
        let tid = TID.load(Ordering::Acquire);
        let Some(Some(allowed)) = ALLOWED.get() else {
            return;
        };
        let Ok(mut off) = OFF.try_lock() else { return };
        if tid == 0 || *off == Some(cpu) {
            return;
        }
        let Some(set) = all_but(allowed, cpu) else {
            return;
        };
        // SAFETY: `set` is a valid cpu_set_t of the size given; failure (a CPU set the
        // process may no longer use) only leaves the old affinity.
        if unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) } == 0 {
            *off = Some(cpu);
        }
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
    #[cfg(target_os = "linux")]
    steer::keep_off_caller();
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

/// A wait for another thread that is expected within microseconds: spin `limit` times, then
/// give the core away on every further round (the other thread may have been preempted).
pub(crate) struct Backoff {
    spins: u32,
    limit: u32,
}

impl Backoff {
    pub(crate) fn new(limit: u32) -> Self {
        Self { spins: 0, limit }
    }

    /// One round of waiting.
    pub(crate) fn pause(&mut self) {
        if self.spins < self.limit {
            self.spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The claimer's hold on the slot: waits for the helper and frees the slot.
struct Claim {
    h: &'static Helper,
}

impl Claim {
    fn wait(&self) -> Option<Box<dyn Any + Send>> {
        let s = &self.h.slot;
        // The helper's half is usually the longer one but ends within microseconds of ours;
        // past that, give the core away.
        let mut backoff = Backoff::new(1 << 12);
        while s.state.load(Ordering::Acquire) != DONE {
            backoff.pause();
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

    #[cfg(target_os = "linux")]
    #[test]
    fn all_but_drops_one_cpu_and_never_empties_the_set() {
        // SAFETY: CPU_* only index the zeroed set.
        unsafe {
            let mut two: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut two);
            libc::CPU_SET(1, &mut two);
            let s = steer::all_but(&two, 0).unwrap();
            assert!(!libc::CPU_ISSET(0, &s) && libc::CPU_ISSET(1, &s));
            let s = steer::all_but(&two, 5).unwrap();
            assert_eq!(libc::CPU_COUNT(&s), 2);
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(3, &mut one);
            assert!(steer::all_but(&one, 3).is_none());
        }
    }

    /// After a `wake` the helper may not run on the waking thread's CPU (where the process
    /// has two or more). Other tests wake it from other threads at the same time, so this
    /// looks for one observation where nothing moved in between.
    #[cfg(target_os = "linux")]
    #[test]
    fn wake_keeps_the_helper_off_the_callers_cpu() {
        // SAFETY: plain syscalls with valid, correctly sized sets.
        unsafe {
            let mut mine: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut mine),
                0
            );
            if libc::CPU_COUNT(&mine) < 2 {
                eprintln!("one CPU: nothing to keep the helper off");
                return;
            }
            wake();
            let tid = (0..1000)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(1));
                    steer::helper_tid()
                })
                .find(|&t| t != 0)
                .expect("the helper started");
            let seen = (0..2000).any(|_| {
                let before = libc::sched_getcpu();
                wake();
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let ok = libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set);
                let after = libc::sched_getcpu();
                ok == 0
                    && before == after
                    && !libc::CPU_ISSET(before as usize, &set)
                    && libc::CPU_COUNT(&set) >= 1
            });
            assert!(
                seen,
                "the helper's affinity never excluded the caller's CPU"
            );
        }
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
