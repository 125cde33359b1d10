//! What crosses between the host and a device, counted where each worker exchange happens
//! (`gr00t_device::TtDevice`), never computed from the plan: device programs launched,
//! bytes sent for the device, bytes read back; per denoising step, per forward, since boot.
//!
//! A step is the window around one `DitDevice::run_blocks`; a forward is the life of one
//! `DeviceForward` (one observation). The windows read one running total, which is exact because
//! the server runs one forward at a time on a device (its FIFO device lock).
//!
//! The figures are the policy's plain data ([`DeviceStats`], gr00t-runtime's `policy`, what a
//! [`gr00t_runtime::policy::DeviceSupervision`] reports); the measuring is here.

use std::sync::Mutex;

pub use gr00t_runtime::policy::{Cumulative, DeviceStats, Traffic};

#[derive(Debug, Default)]
struct State {
    total: Traffic,
    cumulative_forwards: u64,
    cumulative_steps: u64,
    /// Steps of the forward in progress.
    open: Option<Vec<Traffic>>,
    /// The running total when the forward in progress began.
    open_since: Traffic,
    /// Denoising steps the forward in progress ran as one graph ([`DeviceCounters::record_forward`]).
    open_graph_steps: usize,
    /// Steps of the last finished forward.
    last: Option<Vec<Traffic>>,
    /// The last finished forward's window, and its steps when it ran as one graph.
    last_window: Traffic,
    last_graph_steps: usize,
}

/// The running counts of one device. Every method takes `&self` (the device is shared).
#[derive(Debug, Default)]
pub struct DeviceCounters {
    state: Mutex<State>,
}

impl DeviceCounters {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// One worker exchange: whether it ran a device program, the payload bytes it sent and
    /// the payload bytes it got back.
    pub fn record_exchange(&self, program: bool, sent: usize, received: usize) {
        self.record(u64::from(program), sent, received);
    }

    /// One worker exchange that ran `programs` device programs (a graph runs many in one
    /// exchange, the count its worker reports), with its payload bytes each way.
    pub fn record(&self, programs: u64, sent: usize, received: usize) {
        self.with(|s| {
            s.total += Traffic {
                programs,
                host_to_device_bytes: sent as u64,
                device_to_host_bytes: received as u64,
            }
        });
    }

    /// The running total since the device opened.
    pub fn total(&self) -> Traffic {
        self.with(|s| s.total)
    }

    /// A forward starts (an unfinished one before it is dropped).
    pub fn begin_forward(&self) {
        self.with(|s| {
            s.open = Some(Vec::new());
            s.open_since = s.total;
            s.open_graph_steps = 0;
        });
    }

    /// The forward in progress ran its `steps` denoising steps as one graph (the action head
    /// on the device): it has no step windows, its counts are its window's.
    pub fn record_forward(&self, steps: usize) {
        self.with(|s| s.open_graph_steps = steps);
    }

    /// One denoising step of the forward in progress moved `step` (a window of
    /// [`DeviceCounters::total`]).
    pub fn record_step(&self, step: Traffic) {
        self.with(|s| s.open.get_or_insert_with(Vec::new).push(step));
    }

    /// The forward in progress ends; when `ok` and it ran at least one step, it becomes the
    /// last forward [`DeviceCounters::stats`] reports (a failed one is not reported).
    pub fn end_forward(&self, ok: bool) {
        self.with(|s| {
            let Some(steps) = s.open.take() else { return };
            let graph_steps = std::mem::take(&mut s.open_graph_steps);
            if ok && (!steps.is_empty() || graph_steps > 0) {
                s.cumulative_forwards += 1;
                s.cumulative_steps += (steps.len() + graph_steps) as u64;
                s.last = Some(steps);
                s.last_window = s.open_since.until(s.total);
                s.last_graph_steps = graph_steps;
            }
        });
    }

