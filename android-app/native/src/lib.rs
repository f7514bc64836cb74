//! JNI bridge between the btl Android app and agent-core.
//!
//! Not built yet: this crate only reserves its place in the workspace so the
//! layout is fixed from the start. The JNI surface (create agent, run an
//! episode, cancel, free) is tracked by the Android app issue.
