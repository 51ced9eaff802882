//! The sandbox vendor: a local stand-in vendor over real HTTP, and herald's adapter for it.
//!
//! - [`server`] owns the vendor: its capability profile, its injected faults, and the ledger of
//!   how many times each message was really delivered, which herald's crash tests and benchmarks
//!   take as ground truth.
//! - [`adapter`] owns the other side: [`adapter::SandboxAdapter`] speaks to the server exactly as
//!   an adapter speaks to a paid vendor, through `herald-provider` and nothing else of herald.
//!
//! The JSON shapes both sides share live in one private module so that they cannot drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
mod callback;
pub mod server;
mod settings;
mod wire;

pub use adapter::{SandboxAdapter, SandboxRoute, SandboxRouteError};
pub use server::{
    Arrival, CallbackTarget, Fault, FaultRule, Ledger, Profile, SandboxClient, SandboxConfig,
    SandboxHandle, Trigger, parse_faults, serve, spawn,
};
pub use settings::Settings;
pub use wire::{CallbackBody, reports_for};
