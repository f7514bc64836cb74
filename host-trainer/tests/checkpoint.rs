//! Checkpoint formats and the errors bad checkpoints and inputs give.
