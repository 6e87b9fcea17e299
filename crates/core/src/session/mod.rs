//! Sessions and the cancel-aware turn loop (docs/turn.md follows one turn through these files).
//!
//! One prompt = one turn = one server stream (plus resume attempts). The loop sends the run
//! request, heartbeats every 5 s, answers every server request (exec, KV, interaction) from
//! handler tasks that write through the shared sender, translates updates into a bounded
//! queue, keeps checkpoints as raw bytes, detects stalls, resumes after drops, and resolves
//! `cancelled` within a bounded time whatever the server does.
//!
//! - [`config`]: what a client and its sessions are made with, and what a turn returns;
//! - [`client`]: [`AgentClient`] and [`Session`] (one conversation, at most one turn at a time);
//! - `cards`: the tool cards as the client has been told of them (ids unique in the session,
//!   announced before they are updated, nothing new after a cancel);
//! - `inner`: what a session's handles share with its turn loop;
//! - [`turn`]: the [`Turn`] handle and the state its readers share with the loop;
//! - `readers`: what the readers want done with updates that do not fit the queue;
//! - `turn_loop`: the task that runs a turn, attempt after attempt (`deltas`: runs of text
//!   deltas merged before they are translated);
//! - `messages`: the client messages a session builds (run request, prewarm, cancel…);
//! - `retry`: whether a failed stream is resumed, and after how long;
//! - `exec`, `kv`, `interaction`, `request_context`: the answers to the server's requests
//!   (`shell_stream`: a streaming shell's events; [`exec_defaults`]: the typed answers given
//!   when the host has none; [`tool_runs`]: the client's built-in tools, behind the host's
//!   permission policy).

#[cfg(test)]
mod card_properties;
pub(crate) mod cards;
mod client;
mod config;
mod deltas;
mod exec;
pub mod exec_defaults;
mod inner;
mod interaction;
mod interaction_runs;
mod kv;
mod messages;
mod readers;
mod request_context;
mod retry;
mod shell_stream;
pub mod tool_runs;
mod turn;
mod turn_loop;

pub use crate::updates::DeliverBatch;
pub use client::{AgentClient, Session};
pub use config::{
    ClientConfig, ClientOptions, PromptExtras, SavedSession, SessionOptions, Timing, TurnResult, TurnUsage,
};
pub use turn::{EndHook, Turn};
