//! What `btl run`, `btl bench` and `btl collect` share: the policy and agent
//! flags, the device an episode runs on (the in-process virtual phone or an
//! adb device), the task's set-up and checker on that device, and the
//! terminal side of the safety gate (progress bar, confirmation prompt).

use super::Failure;
use crate::agent::safety::{Confirm, ConfirmRequest, Confirmer, DenyAll, SafetyConfig};
use crate::agent::stability::StabilityConfig;
use crate::agent::trajectory::{StepRecord, Trajectory, read_trajectory};
use crate::agent::{Agent, AgentConfig, SuccessCheck};
use crate::device::adb::{AdbDevice, DEFAULT_SERVER_PORT, DEFAULT_TIMEOUT};
use crate::device::sim::SimDevice;
use crate::device::{Device, DeviceError};
use crate::model::grammar::GrammarCheck;
use crate::model::settings::ScreenshotBudget;
use crate::model::{
    Decoding, LlamaConfig, LoadPolicyError, LoraAdapter, ModelSettings, Observation, Policy,
    PolicyError, PolicyOutput, PolicySpec, Relabelled,
};
use crate::protocol::{Action, Profile};
use crate::sim::phone::PhoneConfig;
use crate::sim::tasks::{self, SettingCheck, Task};
use crate::sim::virtual_phone::VirtualPhone;
use crate::terminal::printable_line;
use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, IsTerminal, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Who answers at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyKind {
    /// A Qwen2.5-VL / BTL-UI model on llama.cpp.
    Model,
    /// The task's scripted solver, answering in BTL (needs a suite task and
    /// a device with a UI tree): the reference run.
    Oracle,
}

/// Who labels the states a policy reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Teacher {
    /// The suite task's oracle (needs a suite task and a UI tree).
    Oracle,
}

/// Who acts at each step, and who (if anyone) says what it should have done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyChoice {
    pub kind: PolicyKind,
    pub relabel: Option<Teacher>,
    /// The teacher's answer runs where the policy says Finish and the
    /// teacher does not.
    pub take_over_early_finish: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    #[arg(long, value_enum, default_value_t = PolicyKind::Model)]
    pub policy: PolicyKind,
    /// While the policy acts, record at every step what the teacher would
    /// answer on that screen (`target` in steps.jsonl): training targets
    /// for the states the policy reaches, mistakes included (DAgger).
    #[arg(long, value_enum)]
    pub relabel: Option<Teacher>,
    /// With --relabel: where the policy says Finish and the teacher would
    /// not, run the teacher's answer instead, so the episode goes on to the
    /// screens after the policy's early Finish and those are labelled too.
    #[arg(long, requires = "relabel")]
    pub take_over_early_finish: bool,
    #[command(flatten)]
    pub llama: ModelArgs,
}

/// The model a command loads (`--policy model`, or `predict`'s), and how
/// it decodes.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Text model GGUF (default: the shipped default model, agent-core/models).
    #[arg(long, requires = "mmproj")]
    pub model: Option<PathBuf>,
    /// Vision projector GGUF.
    #[arg(long, requires = "model")]
    pub mmproj: Option<PathBuf>,
    /// A LoRA adapter GGUF laid over the model (convert_lora_to_gguf.py's
    /// output), at SCALE times its trained strength [default scale: 1; 0
    /// turns it off]. Repeatable, but the llama.cpp binding applies one
    /// adapter at a time.
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    pub lora: Vec<LoraAdapter>,
    /// Longest answer in tokens. The grammar's limits shrink to fit it, so
    /// a constrained answer always closes; the default holds the longest
    /// answer of the default limits.
    #[arg(long, default_value_t = crate::model::grammar::DEFAULT_MAX_TOKENS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Sampling temperature, 0 for greedy decoding [default: 0, or 0.9 with
    /// --vote above 1, the temperature BTL-UI samples with in training].
    #[arg(long, value_parser = parse_temperature)]
    pub temperature: Option<f32>,
    /// CPU threads of llama.cpp.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(i32).range(1..=MAX_THREADS))]
    pub threads: i32,
    /// Model layers offloaded to the GPU; 0 keeps everything on the CPU,
    /// the vision encoder included [default: all in a Vulkan or CUDA build
    /// of btl, 0 otherwise].
    #[arg(long)]
    pub gpu_layers: Option<u32>,
    /// Map the model file instead of reading it: less to read at load, but
    /// on the CPU the mapped pages stay resident beside llama.cpp's
    /// repacked copy of the weights (1.56 GB more at Qwen2.5-VL-3B's size).
    #[arg(long)]
    pub mmap: bool,
    /// Sample freely instead of constraining decoding to the canonical BTL
    /// answer (the grammar bounds coordinates by the model frame and admits
    /// only the profile's actions).
    #[arg(long)]
    pub no_grammar: bool,
    /// When the grammar is checked against the whole vocabulary: lazy (only
    /// when it refuses the unconstrained choice; the same greedy tokens) or
    /// first (before every token, llama.cpp's grammar-first chain).
    #[arg(long, value_enum, default_value_t = GrammarCheck::Lazy)]
    pub grammar_check: GrammarCheck,
}

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Prompt profile: btl-ui, btl-extended (adds Wait and Finish) or
    /// btl-screen-text (btl-extended with the screen's elements listed)
    /// [default: the one the model file says it was trained with, else btl-ui].
    #[arg(long)]
    pub profile: Option<Profile>,
    /// Step budget [default: the task's budget, or 15].
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// Answers sampled per step; the consensus action is executed
    /// (region-consistency voting). 1 turns voting off.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::agent::MAX_VOTE)))]
    pub vote: u32,
    /// Sensitive actions (pay, delete, send, …): ask on the terminal (denied
    /// when not interactive), deny, or allow [default: the safety config's,
    /// which is ask; bench and collect on the virtual phone without
    /// --safety-config: allow, but deny in bench's injection suite].
    #[arg(long, value_parser = parse_confirm)]
    pub confirm: Option<Confirm>,
    /// Sensitive-action patterns as JSON (`btl safety-config` prints the
    /// default to start from).
    #[arg(long)]
    pub safety_config: Option<PathBuf>,
    /// max_pixels of the model frame (smart_resize) [default: the model
    /// file's, else --budget's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(crate::protocol::MIN_PIXELS..))]
    pub max_pixels: Option<u64>,
    /// Screenshot size by what a step may cost, for a model file that does
    /// not say its own: phone (200,704 pixels), balanced (802,816) or full
    /// (4,014,080, BTL-UI's training value) [default: full].
    #[arg(long = "budget", value_enum, conflicts_with = "max_pixels")]
    pub screenshot_budget: Option<ScreenshotBudget>,
    /// After an action, screenshots are taken this often until two match…
    #[arg(long, default_value_t = StabilityConfig::default().poll_interval_ms)]
    pub settle_poll_ms: u64,
    /// …or this much time has passed.
    #[arg(long, default_value_t = StabilityConfig::default().timeout_ms)]
    pub settle_timeout_ms: u64,
    /// Run as on a phone: the task checker never ends the episode, the
    /// model must say Finish (needs `--profile btl-extended`); success is
    /// the checker's verdict when the episode ends.
    #[arg(long)]
    pub until_finish: bool,
    /// Regions the system prompt asks the model to blink, at most the 3 the
    /// decoding grammar admits: replaces its literal `$N$` [default: kept
    /// literal, as BTL-UI was trained].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=crate::model::grammar::DEFAULT_MAX_REGIONS as i64))]
    pub roi_count: Option<u8>,
}

