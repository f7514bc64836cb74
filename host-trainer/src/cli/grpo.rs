//! `btl-train grpo`, `btl-train sft` and `btl-train induction`: a training
//! run from a TOML configuration, every option of which a flag can also set
//! (flags win). They share the configuration, the checkpoints and the logs;
//! `sft` and `induction` ignore the `[grpo]` and `[reward]` sections.
//!
//! Flags are written into the configuration's TOML table before it is read,
//! so a flag and a file line go through the same checks and errors.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use agent_core::process::{Failure, Outcome};
use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressStyle};
use toml::{Table, Value};

use crate::error::Error;
use crate::grpo::config::{TrainConfig, TrainObjective, sets_lr};
use crate::grpo::log::SignalWatch;
use crate::grpo::run::{Progress, run};
use crate::grpo::trainer::BtlReward;

#[derive(Debug, clap::Args)]
pub struct GrpoArgs {
    /// The run's configuration (TOML); flags override its values.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Continue from the latest checkpoint of the output directory, or from
    /// the checkpoint directory given.
    #[arg(long, num_args = 0..=1, value_name = "CHECKPOINT")]
    resume: Option<Option<PathBuf>>,

    /// [model] Hugging Face checkpoint directory.
    #[arg(long, help_heading = "Model")]
    checkpoint: Option<PathBuf>,
    /// [model] tokenizer.json [default: the checkpoint's].
    #[arg(long, help_heading = "Model")]
    tokenizer: Option<PathBuf>,
    /// [model] lora or full.
    #[arg(long, help_heading = "Model")]
    mode: Option<String>,
    /// [model] f32, f64 or bf16 (bfloat16 autocast, float32 trained weights) [default: bf16 on CUDA, f32 on the CPU].
    #[arg(long, help_heading = "Model")]
    precision: Option<String>,
    /// [model] cpu, cuda or cuda:N [default: CUDA if available].
    #[arg(long, help_heading = "Model")]
    device: Option<String>,
    /// [model] train the vision tower too (full mode).
    #[arg(long, help_heading = "Model")]
    train_vision: bool,

    /// [data] sample files (official JSON format); repeatable.
    #[arg(long, help_heading = "Data")]
    samples: Vec<PathBuf>,
    /// [data] override every sample's max_pixels.
    #[arg(long, help_heading = "Data")]
    max_pixels: Option<i64>,
    /// [data] keep the file order instead of reshuffling each epoch.
    #[arg(long, help_heading = "Data")]
    no_shuffle: bool,

    /// [lora] rank.
    #[arg(long, help_heading = "LoRA")]
    lora_r: Option<i64>,
    /// [lora] alpha (the update is scaled by alpha / r).
    #[arg(long, help_heading = "LoRA")]
    lora_alpha: Option<f64>,
    /// [lora] dropout.
    #[arg(long, help_heading = "LoRA")]
    lora_dropout: Option<f64>,
    /// [lora] projections, comma-separated (q_proj,k_proj,…).
    #[arg(long, value_delimiter = ',', help_heading = "LoRA")]
    lora_target_modules: Option<Vec<String>>,

    /// [grpo] completions per prompt (G).
    #[arg(long, help_heading = "GRPO")]
    num_generations: Option<i64>,
    /// [grpo] sampling temperature.
    #[arg(long, help_heading = "GRPO")]
    temperature: Option<f64>,
    /// [grpo] nucleus mass.
    #[arg(long, help_heading = "GRPO")]
    top_p: Option<f64>,
    /// [grpo] largest logits kept (0: all).
    #[arg(long, help_heading = "GRPO")]
    top_k: Option<i64>,
    /// [grpo] KL weight β.
    #[arg(long, help_heading = "GRPO")]
    beta: Option<f64>,
    /// [grpo] clip range ε.
    #[arg(long, help_heading = "GRPO")]
    epsilon: Option<f64>,
    /// [grpo] most tokens per completion.
    #[arg(long, help_heading = "GRPO")]
    max_completion_length: Option<i64>,
    /// [grpo] prompts per optimizer step.
    #[arg(long, help_heading = "GRPO")]
    prompts_per_step: Option<i64>,
    /// [grpo] completions per backward pass (0: the whole group).
    #[arg(long, help_heading = "GRPO")]
    micro_batch: Option<i64>,

