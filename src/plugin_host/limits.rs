//! What one plugin instance may use: its memory limit (remembering when it was hit, so the
//! failure is told apart from other traps), and caps on tables and instances.

use wasmtime::ResourceLimiter;

/// The store's resource limits; remembers when the memory limit was what stopped a call.
pub struct Limits {
    pub memory_bytes: usize,
    /// Set when a growth past the limit stopped the instance.
    pub exceeded: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.exceeded = true;
            wasmtime::bail!("memory limit of {} bytes exceeded", self.memory_bytes);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 16)
    }

    fn instances(&self) -> usize {
        32
    }

    fn memories(&self) -> usize {
        32
    }

    fn tables(&self) -> usize {
        64
    }
}