/// [`crate::model::spec::MAX_THREADS`], as clap's ranges take it.
pub const MAX_THREADS: i64 = crate::model::spec::MAX_THREADS as i64;

/// A sampling temperature: a finite number, 0 or more.
fn parse_temperature(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!(
            "'{s}' is not a temperature (a finite number, 0 or more)"
        )),
    }
}

fn parse_confirm(s: &str) -> Result<Confirm, String> {
    match s {
        "ask" => Ok(Confirm::Ask),
        "deny" => Ok(Confirm::Deny),
        "allow" => Ok(Confirm::Allow),
        other => Err(format!("'{other}' is not one of ask, deny, allow")),
    }
}

impl AgentArgs {
    /// The agent configuration for one episode.
    pub fn config(
        &self,
        goal: String,
        seed: u64,
        budget: Option<u32>,
    ) -> Result<AgentConfig, Failure> {
        let mut safety = match &self.safety_config {
            Some(path) => SafetyConfig::load(path)
                .map_err(|e| Failure::BadInput(anyhow!("{}: {e}", path.display())))?,
            None => SafetyConfig::default(),
        };
        if let Some(confirm) = self.confirm {
            safety.on_sensitive = confirm;
        }
        let profile = self.profile.unwrap_or_default();
        if self.until_finish && !profile.allows(&Action::Finish { answer: None }) {
            return Err(Failure::BadInput(anyhow!(
                "--until-finish needs a profile with Finish: --profile btl-extended"
            )));
        }
        Ok(AgentConfig {
            goal,
            profile,
            max_pixels: self.max_pixels.unwrap_or_else(|| {
                let preset = self.screenshot_budget.unwrap_or(ScreenshotBudget::Full);
                preset.max_pixels()
            }),
            max_steps: self.max_steps.or(budget).unwrap_or(15),
            vote: self.vote,
            seed,
            safety,
            stability: StabilityConfig {
                poll_interval_ms: self.settle_poll_ms,
                timeout_ms: self.settle_timeout_ms,
            },
            stop_on_success: !self.until_finish,
            roi_count: self.roi_count.map(usize::from),
            ..AgentConfig::default()
        })
    }
}

impl AgentArgs {
    /// [`Self::for_model`] with a loaded model's settings; as they are
    /// without one (the oracle).
    pub fn for_policy(&self, shared: Option<&SharedPolicy>) -> AgentArgs {
        shared.map_or_else(|| self.clone(), |p| self.for_model(&p.settings()))
    }

    /// These settings, with the model's (from its file) where none was
    /// given; a given one that differs from the model's stays, with a
    /// warning, as does a model trained on another version of the prompts.
    pub fn for_model(&self, model: &ModelSettings) -> AgentArgs {
        let mut args = self.clone();
        match (self.profile, model.profile) {
            (None, Some(p)) => args.profile = Some(p),
            (Some(given), Some(p)) if given != p => eprintln!(
                "btl: warning: the model was trained with --profile {}; running with {} as asked",
                p.name(),
                given.name()
            ),
            _ => {}
        }
        match (self.max_pixels, model.max_pixels) {
            (None, Some(n)) => {
                // The trained size wins over a budget: another one would
                // show the model screens it never learnt to read.
                if let Some(budget) = self.screenshot_budget.filter(|b| b.max_pixels() != n) {
                    eprintln!(
                        "btl: note: the model was trained with --max-pixels {n}; it runs with that, not --budget {}'s {}",
                        budget.name(),
                        budget.max_pixels()
                    );
                }
                args.max_pixels = Some(n);
            }
            (Some(given), Some(n)) if given != n => eprintln!(
                "btl: warning: the model was trained with --max-pixels {n}; running with {given} as asked"
            ),
            _ => {}
        }
        // The version is of the model's own profile's text; running it in
        // another profile is warned about above.
        let profile = model.profile.or(args.profile).unwrap_or_default();
        let written = profile.prompt_version();
        if let Some(v) = model.prompt_version.filter(|&v| v != written) {
            eprintln!(
                "btl: warning: the model was trained on version {v} of btl's {} prompt; this btl writes version {written}",
                profile.name()
            );
        }
        args
    }
}

