//! What one plugin instance may use: its memory limit, over all its memories together
//! (remembering when it was hit, so the failure is told apart from other traps), and caps on
//! tables, memories and instances.

use wasmtime::ResourceLimiter;

/// The store's resource limits; remembers when the memory limit was what stopped a call.
pub(super) struct Limits {
    memory_bytes: usize,
    /// Bytes of linear memory of every memory of the instance (a component may have several).
    used: usize,
    /// `used` before the growth under way, restored if the growth fails after all.
    before: usize,
    /// Set when a growth past the limit stopped the instance.
    pub(super) exceeded: bool,
}

impl Limits {
    /// Bytes of linear memory the instance has now.
    pub(super) fn used(&self) -> usize {
        self.used
    }

    pub(super) fn new(memory_bytes: usize) -> Self {
        Self {
            memory_bytes,
            used: 0,
            before: 0,
            exceeded: false,
        }
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.memory_bytes {
            self.exceeded = true;
            wasmtime::bail!("memory limit of {} bytes exceeded", self.memory_bytes);
        }
        self.before = self.used;
        self.used = total;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used = self.before;
        Ok(())
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
        16
    }

    fn memories(&self) -> usize {
        4
    }

    fn tables(&self) -> usize {
        32
    }
}