    /// The last finished forward's counts; `None` before the first.
    pub fn stats(&self) -> Option<DeviceStats> {
        self.with(|s| {
            let steps = s.last.as_ref()?;
            let mut forward = Traffic::default();
            steps.iter().for_each(|t| forward += *t);
            let max = |f: fn(&Traffic) -> u64| steps.iter().map(f).max().unwrap_or(0);
            if s.last_graph_steps > 0 {
                forward = s.last_window;
            }
            let window = s.last_window;
            Some(DeviceStats {
                programs_per_step: max(|t| t.programs),
                host_to_device_bytes_per_step: max(|t| t.host_to_device_bytes),
                device_to_host_bytes_per_step: max(|t| t.device_to_host_bytes),
                steps: steps.len() + s.last_graph_steps,
                per_step: steps.clone(),
                forward,
                programs_per_forward: window.programs,
                host_to_device_bytes_per_forward: window.host_to_device_bytes,
                device_to_host_bytes_per_forward: window.device_to_host_bytes,
                cumulative: Cumulative {
                    forwards: s.cumulative_forwards,
                    steps: s.cumulative_steps,
                    traffic: s.total,
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run one step of `programs` exchanges, each sending `sent` and receiving `got` bytes,
    /// windowed as the device backend windows `run_blocks`.
    fn step(c: &DeviceCounters, programs: usize, sent: usize, got: usize) {
        let before = c.total();
        for _ in 0..programs {
            c.record_exchange(true, sent, got);
        }
        c.record_step(before.until(c.total()));
    }

    #[test]
    fn nothing_is_reported_before_a_forward_finishes() {
        let c = DeviceCounters::default();
        c.record_exchange(false, 1000, 0); // the boot's upload
        assert_eq!(c.stats(), None);
        c.begin_forward();
        step(&c, 3, 10, 20);
        assert_eq!(
            c.stats(),
            None,
            "a forward in progress is not the last forward"
        );
    }

    #[test]
    fn steps_are_windows_of_the_exchanges_and_boot_traffic_stays_out_of_them() {
        let c = DeviceCounters::default();
        c.record_exchange(false, 1000, 0); // upload: no program, not in any step
        c.begin_forward();
        for _ in 0..4 {
            step(&c, 7, 64, 128);
        }
        c.end_forward(true);
        let s = c.stats().expect("a finished forward");
        assert_eq!(s.steps, 4);
        assert_eq!(s.programs_per_step, 7);
        assert_eq!(s.host_to_device_bytes_per_step, 7 * 64);
        assert_eq!(s.device_to_host_bytes_per_step, 7 * 128);
        assert_eq!(s.forward.programs, 28);
        assert_eq!(s.forward.host_to_device_bytes, 4 * 7 * 64);
        assert_eq!(s.cumulative.traffic.host_to_device_bytes, 1000 + 4 * 7 * 64);
        assert_eq!((s.cumulative.forwards, s.cumulative.steps), (1, 4));
        let v = serde_json::to_value(&s).unwrap();
        for key in [
            "programs_per_step",
            "host_to_device_bytes_per_step",
            "device_to_host_bytes_per_step",
            "steps",
        ] {
            assert!(v[key].is_u64(), "{key} in {v}");
        }
    }

    #[test]
    fn per_step_figures_are_the_largest_step_and_the_last_forward_replaces_the_one_before() {
        let c = DeviceCounters::default();
        c.begin_forward();
        step(&c, 9, 100, 1);
        step(&c, 2, 300, 5);
        c.end_forward(true);
        let s = c.stats().unwrap();
        // Each figure is its own largest step: programs and sent bytes the first (9, 900),
        // read-back bytes the second (2 x 5 > 9 x 1).
        assert_eq!(
            (s.programs_per_step, s.host_to_device_bytes_per_step),
            (9, 900)
        );
        assert_eq!(s.device_to_host_bytes_per_step, 10);
        c.begin_forward();
        step(&c, 1, 1, 1);
        c.end_forward(true);
        let s = c.stats().unwrap();
        assert_eq!((s.steps, s.programs_per_step), (1, 1));
        assert_eq!((s.cumulative.forwards, s.cumulative.steps), (2, 3));
        assert_eq!(s.cumulative.traffic.programs, 12);
    }

    #[test]
    fn a_failed_forward_keeps_the_last_good_one() {
        let c = DeviceCounters::default();
        c.begin_forward();
        step(&c, 5, 1, 1);
        c.end_forward(true);
        c.begin_forward();
        step(&c, 2, 1, 1);
        c.end_forward(false);
        let s = c.stats().unwrap();
        assert_eq!((s.steps, s.programs_per_step), (1, 5));
        assert_eq!(s.cumulative.forwards, 1);
        assert_eq!(
            s.cumulative.traffic.programs, 7,
            "the total still counts it"
        );
    }
}