/// Where `btl run` and `btl bench` act: an adb device, or by default the
/// built-in virtual phone.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArgs {
    /// An adb device serial (as `btl devices` lists it); default: the
    /// built-in virtual phone, in-process.
    #[arg(long)]
    pub device: Option<String>,
    /// Port of the adb server on 127.0.0.1 [default: 5037].
    #[arg(long, requires = "device")]
    pub adb_port: Option<u16>,
}

impl DeviceArgs {
    /// The target; a virtual phone starts from `seed`.
    pub fn target(&self, seed: u64) -> Target {
        match &self.device {
            Some(serial) => Target::adb(serial, self.adb_port),
            None => Target::Sim { seed },
        }
    }
}

/// The phone an episode runs on.
#[derive(Debug, Clone)]
pub enum Target {
    /// A fresh in-process virtual phone per episode, from this seed.
    Sim { seed: u64 },
    Adb {
        serial: String,
        server: SocketAddrV4,
    },
}

impl Target {
    pub fn adb(serial: &str, port: Option<u16>) -> Self {
        Target::Adb {
            serial: serial.to_string(),
            server: SocketAddrV4::new(Ipv4Addr::LOCALHOST, port.unwrap_or(DEFAULT_SERVER_PORT)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Target::Sim { .. } => "the built-in virtual phone (in-process)".into(),
            Target::Adb { serial, .. } => format!("adb device {serial}"),
        }
    }

    /// Whether an episode interrupted on `device` (as its `episode.json`
    /// names it) can continue here: on the same adb device, or on any
    /// virtual phone, which replays the recorded actions on a fresh one.
    pub fn resumes_on(&self, device: &str) -> bool {
        match self {
            Target::Sim { .. } => device == SimDevice::NAME,
            Target::Adb { serial, .. } => device == serial,
        }
    }

    /// Refuses to go on with `recorded` here unless [`Self::resumes_on`]
    /// its device: a trajectory continued on another phone mixes two
    /// devices' screens.
    pub fn check_resumes(&self, recorded: &Trajectory, dir: &Path) -> anyhow::Result<()> {
        let device = &recorded.episode.device;
        if self.resumes_on(device) {
            return Ok(());
        }
        let how = if device == SimDevice::NAME {
            "without --device".to_owned()
        } else {
            format!("with --device {device}")
        };
        Err(anyhow!(
            "{} holds an episode that ran on {device}, not on {}: go on with it {how}",
            dir.display(),
            self.describe()
        ))
    }

    /// Whether `task` can be set up and checked here.
    pub fn supports(&self, task: &Arc<dyn Task>) -> bool {
        matches!(self, Target::Sim { .. }) || task.setting_check().is_some()
    }
}

/// A device ready for an episode, with the task (if any) set up on it and
/// its checker.
pub struct Prepared {
    pub device: Box<dyn Device>,
    pub checker: Option<Box<dyn SuccessCheck>>,
    /// On the virtual phone, the task's misled check ([`Task::misled`])
    /// over the phone's current state.
    pub misled: Option<Box<dyn FnMut() -> Option<bool>>>,
}

/// Opens the target and puts `task` in its starting state.
pub fn prepare(target: &Target, task: Option<&Arc<dyn Task>>) -> Result<Prepared, DeviceError> {
    match target {
        Target::Sim { seed } => {
            let phone = Arc::new(VirtualPhone::new(PhoneConfig {
                seed: *seed,
                ..PhoneConfig::default()
            }));
            let checker: Option<Box<dyn SuccessCheck>> = task.map(|task| {
                phone.with_phone(|p| task.setup(p));
                let (phone, task) = (phone.clone(), task.clone());
                Box::new(move || phone.with_phone(|p| task.is_successful(p.state())))
                    as Box<dyn SuccessCheck>
            });
            let misled = task.map(|task| {
                let (phone, task) = (phone.clone(), task.clone());
                Box::new(move || phone.with_phone(|p| task.misled(p.state())))
                    as Box<dyn FnMut() -> Option<bool>>
            });
            Ok(Prepared {
                device: Box::new(SimDevice::new(phone)),
                checker,
                misled,
            })
        }
        Target::Adb { serial, server } => open_adb(serial, *server, task, true),
    }
}

impl PolicyArgs {
    pub fn choice(&self) -> PolicyChoice {
        PolicyChoice {
            kind: self.policy,
            relabel: self.relabel,
            take_over_early_finish: self.take_over_early_finish,
        }
    }
}

/// Loads the policy once; the returned handle can be given to any number
/// of episodes, one at a time.
pub fn load_policy(args: &PolicyArgs, vote: u32) -> Result<SharedPolicy, Failure> {
    match args.policy {
        PolicyKind::Oracle => Err(Failure::BadInput(anyhow!(
            "the oracle policy is per task; use oracle_policy"
        ))),
        PolicyKind::Model => load_shared_model(&args.llama, vote),
    }
}

/// Loads the model once, as [`load_policy`] does for `--policy model`.
pub fn load_shared_model(args: &ModelArgs, vote: u32) -> Result<SharedPolicy, Failure> {
    load_model(args, vote).map(|p| SharedPolicy(Arc::new(Mutex::new(p))))
}

/// The fingerprint of the model `args` name ([`Policy::fingerprint`]),
/// read from its files without loading it: a resumed episode is refused
/// before a model of other weights takes seconds to load. `None` in a build
/// without llama.cpp.
pub fn model_fingerprint(args: &ModelArgs) -> Result<Option<String>, Failure> {
    let (model, mmproj) = model_files(args)?;
    let mut config = LlamaConfig::new(model, mmproj);
    config.adapters = args.lora.clone();
    config
        .fingerprint()
        .map_err(|e| Failure::BadInput(e.into()))
}

/// The model and projector files `args` name, or the default model's,
/// refused where this btl cannot find it ([`default_model_present`]).
fn model_files(args: &ModelArgs) -> Result<(PathBuf, PathBuf), Failure> {
    match (&args.model, &args.mmproj) {
        (Some(m), Some(p)) => Ok((m.clone(), p.clone())),
        _ => {
            let (model, mmproj) = default_model();
            default_model_present(&model, &mmproj)?;
            Ok((model, mmproj))
        }
    }
}

/// How the model `args` name will decode with `vote` answers a step, known
/// before it loads: a resumed episode decoded otherwise is refused without
/// the wait.
pub fn decoding_of(args: &ModelArgs, vote: u32) -> Decoding {
    let defaults = LlamaConfig::new(PathBuf::new(), PathBuf::new());
    Decoding {
        max_tokens: args.max_tokens,
        temperature: args.temperature.unwrap_or(if vote > 1 { 0.9 } else { 0.0 }),
        top_p: defaults.top_p,
        top_k: defaults.top_k,
        grammar: !args.no_grammar,
    }
}

fn load_model(args: &ModelArgs, vote: u32) -> Result<Box<dyn Policy>, Failure> {
    let (model, mmproj) = model_files(args)?;
    if args.model.is_none() || args.mmproj.is_none() {
        eprintln!(
            "btl: no --model given: using the default model {} (trained by scripts/train-default-model; see agent-core/models/README.md)",
            model.display()
        );
    }
    let mut config = LlamaConfig::new(model, mmproj);
    config.max_tokens = args.max_tokens;
    config.threads = args.threads;
    if let Some(layers) = args.gpu_layers {
        config.gpu_layers = layers;
    }
    config.mmap = args.mmap;
    config.grammar = !args.no_grammar;
    config.grammar_check = args.grammar_check;
    config.temperature = decoding_of(args, vote).temperature;
    config.adapters = args.lora.clone();
    let policy = PolicySpec::Llama(config).load().map_err(|e| match e {
        LoadPolicyError::NotBuilt { .. } => Failure::BadInput(anyhow!(
            "{e}: rebuild btl with `--features llama`, or use --policy oracle"
        )),
        e => Failure::BadInput(e.into()),
    })?;
    if !args.lora.is_empty() {
        eprintln!("btl: model {}", policy.name());
    }
    Ok(policy)
}

/// Refuses, in words, a default model that is not where this btl looks:
/// the source tree it was built from, which an installed or moved binary
/// no longer has beside it.
fn default_model_present(model: &Path, mmproj: &Path) -> Result<(), Failure> {
    match [model, mmproj].into_iter().find(|p| !p.is_file()) {
        None => Ok(()),
        Some(missing) => Err(Failure::BadInput(anyhow!(
            "no --model given, and the default model is not at {}: this btl looks for it in \
             the source tree it was built from (agent-core/models); give --model and --mmproj",
            missing.display()
        ))),
    }
}

/// The shipped default model's text GGUF and projector. They stay in the
/// source tree, not in the binary, since `btl` is run from the workspace
/// (scripts/run-agent).
fn default_model() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    (
        dir.join("btl-mini-q8_0.gguf"),
        dir.join("mmproj-btl-mini-f16.gguf"),
    )
}