    /// [grpo] skip groups whose rewards are all equal (false trains on
    /// their β·KL term, as TRL and ms-swift do) [default: true].
    #[arg(long, value_name = "BOOL", help_heading = "GRPO")]
    skip_flat_groups: Option<bool>,

    /// [online] train online, on the virtual phone: an `[online]` section
    /// with its defaults when the configuration has none.
    #[arg(long, help_heading = "Online GRPO")]
    online: bool,
    /// [online] suite tasks the episodes play, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', help_heading = "Online GRPO")]
    online_tasks: Option<Vec<String>>,
    /// [online] episodes per optimizer step, each on its own virtual phone.
    #[arg(long, help_heading = "Online GRPO")]
    phones: Option<i64>,

    /// [sft] samples per optimizer step.
    #[arg(long, help_heading = "SFT")]
    samples_per_step: Option<i64>,
    /// [sft] samples per forward/backward pass, sharing their prompts'
    /// common prefix (`sft.micro_batch`).
    #[arg(long, help_heading = "SFT")]
    sft_micro_batch: Option<i64>,
    /// [sft] how many times the tokens that write a value the goal names
    /// count in the loss (`sft.value_weight`; 1 counts them once).
    #[arg(long, help_heading = "SFT")]
    value_weight: Option<f64>,

    /// [induction] random strings per optimizer step.
    #[arg(long, help_heading = "Induction")]
    sequences_per_step: Option<i64>,
    /// [induction] weight of the warm-up strings' copy loss added to every
    /// SFT step (`induction.sft_weight`; 0 adds none).
    #[arg(long, help_heading = "Induction")]
    copy_weight: Option<f64>,

    /// [reward] released or paper.
    #[arg(long, help_heading = "Reward")]
    reward_mode: Option<String>,
    /// [reward] format,blink,link weights.
    #[arg(long, value_delimiter = ',', num_args = 3, help_heading = "Reward")]
    reward_weights: Option<Vec<f64>>,

    /// [optim] peak learning rate.
    #[arg(long, help_heading = "Optimizer")]
    lr: Option<f64>,
    /// [optim] AdamW β₁.
    #[arg(long, help_heading = "Optimizer")]
    beta1: Option<f64>,
    /// [optim] AdamW β₂.
    #[arg(long, help_heading = "Optimizer")]
    beta2: Option<f64>,
    /// [optim] AdamW ε.
    #[arg(long, help_heading = "Optimizer")]
    adam_eps: Option<f64>,
    /// [optim] decoupled weight decay.
    #[arg(long, help_heading = "Optimizer")]
    weight_decay: Option<f64>,
    /// [optim] gradient-norm limit (0: off).
    #[arg(long, help_heading = "Optimizer")]
    max_grad_norm: Option<f64>,
    /// [optim] fraction of steps spent warming up.
    #[arg(long, help_heading = "Optimizer")]
    warmup_ratio: Option<f64>,

    /// [run] optimizer steps.
    #[arg(long, help_heading = "Run")]
    steps: Option<i64>,
    /// [run] stop after this step, the schedule still --steps long.
    #[arg(long, help_heading = "Run")]
    stop_at: Option<i64>,
    /// [run] seed of every random choice.
    #[arg(long, help_heading = "Run")]
    seed: Option<i64>,
    /// [run] checkpoints, metrics.jsonl and curves.png go here.
    #[arg(long, help_heading = "Run")]
    output_dir: Option<PathBuf>,
    /// [run] checkpoint every N steps (0: only at the end).
    #[arg(long, help_heading = "Run")]
    save_every: Option<i64>,
}

/// Sets `section.key` in `table`.
fn set(table: &mut Table, section: &str, key: &str, value: Value) {
    let entry = table
        .entry(section.to_owned())
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(t) = entry {
        t.insert(key.to_owned(), value);
    }
}

/// A path given on the command line is relative to the working directory.
fn path_value(path: &Path) -> Result<Value, Failure> {
    let absolute = std::path::absolute(path)
        .map_err(|e| Failure::BadInput(anyhow!("{}: {e}", path.display())))?;
    Ok(Value::String(absolute.to_string_lossy().into_owned()))
}

