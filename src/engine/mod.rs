//! Decoding on top of the backbone: AR (the reference output), LinearSS, RecGuide
//! overlap and adaptive block sizes, many requests at once, one event stream.
//!
//! Where each rule lives: the options in `options`, the block size in `policy`,
//! acceptance in `round`, branch rows in `overlap`, costs in `cost`, per-position
//! statistics in `signals`; `scheduler` runs the rounds and `worker` puts it on a
//! thread of its own.

pub mod ablation;
pub mod ar;
pub mod backbone;
pub mod cost;
pub mod events;
pub mod options;
pub mod overlap;
pub mod policy;
pub mod round;
pub mod scheduler;
/// The logits' per-position statistics, computed in the model layer (host, device and
/// kernel paths together) and read by every rule here.
pub use crate::model::signals;
pub mod survival;
pub mod worker;

pub use ablation::Ablation;
pub use ar::{generate_ar, Generation};
pub use backbone::{Backbone, SharedBackbone};
pub use cost::{Clock, Pricing};
pub use events::{
    DecodeEvent, EventSink, Mode, NullSink, RequestStats, StopReason, Tally, VecSink,
};
pub use options::{Batching, Blocks, DecodeOptions, Preset};
pub use scheduler::{Finished, Scheduler, Submit};
pub use worker::{EngineCommand, EngineHandle, Timed};

/// Why a prompt cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptError {
    Empty,
    /// `len` tokens do not leave a position free in a window of `context`.
    TooLong {
        len: usize,
        context: usize,
    },
}

impl std::fmt::Display for PromptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptError::Empty => f.write_str("the prompt is empty"),
            PromptError::TooLong { len, context } => write!(
                f,
                "the prompt has {len} tokens but the model's context is {context}"
            ),
        }
    }
}

impl std::error::Error for PromptError {}

/// A prompt the model can take: not empty, and shorter than the `context` (a token
/// must still fit after it). The one rule AR, the scheduler, the prompt files and the
/// screen check.
pub fn check_prompt_len(len: usize, context: usize) -> Result<(), PromptError> {
    if len == 0 {
        return Err(PromptError::Empty);
    }
    if len >= context {
        return Err(PromptError::TooLong { len, context });
    }
    Ok(())
}