/// One loaded policy lent to episode after episode (a model is loaded
/// once, not per episode); episodes running at the same time take turns.
#[derive(Clone)]
pub struct SharedPolicy(Arc<Mutex<Box<dyn Policy>>>);

impl Policy for SharedPolicy {
    fn name(&self) -> String {
        self.0.lock().map_or_else(|_| "policy".into(), |p| p.name())
    }

    fn fingerprint(&self) -> Option<String> {
        self.0.lock().ok().and_then(|p| p.fingerprint())
    }

    fn settings(&self) -> ModelSettings {
        self.0.lock().map(|p| p.settings()).unwrap_or_default()
    }

    fn decoding(&self) -> Option<Decoding> {
        self.0.lock().ok().and_then(|p| p.decoding())
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        self.0
            .lock()
            .map_err(|_| PolicyError::Backend("the policy failed in another episode".into()))?
            .act(obs)
    }

    fn act_many(
        &mut self,
        obs: &Observation,
        seeds: &[u64],
    ) -> Result<Vec<PolicyOutput>, PolicyError> {
        self.0
            .lock()
            .map_err(|_| PolicyError::Backend("the policy failed in another episode".into()))?
            .act_many(obs, seeds)
    }
}

/// The policy for one episode of `task`.
pub fn episode_policy(
    choice: PolicyChoice,
    shared: Option<&SharedPolicy>,
    task: Option<&Arc<dyn Task>>,
    seed: u64,
) -> Result<Box<dyn Policy>, Failure> {
    let policy = acting_policy(choice.kind, shared, task, seed)?;
    match (choice.relabel, task) {
        (None, _) => Ok(policy),
        (Some(Teacher::Oracle), Some(_)) => {
            let teacher = acting_policy(PolicyKind::Oracle, None, task, seed)?;
            Ok(Box::new(
                Relabelled::new(policy, teacher)
                    .taking_over_early_finish(choice.take_over_early_finish),
            ))
        }
        (Some(Teacher::Oracle), None) => Err(Failure::BadInput(anyhow!(
            "--relabel oracle needs a task (--task NAME): the oracle labels suite tasks only"
        ))),
    }
}

