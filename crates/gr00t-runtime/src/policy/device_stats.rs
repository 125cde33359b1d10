//! The device traffic a [`super::DeviceSupervision`] reports ([`super::DeviceSupervision::stats`]):
//! device programs launched, bytes sent for the device, bytes read back; per denoising step,
//! per forward, since the device opened. Plain data, the policy's contract: the backend that
//! runs on a device measures it where each worker exchange happens (gr00t-megakernel's
//! `counters`), never computes it from a plan.

/// Device traffic over some span (an exchange, a step, a forward, the device's life).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    /// Worker exchanges that ran a device program (a matmul, an SFPU op, a row op, ...).
    pub programs: u64,
    /// Payload bytes sent to the worker for the device (activations, the arena at boot);
    /// the JSON headers (op, shapes, kernel sources) are not counted.
    pub host_to_device_bytes: u64,
    /// Payload bytes the worker read back from the device (partials, results, read-backs).
    pub device_to_host_bytes: u64,
}

impl Traffic {
    /// What was added to the running total `later` since it read `self`.
    pub fn until(self, later: Traffic) -> Traffic {
        Traffic {
            programs: later.programs.saturating_sub(self.programs),
            host_to_device_bytes: later
                .host_to_device_bytes
                .saturating_sub(self.host_to_device_bytes),
            device_to_host_bytes: later
                .device_to_host_bytes
                .saturating_sub(self.device_to_host_bytes),
        }
    }
}

/// Sums spans: a forward's steps, a device's exchanges.
impl std::ops::AddAssign for Traffic {
    fn add_assign(&mut self, t: Traffic) {
        self.programs += t.programs;
        self.host_to_device_bytes += t.host_to_device_bytes;
        self.device_to_host_bytes += t.device_to_host_bytes;
    }
}

/// Since the device opened (reopens included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cumulative {
    /// Forwards that finished their denoising steps.
    pub forwards: u64,
    /// Denoising steps of those forwards.
    pub steps: u64,
    /// Every exchange, the boot's arena upload and any read-back included.
    pub traffic: Traffic,
}

/// The last finished forward's counts: what `gr00t-server predict --stats-json` writes under
/// `"device"` and `/info` serves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStats {
    /// Device programs of one denoising step (the largest over the forward's steps; 0 when
    /// the forward ran as one graph: its steps have no exchanges of their own).
    pub programs_per_step: u64,
    /// Bytes sent for the device in one step (the largest over the steps).
    pub host_to_device_bytes_per_step: u64,
    /// Bytes read back from the device in one step (the largest over the steps).
    pub device_to_host_bytes_per_step: u64,
    /// Denoising steps of the forward.
    pub steps: usize,
    /// Each step's counts, in order.
    pub per_step: Vec<Traffic>,
    /// The whole forward (its steps summed).
    pub forward: Traffic,
    /// Device programs of the whole forward, measured over its window: what its exchanges
    /// launched, the observation's and new timesteps' graphs included (a forward that replays
    /// its kept graph launches that graph's programs alone).
    pub programs_per_forward: u64,
    /// Bytes sent for the device over the forward's window.
    pub host_to_device_bytes_per_forward: u64,
    /// Bytes read back from the device over the forward's window.
    pub device_to_host_bytes_per_forward: u64,
    /// Since the device opened.
    pub cumulative: Cumulative,
}
