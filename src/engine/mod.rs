//! Decoding on top of the backbone: AR (the reference output), LinearSS, RecGuide
//! overlap and adaptive block sizes, many requests at once, one event stream.
//!
//! Where each rule lives: the options in `options`, the block size in `policy`,
//! acceptance in `round`, branch rows in `overlap`, costs in `cost`, per-position
//! statistics in `signals`; `scheduler` runs the rounds and `worker` puts it on a
//! thread of its own.

pub mod ar;
pub mod backbone;
pub mod cost;
pub mod events;
pub mod options;
pub mod overlap;
pub mod policy;
pub mod round;
pub mod scheduler;
pub mod signals;
pub mod survival;
pub mod worker;

pub use ar::{generate_ar, Generation};
pub use backbone::Backbone;
pub use events::{
    DecodeEvent, EventSink, Mode, NullSink, RequestStats, StopReason, Tally, VecSink,
};
pub use options::{Blocks, DecodeOptions, Preset};
pub use scheduler::{Batching, Clock, Finished, Scheduler, Submit};
pub use worker::{EngineCommand, EngineHandle, Timed};

/// A prompt the model can take: not empty, and shorter than the `context` (a token
/// must still fit after it). The one rule AR, the scheduler and the prompt files check.
pub fn check_prompt_len(len: usize, context: usize) -> anyhow::Result<()> {
    anyhow::ensure!(len > 0, "the prompt is empty");
    anyhow::ensure!(
        len < context,
        "the prompt has {len} tokens but the model's context is {context}"
    );
    Ok(())
}