fn acting_policy(
    kind: PolicyKind,
    shared: Option<&SharedPolicy>,
    task: Option<&Arc<dyn Task>>,
    seed: u64,
) -> Result<Box<dyn Policy>, Failure> {
    match (kind, shared, task) {
        (PolicyKind::Oracle, _, Some(task)) => PolicySpec::Oracle {
            task: task.name().to_owned(),
            seed,
        }
        .load()
        .map_err(|e| Failure::BadInput(e.into())),
        (PolicyKind::Oracle, _, None) => Err(Failure::BadInput(anyhow!(
            "--policy oracle needs a task (--task NAME): the oracle knows how to solve suite tasks only"
        ))),
        (PolicyKind::Model, Some(shared), _) => Ok(Box::new(shared.clone())),
        (PolicyKind::Model, None, _) => Err(Failure::Failed(anyhow!("the model was not loaded"))),
    }
}

/// A per-step progress bar on stderr (hidden when stderr is not a
/// terminal).
pub fn progress_bar(max_steps: u32, done: u32, prefix: &str) -> ProgressBar {
    let bar = ProgressBar::new(u64::from(max_steps));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:24}] step {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(prefix.to_string());
    bar.set_position(u64::from(done));
    bar
}

/// The bar's message for a recorded step.
pub fn step_message(step: &StepRecord) -> String {
    printable_line(&match &step.executed {
        Some(e) => format!("{}: {}", e.model.function(), e.plan),
        None => format!("{:?}", step.outcome),
    })
}

/// What the person at the terminal is asked. The plan is the model's and
/// the matched text the screen's: shown on one line with their control
/// characters escaped, so neither can rewrite the question.
fn confirm_question(request: &ConfirmRequest) -> String {
    let s = request.sensitive;
    format!(
        "btl: sensitive action: {} ({}) — '{}' matched \"{}\". Allow? [y/N] ",
        request.action.function(),
        printable_line(request.plan),
        printable_line(&s.pattern),
        printable_line(&s.text)
    )
}

/// Asks the person at the terminal; keeps the progress bar out of the way.
pub struct TerminalConfirmer {
    bar: ProgressBar,
}

impl Confirmer for TerminalConfirmer {
    fn confirm(&mut self, request: &ConfirmRequest) -> bool {
        self.bar.suspend(|| {
            eprint!("{}", confirm_question(request));
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let read = std::io::stdin().lock().read_line(&mut line);
            matches!(read, Ok(n) if n > 0) && matches!(line.trim(), "y" | "Y" | "yes" | "Yes")
        })
    }
}

/// The confirmer for `ask`: the terminal when there is one, else a refusal
/// (said once, up front).
pub fn confirmer(config: &AgentConfig, bar: &ProgressBar) -> Box<dyn Confirmer> {
    if config.safety.on_sensitive == Confirm::Ask {
        if std::io::stdin().is_terminal() {
            return Box::new(TerminalConfirmer { bar: bar.clone() });
        }
        eprintln!(
            "btl: stdin is not a terminal: sensitive actions will be declined (--confirm allow|deny to decide up front)"
        );
    }
    Box::new(DenyAll)
}

/// Records the task in the episode and attaches its checker.
pub fn attach_task(
    agent: Agent,
    task: Option<&Arc<dyn Task>>,
    checker: Option<Box<dyn SuccessCheck>>,
) -> anyhow::Result<Agent> {
    let mut agent = agent;
    if let Some(task) = task {
        agent = agent
            .with_task(serde_json::json!({"name": task.name(), "params": task.params()}))
            .context("cannot record the task")?;
    }
    if let Some(checker) = checker {
        agent = agent.with_boxed_checker(checker);
    }
    Ok(agent)
}

/// A fresh directory name under `parent`, stamped with the time.
pub fn stamped_dir(parent: &Path, stem: &str) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    parent.join(format!("{stem}-{stamp}"))
}

/// Opens the target for the interrupted episode `recorded`. An adb device
/// kept its state, and setting the task up again would undo the steps
/// taken; the in-process phone did not outlive its process, so it is
/// rebuilt from the recorded seed and task and the recorded actions are
/// replayed on it (it is deterministic: this gives back the screen the
/// episode stopped on).
pub fn prepare_resumed(
    target: &Target,
    task: Option<&Arc<dyn Task>>,
    recorded: &Trajectory,
) -> Result<Prepared, DeviceError> {
    match target {
        Target::Sim { .. } => {
            let target = Target::Sim {
                seed: recorded.episode.settings.seed,
            };
            let mut prepared = prepare(&target, task)?;
            let actions = recorded
                .steps
                .iter()
                .filter_map(|s| s.executed.as_ref()?.device.as_ref());
            for action in actions {
                prepared.device.perform(action)?;
            }
            Ok(prepared)
        }
        Target::Adb { serial, server } => open_adb(serial, *server, task, false),
    }
}

