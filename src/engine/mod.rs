//! Decoding on top of the backbone: AR (the reference output), LinearSS, RecGuide
//! overlap and adaptive block sizes, many requests at once, one event stream.

pub mod adaptive;
pub mod ar;
pub mod cost;
pub mod events;
pub mod online_cost;
pub mod overlap;
pub mod regime;
pub mod round;
pub mod round_blocks;
pub mod scheduler;
pub mod signals;
pub mod survival;
pub mod worker;

pub use ar::{generate_ar, Generation, StopReason};
pub use events::{DecodeEvent, EventSink, Mode, NullSink, RequestStats, VecSink};
pub use scheduler::{Batching, DecodeOptions, Finished, Scheduler, Submit};
pub use worker::{EngineCommand, EngineHandle, OptionsPatch, Timed};
