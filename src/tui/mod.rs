//! The terminal UI: a reducer over `DecodeEvent`s and user actions, panes drawn from a
//! state snapshot, themes and keys from TOML, the live app and the replayer.

pub mod action;
pub mod app;
pub mod clipboard;
pub mod config;
pub mod input;
pub mod keymap;
pub mod panes;
pub mod render;
pub mod state;
pub mod terminal;
pub mod theme;