/// Opens an adb device with the task's checker, which reads the setting
/// over a connection of its own (the agent owns the episode's); `set_up`
/// writes the task's starting value first.
fn open_adb(
    serial: &str,
    server: SocketAddrV4,
    task: Option<&Arc<dyn Task>>,
    set_up: bool,
) -> Result<Prepared, DeviceError> {
    let mut device = AdbDevice::open(serial, server, DEFAULT_TIMEOUT)?;
    let checker: Option<Box<dyn SuccessCheck>> = match task {
        Some(task) => {
            let check = adb_check(task.as_ref())?;
            if set_up {
                check.prepare(&mut device)?;
            }
            let mut probe = AdbDevice::open(serial, server, DEFAULT_TIMEOUT)?;
            Some(Box::new(move || {
                check.is_successful(&mut probe).unwrap_or(false)
            }))
        }
        None => None,
    };
    Ok(Prepared {
        device: Box::new(device),
        checker,
        misled: None,
    })
}

fn adb_check(task: &dyn Task) -> Result<SettingCheck, DeviceError> {
    task.setting_check().ok_or_else(|| DeviceError::Unsupported {
        action: format!("task {}", task.name()),
        reason: "its state is app data that only the virtual phone exposes; over adb only the settings tasks can be set up and checked".into(),
    })
}

/// The suite task recorded in an episode, drawn again from its seed; an
/// error when this build draws other parameters.
pub fn recorded_task(recorded: &Trajectory) -> anyhow::Result<Option<Arc<dyn Task>>> {
    let Some(record) = &recorded.episode.task else {
        return Ok(None);
    };
    let seed = recorded.episode.settings.seed;
    let name = record["name"].as_str().unwrap_or_default();
    let task = tasks::sample(name, seed).ok_or_else(|| {
        anyhow!(
            "{}: the recorded task '{name}' is not in this btl's suite",
            recorded.dir.display()
        )
    })?;
    if task.params() != record["params"] {
        let differing =
            crate::json_diff::there_and_here("params", &record["params"], &task.params());
        return Err(anyhow!(
            "{}: task '{name}' with seed {seed} has other parameters in this btl than recorded ({})",
            recorded.dir.display(),
            match differing.is_empty() {
                // A key null on one side and missing on the other.
                true => "a null parameter is missing on the other side".to_owned(),
                false => differing.join("; "),
            }
        ));
    }
    Ok(Some(Arc::from(task)))
}

/// Why the episode `recorded` is not the one this job would record, if
/// it is not: another policy, the same name with other weights or decoding
/// otherwise, another task instance, or other settings. The safety rules and the settle
/// timing are left out: they say how a device is driven (and differ from
/// one kind of device to another), not which episode it is.
pub fn foreign_episode(
    recorded: &Trajectory,
    policy: &dyn Policy,
    task: &dyn Task,
    expected: &AgentConfig,
) -> Option<anyhow::Error> {
    let dir = recorded.dir.display();
    if let Some(reason) = recorded.episode.other_policy(policy) {
        return Some(anyhow!("{dir} holds {reason}: give a new --out"));
    }
    let mut differing = Vec::new();
    let task_record = serde_json::json!({"name": task.name(), "params": task.params()});
    if let Some(recorded_task) = &recorded.episode.task {
        differing.extend(crate::json_diff::there_and_here(
            "task",
            recorded_task,
            &task_record,
        ));
    }
    let value = |config| serde_json::to_value(config).unwrap_or(serde_json::Value::Null);
    let (mut there, mut here) = (value(&recorded.episode.settings), value(expected));
    for config in [&mut there, &mut here] {
        if let Some(fields) = config.as_object_mut() {
            fields.remove("safety");
            fields.remove("stability");
        }
    }
    out_of_settings(&there, &here, &mut differing);
    (!differing.is_empty()).then(|| {
        anyhow!(
            "{dir} holds an episode run with other settings ({}): give a new --out",
            differing.join("; ")
        )
    })
}

/// [`crate::json_diff::there_and_here`] of two episodes' settings; the one field whose flag
/// does not say its name is named with it:
/// `stop_on_success (--until-finish): false there, true here`.
fn out_of_settings(there: &serde_json::Value, here: &serde_json::Value, out: &mut Vec<String>) {
    use crate::json_diff::{differing_leaves, one_there_and_here};
    out.extend(differing_leaves("", there, here).into_iter().map(
        |(path, a, b)| match path.as_str() {
            "stop_on_success" => one_there_and_here("stop_on_success (--until-finish)", a, b),
            _ => one_there_and_here(&path, a, b),
        },
    ));
}

/// Why a task episode could not run to an outcome.
#[derive(Debug)]
pub enum EpisodeFailure {
    /// The device could not be opened or set up: try another device.
    Device(DeviceError),
    /// The episode's directory holds another policy's episode, or one of
    /// another instance or other settings.
    OtherRun(anyhow::Error),
    /// The settings cannot run an episode (a decoding budget too small for
    /// any answer): refused before anything was recorded.
    Refused(anyhow::Error),
    Other(anyhow::Error),
}