impl GrpoArgs {
    /// The configuration: the file's table with the flags written over it.
    fn config(&self, objective: TrainObjective) -> Result<TrainConfig, Failure> {
        let (mut table, base, origin, file_text) = match &self.config {
            Some(file) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| Failure::BadInput(anyhow!("{}: {e}", file.display())))?;
                let table: Table = text
                    .parse()
                    .map_err(|e| Failure::BadInput(anyhow!("{}: {e}", file.display())))?;
                let base = file.parent().unwrap_or(Path::new("."));
                (
                    table,
                    base.to_owned(),
                    file.display().to_string(),
                    Some(text),
                )
            }
            None => (
                Table::new(),
                PathBuf::from("."),
                "the flags".to_owned(),
                None,
            ),
        };
        // The run's checkpoints keep its configuration, and `export` and
        // `--resume` read its paths from there: absolute, they hold from
        // any working directory.
        let dir = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &base
        };
        let base = std::path::absolute(dir)
            .map_err(|e| Failure::BadInput(anyhow!("{}: {e}", dir.display())))?;
        let t = &mut table;
        let method = match objective {
            TrainObjective::Grpo => "grpo",
            TrainObjective::Sft => "sft",
            TrainObjective::Induction => "induction",
        };
        set(t, "run", "objective", Value::String(method.to_owned()));
        if let Some(p) = &self.checkpoint {
            set(t, "model", "checkpoint", path_value(p)?);
        }
        if let Some(p) = &self.tokenizer {
            set(t, "model", "tokenizer", path_value(p)?);
        }
        let strings = [
            ("model", "mode", &self.mode),
            ("model", "precision", &self.precision),
            ("model", "device", &self.device),
            ("reward", "mode", &self.reward_mode),
        ];
        for (section, key, value) in strings {
            if let Some(v) = value {
                set(t, section, key, Value::String(v.clone()));
            }
        }
        if self.train_vision {
            set(t, "model", "train_vision", Value::Boolean(true));
        }
        if !self.samples.is_empty() {
            let files = self
                .samples
                .iter()
                .map(|p| path_value(p))
                .collect::<Result<Vec<_>, _>>()?;
            set(t, "data", "samples", Value::Array(files));
        }
        if let Some(skip) = self.skip_flat_groups {
            set(t, "grpo", "skip_flat_groups", Value::Boolean(skip));
        }
        if self.online || self.online_tasks.is_some() || self.phones.is_some() {
            t.entry("online".to_owned())
                .or_insert_with(|| Value::Table(Table::new()));
        }
        if let Some(tasks) = &self.online_tasks {
            let list = tasks.iter().map(|t| Value::String(t.clone())).collect();
            set(t, "online", "tasks", Value::Array(list));
        }
        if self.no_shuffle {
            set(t, "data", "shuffle", Value::Boolean(false));
        }
        let integers = [
            ("data", "max_pixels", self.max_pixels),
            ("lora", "r", self.lora_r),
            ("grpo", "num_generations", self.num_generations),
            ("grpo", "top_k", self.top_k),
            ("grpo", "max_completion_length", self.max_completion_length),
            ("grpo", "prompts_per_step", self.prompts_per_step),
            ("grpo", "micro_batch", self.micro_batch),
            ("online", "phones", self.phones),
            ("sft", "samples_per_step", self.samples_per_step),
            ("sft", "micro_batch", self.sft_micro_batch),
            ("induction", "sequences_per_step", self.sequences_per_step),
            ("run", "steps", self.steps),
            ("run", "stop_at", self.stop_at),
            ("run", "seed", self.seed),
            ("run", "save_every", self.save_every),
        ];
        for (section, key, value) in integers {
            if let Some(v) = value {
                set(t, section, key, Value::Integer(v));
            }
        }
        let floats = [
            ("lora", "alpha", self.lora_alpha),
            ("lora", "dropout", self.lora_dropout),
            ("grpo", "temperature", self.temperature),
            ("grpo", "top_p", self.top_p),
            ("grpo", "beta", self.beta),
            ("grpo", "epsilon", self.epsilon),
            ("optim", "lr", self.lr),
            ("optim", "beta1", self.beta1),
            ("optim", "beta2", self.beta2),
            ("optim", "eps", self.adam_eps),
            ("optim", "weight_decay", self.weight_decay),
            ("optim", "max_grad_norm", self.max_grad_norm),
            ("optim", "warmup_ratio", self.warmup_ratio),
            ("induction", "sft_weight", self.copy_weight),
            ("sft", "value_weight", self.value_weight),
        ];
        for (section, key, value) in floats {
            if let Some(v) = value {
                set(t, section, key, Value::Float(v));
            }
        }
        if let Some(modules) = &self.lora_target_modules {
            let list = modules.iter().map(|m| Value::String(m.clone())).collect();
            set(t, "lora", "target_modules", Value::Array(list));
        }
        if let Some(w) = &self.reward_weights {
            let mut weights = Table::new();
            for (name, v) in ["format", "blink", "link"].iter().zip(w) {
                weights.insert((*name).to_owned(), Value::Float(*v));
            }
            set(t, "reward", "weights", Value::Table(weights));
        }
        if let Some(p) = &self.output_dir {
            set(t, "run", "output_dir", path_value(p)?);
        }
        let lr_set = sets_lr(t);
        let mut config = merged_config(table, file_text.as_deref())
            .map_err(|e| Failure::BadInput(anyhow!("{origin}: {e}")))?;
        config.default_lr_unless_set(lr_set);
        config.resolve_paths(&base);
        config
            .validate()
            .map_err(|e| Failure::BadInput(anyhow!("{origin}: {e}")))?;
        Ok(config)
    }
}

