//! Decoding on top of the backbone. AR greedy is the reference output every other mode
//! must reproduce token for token.

pub mod ar;

pub use ar::{generate_ar, Generation, StopReason};
