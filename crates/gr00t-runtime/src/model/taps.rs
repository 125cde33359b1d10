//! Optional sink for intermediate tensors, named like the golden `taps.safetensors`.

/// A tap callback: `(name, shape, data)`.
pub type TapFn<'a> = dyn FnMut(&str, &[usize], &[f32]) + 'a;

/// Receives `(name, shape, data)` of every intermediate tensor the forward exposes.
/// `Taps::none()` costs nothing: names are only formatted when a sink is attached.
pub struct Taps<'a> {
    sink: Option<&'a mut TapFn<'a>>,
}

impl<'a> Taps<'a> {
    /// No sink: every emit is a no-op.
    pub fn none() -> Self {
        Self { sink: None }
    }
    /// Sends every tapped tensor to `sink`.
    pub fn new(sink: &'a mut TapFn<'a>) -> Self {
        Self { sink: Some(sink) }
    }
    /// Whether a sink is attached (lets callers skip building a tensor only a tap would read).
    pub fn enabled(&self) -> bool {
        self.sink.is_some()
    }
    /// Passes `(name, shape, data)` to the sink, if any.
    pub fn emit(&mut self, name: &str, shape: &[usize], data: &[f32]) {
        if let Some(f) = self.sink.as_mut() {
            f(name, shape, data);
        }
    }
    /// Like [`Taps::emit`], building the name only when a sink is attached.
    pub fn emit_with(&mut self, name: impl FnOnce() -> String, shape: &[usize], data: &[f32]) {
        if let Some(f) = self.sink.as_mut() {
            f(&name(), shape, data);
        }
    }
}

impl Default for Taps<'_> {
    fn default() -> Self {
        Self::none()
    }
}