/// The configuration of the file's table with the flags written over it.
/// A value it refuses is named by its key; where the file's own text is
/// refused the same way, by the file's line too. (Written back to text,
/// the merged table would put the flags' keys among the file's lines and
/// its errors on lines the file does not have.)
fn merged_config(table: Table, file_text: Option<&str>) -> Result<TrainConfig, String> {
    table.try_into::<TrainConfig>().map_err(|merged| {
        let shown = merged.to_string();
        // The key the merged table's error is about (`… in `optim.lr``):
        // the file's error must be on that key's line, since a flag may
        // have set the key the file's first error is about.
        let key = shown
            .rsplit_once("in `")
            .and_then(|(_, rest)| rest.split('`').next())
            .and_then(|path| path.rsplit('.').next());
        let in_file = file_text.and_then(|text| {
            let e = toml::from_str::<TrainConfig>(text).err()?;
            let before = text.get(..e.span()?.start)?;
            let line = &before[before.rfind('\n').map_or(0, |at| at + 1)..];
            let same = e.message() == merged.message() && key.is_none_or(|k| line.contains(k));
            same.then_some(e.to_string())
        });
        in_file
            .unwrap_or(shown)
            .trim_end()
            .replace("\nin `", " in `")
    })
}

pub fn run_grpo(args: &GrpoArgs) -> Outcome {
    run_training(args, TrainObjective::Grpo)
}

pub fn run_sft(args: &GrpoArgs) -> Outcome {
    run_training(args, TrainObjective::Sft)
}

pub fn run_induction(args: &GrpoArgs) -> Outcome {
    run_training(args, TrainObjective::Induction)
}

