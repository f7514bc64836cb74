//! btl's system tests: one binary, driving the real `btl` executable.
//!
//! Table of contents:
// The shared harness: a fresh temp dir per test and a `btl` command builder.
mod util;

// `btl score`: the spec §8 vectors end to end, output formats, bad input.
mod score;
// `btl metrics`: presets, counts behind percentages, bad input.
mod metrics;
// scripts/ms-swift/btl_reward.py, the ms-swift GRPO reward plugin, calling the real `btl score`.
mod ms_swift;
// `btl sim env`, the RL environment, driven by scripts/ms-swift/btl_env.py from Python threads.
mod sim_env;
// Debian's real `adb` against the virtual device: connect, shell, exec-out, push/pull, install.
mod adb;
// `AdbDevice` (adb_client via Debian's adb server) driving the virtual phone, faults included.
mod device;
// `btl sim serve` and `btl devices` as a user runs them, with Debian adb.
mod sim_cli;
// Debian's adb installing aapt-built, apksigner-signed APKs; pm, wm overrides and rotation.
mod packages;
// The task suite's oracles solving every template through Debian adb and `AdbDevice`.
mod tasks;
// `btl run`: the agent on the virtual phone and through real adb; oracle, default model, kill and resume.
mod run;
// `btl bench --suite sim`: the oracle at 100%, the tiny model without errors, the default model on held-out tasks, a bench over adb.
mod bench;
// `btl collect`: several devices at once, a failing one skipped, an interrupted run finished.
mod collect;
// `btl predict`: the default model on official-format samples, scored by `btl metrics`.
mod predict;
// `btl report`: the HTML replay rendered by headless Chromium.
mod report;
// `btl model quantize`: llama.cpp's quantizer, its output checked against transformers' reference.
mod model;
// LoRA adapter GGUFs on llama.cpp: transformers' PEFT reference, scale 0, bad files, `btl run --lora`.
mod lora;
// Image preprocessing bit for bit against Pillow's BICUBIC resize and transformers' Qwen2-VL processor.
mod preprocess;
