//! What the scheduler needs of a model, as a trait: its configuration, a fresh cache,
//! and one packed forward over rows of many requests. `model::Model` is the one
//! checkpoint that runs; `sim` answers it without weights (a simulated NLD-8B), and the
//! scheduler's unit tests drive a scripted fake through it, so the engine is tested
//! without a checkpoint.

use anyhow::Result;
use candle_core::Tensor;

use crate::model::{Config, KvCache, Model, RowBatch};

/// A backbone the scheduler can decode with.
pub trait Backbone: Send + Sync {
    fn config(&self) -> &Config;

    /// A fresh, empty cache for one request.
    fn new_cache(&self) -> KvCache;

    /// Every row of `batch` in one forward; `caches[row.cache]` is the committed prefix
    /// a row attends to, and committing rows append to it. Returns, per row, f32 logits
    /// `(selected positions, vocab)`. On error no cache changes length.
    fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>>;
}

/// A backbone shared between the scheduler and its caller.
pub type SharedBackbone = std::sync::Arc<dyn Backbone>;

impl<T: Backbone + ?Sized> Backbone for std::sync::Arc<T> {
    fn config(&self) -> &Config {
        T::config(self)
    }

    fn new_cache(&self) -> KvCache {
        T::new_cache(self)
    }

    fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>> {
        T::forward(self, batch, caches)
    }
}

impl Backbone for Model {
    fn config(&self) -> &Config {
        Model::config(self)
    }

    fn new_cache(&self) -> KvCache {
        Model::new_cache(self)
    }

    fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>> {
        Model::forward(self, batch, caches)
    }
}