fn run_training(args: &GrpoArgs, objective: TrainObjective) -> Outcome {
    let config = args.config(objective)?;
    let resume = args
        .resume
        .as_ref()
        .map(|p| p.clone().unwrap_or_else(|| config.run.output_dir.clone()));
    let reward = Box::new(BtlReward {
        mode: config.reward.mode,
        weights: config.reward.weights,
    });
    // A background run's log gets one line per step instead of a bar.
    let log_lines = !std::io::stderr().is_terminal();
    let steps = config.last_step();
    let bar = if log_lines {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(steps)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} steps {elapsed_precise} (eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut watch = SignalWatch::default();
    let outcome = run(config.clone(), reward, resume.as_deref(), |progress| {
        let m = match progress {
            Progress::KeptEarlierLog(earlier) => {
                bar.suspend(|| {
                    eprintln!(
                        "btl-train: the log of an earlier run here, stopped before its first \
                         checkpoint, is kept as {}",
                        earlier.display()
                    )
                });
                return;
            }
            Progress::Resumed(resumed) => {
                bar.suspend(|| {
                    eprintln!(
                        "btl-train: resuming from {} at step {}",
                        resumed.dir.display(),
                        resumed.steps_done
                    );
                    if resumed.saved_steps != config.run.steps {
                        eprintln!(
                            "btl-train: warning: run.steps is {} now and was {} in the \
                             checkpoint's run: the learning-rate schedule (warm-up and decay) \
                             runs over {} steps from here, unlike either uninterrupted run",
                            config.run.steps, resumed.saved_steps, config.run.steps
                        );
                    }
                });
                return;
            }
            Progress::Step(m) => m,
        };
        if objective == TrainObjective::Grpo
            && let Some(warning) = watch.observe(m)
        {
            bar.suspend(|| eprintln!("{warning}"));
        }
        let message = match objective {
            TrainObjective::Sft | TrainObjective::Induction => format!(
                "loss {:.4}{} grad-norm {:.3}",
                m.loss,
                m.copy_accuracy
                    .map(|a| format!(" copy accuracy {:.1}%", 100.0 * a))
                    .unwrap_or_default(),
                m.grad_norm
            ),
            TrainObjective::Grpo => format!(
                "reward {:.3} kl {:.4} grad-norm {:.3}{}",
                m.reward_mean,
                m.kl,
                m.grad_norm,
                if m.flat_groups > 0 {
                    format!(" ({} flat group(s))", m.flat_groups)
                } else {
                    String::new()
                }
            ),
        };
        let episodes = match (m.episodes, m.episodes_done) {
            (Some(n), Some(done)) => format!(" episodes {done}/{n} done"),
            _ => String::new(),
        };
        let message = format!("{message}{episodes}");
        let heldout = match (m.heldout_loss, m.heldout_accuracy) {
            (Some(loss), Some(accuracy)) => {
                format!(" held-out loss {loss:.4} accuracy {:.1}%", 100.0 * accuracy)
            }
            _ => String::new(),
        };
        if log_lines {
            eprintln!(
                "btl-train: step {}/{steps} {message}{heldout} ({:.1} s)",
                m.step, m.seconds
            );
        } else {
            bar.set_position(m.step);
            bar.set_message(format!("{message}{heldout}"));
        }
    })
    .map_err(|e| match e {
        Error::Io { .. } | Error::Torch(_) => Failure::Failed(e.into()),
        other => Failure::BadInput(other.into()),
    })?;
    bar.finish();
    if outcome.resumed_at > 0 {
        println!("resumed at step {}", outcome.resumed_at);
    }
    let updates = outcome.optimizer_steps;
    println!(
        "trained {} steps ({updates} optimizer update{})",
        outcome.steps_done,
        if updates == 1 { "" } else { "s" }
    );
    if updates == 0 && objective == TrainObjective::Grpo {
        eprintln!(
            "btl-train: warning: no step had a learning signal: every group's rewards were \
             equal (flat), so nothing was trained; the policy likely never earns a reward \
             — start from a supervised model (btl-train sft)"
        );
    }
    if let Some(c) = &outcome.last_checkpoint {
        println!("checkpoint: {}", c.display());
    }
    println!("metrics: {}", outcome.metrics.display());
    println!("curves: {}", outcome.plot.display());
    if let Some(summary) = &outcome.profile {
        println!("profile: {}", summary.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GrpoArgs,
    }

    fn lr(flags: &[&str], objective: TrainObjective) -> f64 {
        let flags = [
            "btl-train",
            "--checkpoint",
            "model",
            "--steps",
            "10",
            "--output-dir",
            "out",
            "--samples",
            "samples.json",
        ]
        .iter()
        .chain(flags);
        Cli::parse_from(flags)
            .args
            .config(objective)
            .unwrap()
            .optim
            .lr
    }

    /// Spec §7: GRPO on every weight defaults to the recipe's 1e-6; LoRA
    /// and SFT keep 1e-4; a rate given always wins.
    #[test]
    fn full_grpo_takes_the_recipes_learning_rate() {
        assert_eq!(lr(&["--mode", "full"], TrainObjective::Grpo), 1e-6);
        assert_eq!(lr(&[], TrainObjective::Grpo), 1e-4);
        assert_eq!(lr(&["--mode", "full"], TrainObjective::Sft), 1e-4);
        assert_eq!(
            lr(&["--mode", "full", "--lr", "3e-5"], TrainObjective::Grpo),
            3e-5
        );
    }
}