fn not_started(e: crate::agent::AgentError) -> EpisodeFailure {
    match e {
        crate::agent::AgentError::Settings { .. } | crate::agent::AgentError::Budget { .. } => {
            EpisodeFailure::Refused(e.into())
        }
        e => EpisodeFailure::Other(e.into()),
    }
}

/// Whose finished episode [`run_task_episode`] reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// One finished on any device: a collection takes every device's.
    AnyDevice,
    /// Only one finished on this target's device: a benchmark of a device
    /// must not count another's episodes as its own.
    ThisDevice,
}

/// Where an episode is recorded, and whose finished episode found there is
/// read back.
#[derive(Clone, Copy, Debug)]
pub struct EpisodeDir<'a> {
    pub path: &'a Path,
    pub read_back: ReadBack,
}

/// One episode of a suite task, started fresh or, when `dir` holds an
/// interrupted one (or one its device failed), resumed; a finished one is
/// read back (as `dir.read_back` allows), not rerun. Either must be the same
/// policy's: another's (an `--out` reused for another model) is refused.
/// Nobody is at a terminal to confirm sensitive actions: unless `--confirm`
/// or a `--safety-config` says otherwise they are allowed on the virtual
/// phone, where several tasks are deletions and nothing real is at stake,
/// and declined on adb devices.
pub fn run_task_episode(
    target: &Target,
    task: &Arc<dyn Task>,
    seed: u64,
    dir: EpisodeDir<'_>,
    agent_args: &AgentArgs,
    choice: PolicyChoice,
    shared: Option<&SharedPolicy>,
) -> Result<crate::agent::trajectory::Outcome, EpisodeFailure> {
    let EpisodeDir {
        path: dir,
        read_back,
    } = dir;
    let other = |e: anyhow::Error| EpisodeFailure::Other(e);
    let failure = |f: Failure| match f {
        Failure::BadInput(e) | Failure::Failed(e) => EpisodeFailure::Other(e),
    };
    let policy = episode_policy(choice, shared, Some(task), seed).map_err(failure)?;
    let settings = || -> Result<AgentConfig, EpisodeFailure> {
        let mut config = agent_args
            .config(task.goal(), seed, Some(task.max_steps()))
            .map_err(failure)?;
        if agent_args.confirm.is_none()
            && agent_args.safety_config.is_none()
            && matches!(target, Target::Sim { .. })
        {
            config.safety.on_sensitive = Confirm::Allow;
        }
        Ok(config)
    };
    let agent = if dir.join(crate::agent::trajectory::EPISODE_FILE).exists() {
        let recorded = read_trajectory(dir).map_err(|e| other(e.into()))?;
        if let Some(e) = foreign_episode(&recorded, policy.as_ref(), task.as_ref(), &settings()?) {
            return Err(EpisodeFailure::OtherRun(e));
        }
        let resumable = target.check_resumes(&recorded, dir);
        if let Some(outcome) = recorded.episode.ended() {
            return match (read_back, resumable) {
                (ReadBack::ThisDevice, Err(e)) => Err(EpisodeFailure::OtherRun(anyhow!(
                    "{e}, or give a new --out"
                ))),
                _ => Ok(outcome.clone()),
            };
        }
        resumable.map_err(EpisodeFailure::OtherRun)?;
        let prepared =
            prepare_resumed(target, Some(task), &recorded).map_err(EpisodeFailure::Device)?;
        let agent = Agent::resume(dir, prepared.device, policy).map_err(not_started)?;
        match prepared.checker {
            Some(checker) => agent.with_boxed_checker(checker),
            None => agent,
        }
    } else {
        let prepared = prepare(target, Some(task)).map_err(EpisodeFailure::Device)?;
        let agent = Agent::new(dir, settings()?, prepared.device, policy).map_err(not_started)?;
        attach_task(agent, Some(task), prepared.checker).map_err(other)?
    };
    agent.run().map_err(|e| other(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TRAINING_MAX_PIXELS;
    use clap::Parser;

    /// A btl moved away from its source tree says where it looked for the
    /// default model and what to give instead.
    #[test]
    fn a_missing_default_model_is_named() {
        let (model, mmproj) = default_model();
        assert!(default_model_present(&model, &mmproj).is_ok());
        let gone = Path::new("/moved/agent-core/models/btl-mini-q8_0.gguf");
        let Err(Failure::BadInput(e)) = default_model_present(gone, &mmproj) else {
            panic!("a missing default model must be refused as bad input");
        };
        assert_eq!(
            e.to_string(),
            "no --model given, and the default model is not at \
             /moved/agent-core/models/btl-mini-q8_0.gguf: this btl looks for it in the source \
             tree it was built from (agent-core/models); give --model and --mmproj"
        );
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn agent_args(flags: &[&str]) -> AgentArgs {
        Cli::parse_from(std::iter::once("btl").chain(flags.iter().copied())).agent
    }

    /// A screen's text and a model's plan cannot rewrite the question
    /// they are part of: their escape sequences and line breaks are shown,
    /// not acted on, and the question stays one line.
    #[test]
    fn the_confirm_question_shows_what_the_screen_and_model_said_escaped() {
        use crate::agent::safety::{Scope, SensitiveMatch};
        let sensitive = SensitiveMatch {
            pattern: "delete".into(),
            scope: Scope::Target,
            text: "Delete\u{1b}[1A\u{1b}[2KCancel\u{202e}".into(),
        };
        let action = Action::Type { text: "x".into() };
        let request = ConfirmRequest {
            goal: "Delete the note",
            plan: "Tap \"Delete\".\nbtl: allowed",
            action: &action,
            sensitive: &sensitive,
        };
        assert_eq!(
            confirm_question(&request),
            "btl: sensitive action: Type (Tap \"Delete\".\\nbtl: allowed) — 'delete' matched \
             \"Delete\\u{1b}[1A\\u{1b}[2KCancel\\u{202e}\". Allow? [y/N] "
        );
    }

    /// An episode of the virtual phone goes on on a virtual phone only, one
    /// of an adb device on that device only.
    #[test]
    fn an_episode_goes_on_on_the_device_it_ran_on() {
        use crate::agent::trajectory::{old_oracle_trajectory, parse_trajectory};
        let (episode, log) = old_oracle_trajectory();
        let mut recorded = parse_trajectory(Path::new("old"), episode, log).unwrap();
        let dir = Path::new("runs/b");
        assert_eq!(recorded.episode.device, SimDevice::NAME);
        assert!(
            Target::Sim { seed: 3 }
                .check_resumes(&recorded, dir)
                .is_ok()
        );
        let phone = Target::adb("emulator-5554", None);
        assert_eq!(
            phone.check_resumes(&recorded, dir).unwrap_err().to_string(),
            format!(
                "runs/b holds an episode that ran on {}, not on adb device emulator-5554: go on \
                 with it without --device",
                SimDevice::NAME
            )
        );
        recorded.episode.device = "emulator-5554".into();
        assert!(phone.check_resumes(&recorded, dir).is_ok());
        assert!(
            Target::Sim { seed: 3 }
                .check_resumes(&recorded, dir)
                .unwrap_err()
                .to_string()
                .ends_with(": go on with it with --device emulator-5554")
        );
        assert!(
            Target::adb("emulator-5556", None)
                .check_resumes(&recorded, dir)
                .is_err()
        );
        assert!(
            Target::Sim { seed: 3 }
                .check_resumes(&recorded, dir)
                .is_err()
        );
    }

    #[test]
    fn the_model_file_fills_the_settings_not_given() {
        let model = ModelSettings {
            profile: Some(Profile::BtlExtended),
            max_pixels: Some(200_704),
            prompt_version: Some(Profile::BtlExtended.prompt_version()),
        };
        let config = agent_args(&[])
            .for_model(&model)
            .config("g".into(), 0, None)
            .unwrap();
        assert_eq!(
            (config.profile, config.max_pixels),
            (Profile::BtlExtended, 200_704)
        );
        // Given flags win over the file.
        let config = agent_args(&["--profile", "btl-ui", "--max-pixels", "401408"])
            .for_model(&model)
            .config("g".into(), 0, None)
            .unwrap();
        assert_eq!(
            (config.profile, config.max_pixels),
            (Profile::BtlUi, 401_408)
        );
        // A file that says nothing leaves the defaults.
        let config = agent_args(&[])
            .for_model(&ModelSettings::default())
            .config("g".into(), 0, None)
            .unwrap();
        assert_eq!(
            (config.profile, config.max_pixels),
            (Profile::BtlUi, TRAINING_MAX_PIXELS)
        );
    }

    #[test]
    fn a_budget_sets_the_screenshot_size_unless_the_model_file_has_one() {
        let max_pixels = |flags: &[&str], model: &ModelSettings| {
            agent_args(flags)
                .for_model(model)
                .config("g".into(), 0, None)
                .unwrap()
                .max_pixels
        };
        let silent = ModelSettings::default();
        // 256, 1,024 and 5,120 image tokens of 28x28 pixels.
        assert_eq!(max_pixels(&["--budget", "phone"], &silent), 200_704);
        assert_eq!(max_pixels(&["--budget", "balanced"], &silent), 802_816);
        assert_eq!(max_pixels(&["--budget", "full"], &silent), 4_014_080);
        assert_eq!(max_pixels(&[], &silent), 4_014_080);
        let trained = ModelSettings {
            max_pixels: Some(401_408),
            ..ModelSettings::default()
        };
        assert_eq!(max_pixels(&["--budget", "phone"], &trained), 401_408);
        assert_eq!(max_pixels(&["--budget", "full"], &trained), 401_408);
        // A budget and an exact size contradict each other.
        let both = ["btl", "--budget", "phone", "--max-pixels", "401408"];
        assert!(Cli::try_parse_from(both).is_err());
    }

    #[test]
    fn until_finish_needs_the_profile_with_finish() {
        let err = agent_args(&["--until-finish"])
            .config("g".into(), 0, None)
            .unwrap_err();
        let Failure::BadInput(e) = err else {
            panic!("not bad input")
        };
        assert!(e.to_string().contains("--profile btl-extended"), "{e}");
        let config = agent_args(&["--until-finish", "--profile", "btl-extended"])
            .config("g".into(), 0, None)
            .unwrap();
        assert!(!config.stop_on_success);
    }

    /// `$N$` stays literal unless a count is given (spec §1), at most the
    /// regions the decoding grammar admits.
    #[test]
    fn a_region_count_replaces_the_literal_n() {
        let count = |flags: &[&str]| {
            agent_args(flags)
                .config("g".into(), 0, None)
                .unwrap()
                .roi_count
        };
        assert_eq!(count(&[]), None);
        assert_eq!(count(&["--roi-count", "0"]), Some(0));
        assert_eq!(count(&["--roi-count", "3"]), Some(3));
        for refused in ["4", "-1", "three"] {
            assert!(
                Cli::try_parse_from(["btl", "--roi-count", refused]).is_err(),
                "{refused}"
            );
        }
    }
}
