//! Fuzzes `btl sim env`'s request lines: any bytes are refused with a
//! reason or read as a request whose environment name is safe to use as a
//! directory name.

#![no_main]

use agent_core::sim::env::request::{Request, parse_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = parse_line(data) else {
        return;
    };
    let env = match envelope.request {
        Request::Reset(reset) => reset.env,
        Request::Step { env, .. } | Request::Close { env } => Some(env),
    };
    if let Some(env) = env {
        assert!((1..=64).contains(&env.0.len()) && !env.0.starts_with('.'));
        assert!(
            env.0
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        );
    }
});
