#!/usr/bin/env python3
"""TRL's GRPOTrainer vs btl-train: seconds per GRPO step on the CPU.

Called by scripts/bench/grpo-vs-trl (which provides the venv and the two
binaries). Both sides train LoRA adapters on the tiny random Qwen2.5-VL
(host-trainer/tests/data/tiny-qwen25vl-hf) with the same prompts, the same
GRPO settings and the same number of torch threads (default 1: with 2
OpenMP threads on our shared 2-core machine both sides ran 3-10× slower and
their step times swung with the other jobs' load), one prompt × G
completions per optimizer step, and are timed per step:

- TRL: from the trainer's `on_step_begin` to its `on_step_end` callback
  (generation, reward, reference and policy log-probabilities, backward,
  clipping, AdamW); the data loader's fetch and TRL's logging fall outside;
- btl-train: the `seconds` of each line of its `metrics.jsonl` (the same
  span: from choosing the prompt to the optimizer step).

The first `--warmup` steps of each side are dropped (allocator and kernel
warm-up). The table gives the median, mean and minimum over the remaining
steps, and the ratios TRL / btl-train of the medians (goal: at least 2) and
of the minimums (on a shared machine, the least disturbed steps).

Prompts: three official-format navigation samples made from the official
example (tests/data/btl-ui-examples/navigation_meta_format.json) by keeping
10, 6 and 2 steps of its action history, each with the fixture screenshot
tests/data/tiny-qwen25vl/test-screenshot.png (224×448, 128 image tokens)
instead of the original screen. Both sides take them in file order (no
shuffling), so step k uses the same prompt on both. Before timing anything
the script checks that TRL's processor turns each of them into exactly the
token ids btl-train builds (its chat rendering, re-done here from
host-trainer/src/grpo/prompt.rs). TRL gets the loaded model and a
Qwen2_5_VLProcessor built here from tokenizer.json (Pillow image processor,
as btl-train's preprocessing is a port of it; a video processor, which needs
torchvision, because the processor class insists on one), so no model
directory with tokenizer files is written.

Reward: the BTL reward of agent-core on both sides — btl-train scores
in-process, TRL through `btl score --json` (a subprocess per step, a few
milliseconds). The random model never writes a BTL answer, so every
completion scores 0 and every group is flat: TRL still runs the whole update
(zero advantages, the β·KL term), and so does btl-train here, because the
script sets `grpo.skip_flat_groups = false` (btl-train's default skips such
groups; the script then would time sampling alone).

Settings (spec §7 where it fixes them; `GRPOConfig` field → train.toml key):
num_generations 8 → grpo.num_generations; temperature 0.9, top_p 0.9,
top_k 50 → grpo.*; beta 0.04 (k3 KL to the base model: TRL disables the
PEFT adapter, btl-train switches its adapters off) → grpo.beta; epsilon 0.2
(epsilon_high = epsilon) → grpo.epsilon; loss_type "grpo" (token mean per
sequence, then the mean) = btl-train's only loss; scale_rewards "group"
(unbiased std + 1e-4) = btl-train's advantages; num_iterations 1,
steps_per_generation 1 (one update per generation batch, old log-probs =
detached current ones); per_device_train_batch_size = G with
gradient_accumulation_steps 1 → prompts_per_step 1, micro_batch 0 (the
whole group in one pass); max_completion_length → grpo.max_completion_length;
LoRA r 8, alpha 32, dropout 0.05 on q/k/v/o/gate/up/down_proj of the text
layers only → [lora]; learning_rate 1e-4, AdamW (0.9, 0.999, 1e-8), weight
decay 0.1, max_grad_norm 1.0, cosine schedule with ceil(0.05·steps) warmup
steps → [optim]; float32 on the CPU, no gradient checkpointing (TRL turns
it on by default; btl-train has none), no bf16.

Not matched: the random draws (each side has its own generators), so the
completions differ; the table shows their mean length per side, which sets
the work. How each side spends it is what is compared: TRL's generate runs
the prompt and screenshot once per completion, and its reference and policy
passes run prompt + completion per completion; btl-train evaluates each
prompt once per pass and repeats its KV cache.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "host-trainer" / "tests" / "data" / "tiny-qwen25vl-hf"
TOKENIZER = REPO / "tests" / "data" / "tiny-qwen25vl" / "tokenizer.json"
SCREENSHOT = REPO / "tests" / "data" / "tiny-qwen25vl" / "test-screenshot.png"
OFFICIAL_SAMPLES = REPO / "tests" / "data" / "btl-ui-examples" / "navigation_meta_format.json"

HISTORY_STEPS = [10, 6, 2]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# PEFT matches a string with re.fullmatch: the text layers' projections and
# nothing of the vision tower (whose MLP also has gate/up/down_proj).
LORA_TARGET_REGEX = r"model\.language_model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"

# btl-train's prompt (host-trainer/src/grpo/prompt.rs), as a chat template
# that reads a part's type only: datasets gives every content part every key.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEFAULT_SYSTEM = "You are a helpful assistant."
IMAGE_MARK = "<image>"
VISION = "<|vision_start|><|image_pad|><|vision_end|>"


class BenchError(Exception):
    """A failure the user can act on; printed without a traceback."""


# ---------------------------------------------------------------------------
# Inputs


def make_samples(out: Path) -> Path:
    """Writes the benchmark's samples (official format) and their screenshot into `out`."""
    official = json.loads(OFFICIAL_SAMPLES.read_text(encoding="utf-8"))[0]
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCREENSHOT, out / SCREENSHOT.name)
    from PIL import Image

    with Image.open(SCREENSHOT) as im:
        width, height = im.size
    user = official["messages"][1]["content"]
    samples = []
    for keep in HISTORY_STEPS:
        # Lines "Step k: ..." beyond `keep` are dropped; the rest of the prompt stays verbatim.
        lines = [line for line in user.split("\n")
                 if not (m := re.match(r"Step (\d+): ", line)) or int(m.group(1)) <= keep]
        if sum(1 for line in lines if line.startswith("Step ")) != keep:
            raise BenchError(f"{OFFICIAL_SAMPLES}: its action history has fewer than {keep} steps")
        sample = dict(official)
        sample["id"] = f"navigation-history-{keep}"
        sample["images"] = [SCREENSHOT.name]
        sample["image_sizes"] = [[width, height]]
        sample["messages"] = [official["messages"][0], {"role": "user", "content": "\n".join(lines)}]
        samples.append(sample)
    path = out / "bench-navigation.json"
    path.write_text(json.dumps(samples, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def render_chat(messages: list[dict]) -> str:
    """btl-train's prompt text (prompt.rs `render_chat`)."""
    out = ""
    if not messages or messages[0]["role"] != "system":
        out += f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
    for m in messages:
        out += f"<|im_start|>{m['role']}\n{m['content'].replace(IMAGE_MARK, VISION)}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def btl_train_prompt_ids(tokenizer, messages: list[dict], image_tokens: int) -> list[int]:
    """btl-train's prompt ids (prompt.rs `prompt_ids`): the image pad repeated per merged patch."""
    pad = tokenizer.token_to_id("<|image_pad|>")
    ids: list[int] = []
    for i in tokenizer.encode(render_chat(messages), add_special_tokens=False).ids:
        ids.extend([i] * image_tokens if i == pad else [i])
    return ids


def conversation(messages: list[dict]) -> list[dict]:
    """The official messages as TRL's structured prompt: the `<image>` mark becomes an image part."""
    out = []
    for m in messages:
        parts = []
        for k, text in enumerate(m["content"].split(IMAGE_MARK)):
            if k > 0:
                parts.append({"type": "image"})
            if text:
                parts.append({"type": "text", "text": text})
        out.append({"role": m["role"], "content": parts})
    return out


def make_processor(max_pixels: int):
    from transformers import Qwen2_5_VLProcessor, Qwen2Tokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    config = json.loads((CHECKPOINT / "config.json").read_text(encoding="utf-8"))
    vision = config["vision_config"]
    tokenizer = Qwen2Tokenizer(tokenizer_file=str(TOKENIZER), bos_token=None, eos_token="<|im_end|>",
                               pad_token="<|endoftext|>", unk_token=None, clean_up_tokenization_spaces=False)
    # The Pillow processor: btl-train's preprocessing is a port of it.
    images = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=max_pixels, patch_size=vision["patch_size"],
                                      temporal_patch_size=vision["temporal_patch_size"],
                                      merge_size=vision["spatial_merge_size"])
    return Qwen2_5_VLProcessor(image_processor=images, tokenizer=tokenizer,
                               video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)


def check_prompts(processor, samples: list[dict], base: Path) -> list[int]:
    """Fails unless TRL's processor gives btl-train's ids for every sample; returns the prompt lengths."""
    from PIL import Image
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(TOKENIZER))
    merge = processor.image_processor.merge_size
    lengths = []
    for index, sample in enumerate(samples):
        image = Image.open(base / sample["images"][0]).convert("RGB")
        conv = conversation(sample["messages"])
        for part in conv[-1]["content"]:
            if part["type"] == "image":
                part["image"] = image
        out = processor.apply_chat_template([conv], add_generation_prompt=True, tokenize=True, return_dict=True)
        ours = [int(i) for i in out["input_ids"][0]]
        t, h, w = (int(x) for x in out["image_grid_thw"][0])
        theirs = btl_train_prompt_ids(raw, sample["messages"], t * h * w // (merge * merge))
        if ours != theirs:
            first = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            raise BenchError(f"sample {index}: TRL's prompt differs from btl-train's at token {first} "
                             f"(lengths {len(ours)} and {len(theirs)})")
        lengths.append(len(ours))
    return lengths


# ---------------------------------------------------------------------------
# Reward


def btl_scorer(btl: Path, samples_file: Path, workdir: Path):
    """A TRL reward function: agent-core's BTL reward (released mode, 0.1/0.3/0.6) through `btl score`."""

    def btl_reward(completions, sample_index, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        lines = "".join(json.dumps({"sample": int(i), "completion": t}) + "\n" for i, t in zip(sample_index, texts))
        path = workdir / "completions.jsonl"
        path.write_text(lines, encoding="utf-8")
        done = subprocess.run([str(btl), "score", "--samples", str(samples_file), "--completions", str(path),
                               "--mode", "released", "--weights", "0.1,0.3,0.6", "--json"],
                              check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"btl score failed ({done.returncode}): {done.stderr.strip()}")
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        totals = [row["total"] for row in rows if "total" in row]
        if len(totals) != len(texts):
            raise BenchError(f"btl score returned {len(totals)} scores for {len(texts)} completions")
        return totals

    return btl_reward


# ---------------------------------------------------------------------------
# TRL


# btl-train's [optim] matching trainer_settings().
OPTIM_TOML = """[optim]
lr = 1e-4
beta1 = 0.9
beta2 = 0.999
eps = 1e-8
weight_decay = 0.1
max_grad_norm = 1.0
warmup_ratio = 0.05
"""


def trainer_settings(steps: int, seed: int, output_dir: Path) -> dict:
    """The transformers Trainer settings of btl-train's [optim] and [run] in the TRL benchmarks: AdamW lr 1e-4
    (0.9, 0.999, 1e-8), weight decay 0.1, max grad norm 1.0, cosine schedule with ceil(0.05·steps) warm-up steps,
    float32 on the CPU, no gradient checkpointing, no checkpoints, a log line per step."""
    return dict(output_dir=str(output_dir), max_steps=steps, learning_rate=1e-4, lr_scheduler_type="cosine",
                warmup_steps=math.ceil(0.05 * steps), optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999,
                adam_epsilon=1e-8, weight_decay=0.1, max_grad_norm=1.0, gradient_checkpointing=False, bf16=False,
                fp16=False, use_cpu=True, seed=seed, logging_steps=1, report_to="none", save_strategy="no",
                disable_tqdm=True)


def run_trl(args, samples: list[dict], samples_file: Path, work: Path) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from PIL import Image
    from transformers import PrinterCallback, Qwen2_5_VLForConditionalGeneration, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(args.threads)
    # TRL 1.16 still defines (and we set) the field transformers 5 renamed; checked below instead.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    processor = make_processor(samples[0]["max_pixels"])
    rows = []
    for index, sample in enumerate(samples):
        rows.append({"prompt": conversation(sample["messages"]), "sample_index": index,
                     "image": Image.open(samples_file.parent / sample["images"][0]).convert("RGB")})
    dataset = Dataset.from_list(rows)

    class TimedGRPOTrainer(GRPOTrainer):
        """Records how much of each step is sampling (TRL's `_generate`)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.generate_seconds: list[float] = []

        def _generate(self, prompts):
            start = time.perf_counter()
            try:
                return super()._generate(prompts)
            finally:
                self.generate_seconds.append(time.perf_counter() - start)

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.started = 0.0
            self.seconds: list[float] = []

        def on_step_begin(self, args_, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args_, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self.started)

    g = args.generations
    config = GRPOConfig(
        **trainer_settings(args.steps, args.seed, work / "trl-out"),
        per_device_train_batch_size=g,
        gradient_accumulation_steps=1,
        num_generations=g,
        steps_per_generation=1,
        num_iterations=1,
        max_completion_length=args.max_completion_length,
        temperature=0.9,
        top_p=0.9,
        top_k=50,
        beta=0.04,
        epsilon=0.2,
        loss_type="grpo",
        scale_rewards="group",
        shuffle_dataset=False,
        dataloader_num_workers=0,
    )
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(CHECKPOINT, dtype=torch.float32,
                                                               attn_implementation="sdpa")
    lora = LoraConfig(r=8, lora_alpha=32, lora_dropout=0.05, bias="none", target_modules=LORA_TARGET_REGEX)
    timer = StepTimer()
    trainer = TimedGRPOTrainer(model=model, reward_funcs=[btl_scorer(args.btl, samples_file, work)], args=config,
                               train_dataset=dataset, processing_class=processor, peft_config=lora,
                               callbacks=[timer])
    # The per-step log dicts would bury the report; the metrics are read from log_history instead.
    trainer.remove_callback(PrinterCallback)
    adapted = [name for name, module in trainer.model.named_modules() if name.endswith(".lora_A")]
    if len(adapted) != len(LORA_TARGETS) * model.config.text_config.num_hidden_layers:
        raise BenchError(f"PEFT adapted {len(adapted)} modules, expected 7 per text layer")
    if trainer.model.is_activation_checkpointing:
        raise BenchError("TRL turned gradient checkpointing on; btl-train has none")
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "step" in entry and "loss" in entry]
    if len(timer.seconds) != args.steps:
        raise BenchError(f"TRL ran {len(timer.seconds)} steps, {args.steps} asked for")
    return {
        "seconds": timer.seconds,
        "generate_seconds": trainer.generate_seconds,
        "completion_tokens": [entry.get("completions/mean_length", float("nan")) for entry in logs],
        "flat": [entry.get("frac_reward_zero_std", float("nan")) for entry in logs],
        "reward": [entry.get("reward", float("nan")) for entry in logs],
    }


# ---------------------------------------------------------------------------
# btl-train


def train_toml(args, samples_file: Path, output_dir: Path) -> str:
    q = json.dumps  # a JSON string is a valid TOML basic string for these paths
    return f"""# Written by scripts/bench/grpo_vs_trl.py: the GRPOConfig of the TRL side.
[model]
checkpoint = {q(str(CHECKPOINT))}
tokenizer = {q(str(TOKENIZER))}
mode = "lora"
precision = "f32"
device = "cpu"

[data]
samples = [{q(str(samples_file))}]
shuffle = false

[lora]
r = 8
alpha = 32.0
dropout = 0.05
target_modules = {json.dumps(LORA_TARGETS)}

[grpo]
num_generations = {args.generations}
temperature = 0.9
top_p = 0.9
top_k = 50
beta = 0.04
epsilon = 0.2
max_completion_length = {args.max_completion_length}
prompts_per_step = 1
micro_batch = 0
skip_flat_groups = false

[reward]
mode = "released"
weights = {{ format = 0.1, blink = 0.3, link = 0.6 }}

{OPTIM_TOML}
[run]
steps = {args.steps}
seed = {args.seed}
output_dir = {q(str(output_dir))}
save_every = 0
"""


def run_btl_train(args, samples_file: Path, work: Path, round_index: int) -> dict:
    out = work / f"btl-train-out-{round_index}"
    if out.exists():
        shutil.rmtree(out)
    config = work / f"train-{round_index}.toml"
    config.write_text(train_toml(args, samples_file, out), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    done = subprocess.run([str(args.btl_train), "grpo", "--config", str(config)], env=env,
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"btl-train failed ({done.returncode}); config {config}:\n{done.stderr.strip()}")
    metrics = out / "metrics.jsonl"
    if not metrics.exists():
        raise BenchError(f"btl-train wrote no {metrics}")
    lines = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(lines) != args.steps:
        raise BenchError(f"{metrics}: {len(lines)} steps, {args.steps} asked for")
    return {
        "seconds": [m["seconds"] for m in lines],
        "completion_tokens": [m["completion_tokens_mean"] for m in lines],
        "flat": [m["flat_groups"] / max(m["groups"], 1) for m in lines],
        "reward": [m["reward_mean"] for m in lines],
    }


# ---------------------------------------------------------------------------
# Report


def timed(values: list[float], warmup: int) -> list[float]:
    return values[warmup:]


def summary(runs: list[dict], warmup: int) -> dict:
    """Median, mean and minimum step time over the timed steps of every round."""
    seconds = [s for run in runs for s in timed(run["seconds"], warmup)]
    tokens = [t for run in runs for t in timed(run["completion_tokens"], warmup)]
    flat = [f for run in runs for f in timed(run["flat"], warmup)]
    out = {"median": statistics.median(seconds), "mean": statistics.fmean(seconds), "min": min(seconds),
           "n": len(seconds), "tokens": statistics.fmean(tokens), "flat": statistics.fmean(flat)}
    if "generate_seconds" in runs[0]:
        out["generate"] = statistics.median(s for run in runs for s in timed(run["generate_seconds"], warmup))
    return out


def report(args, prompt_lengths: list[int], trl: dict, ours: dict | None) -> None:
    import torch
    import trl as trl_module

    print(f"CPU, float32, {args.threads} torch threads on both sides (torch.set_num_threads / OMP_NUM_THREADS); "
          f"torch {torch.__version__}, trl {trl_module.__version__}")
    print(f"tiny Qwen2.5-VL (LoRA r 8 on the text projections); G = {args.generations}, "
          f"max {args.max_completion_length} completion tokens, beta 0.04, epsilon 0.2, loss 'grpo'; "
          f"prompts of {', '.join(map(str, prompt_lengths))} tokens (128 image tokens each)")
    print(f"{args.steps} steps × {args.rounds} round(s), the first {args.warmup} of each dropped: "
          f"{trl['n']} timed steps per side")
    print()
    print(f"{'side':<10} {'median s':>9} {'mean s':>8} {'min s':>8} {'tokens/compl.':>14} {'flat groups':>12}")
    rows = [("TRL", trl)] + ([("btl-train", ours)] if ours else [])
    for name, s in rows:
        print(f"{name:<10} {s['median']:>9.3f} {s['mean']:>8.3f} {s['min']:>8.3f} {s['tokens']:>14.1f} "
              f"{s['flat'] * 100:>11.0f}%")
    print(f"TRL's sampling (model.generate): median {trl['generate']:.3f} s of its step")
    if ours is None:
        print("btl-train not run (--trl-only)")
        return
    ratio = trl["median"] / ours["median"]
    verdict = "met" if ratio >= 2 else "NOT met"
    print()
    print(f"ratio TRL / btl-train (medians): {ratio:.2f}  (goal ≥ 2: {verdict}); "
          f"of the minimums, the least disturbed steps on a shared machine: {trl['min'] / ours['min']:.2f}")
    if ours["flat"] > 0:
        print(f"({ours['flat'] * 100:.0f}% of the groups had equal rewards; both sides still ran the full update, "
              "btl-train with grpo.skip_flat_groups = false)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--btl", type=Path, required=True, help="agent-core's btl binary (TRL's reward)")
    ap.add_argument("--btl-train", type=Path, help="the btl-train binary (required unless --trl-only)")
    ap.add_argument("--trl-only", action="store_true", help="time TRL alone")
    ap.add_argument("--work", type=Path, required=True, help="scratch directory")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="leading steps of each run left out of the timing")
    ap.add_argument("--rounds", type=int, default=1, help="alternations of the two sides")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads of each side (2 swings 3-5× with the load on a shared 2-core machine)")
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=32)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    if args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")
    if not args.trl_only and args.btl_train is None:
        ap.error("--btl-train is required (or --trl-only)")
    for name, path in [("--btl", args.btl), ("--btl-train", None if args.trl_only else args.btl_train)]:
        if path is not None and not os.access(path, os.X_OK):
            ap.error(f"{name}: {path} is not an executable file")

    try:
        args.work.mkdir(parents=True, exist_ok=True)
        samples_file = make_samples(args.work / "samples")
        samples = json.loads(samples_file.read_text(encoding="utf-8"))
        prompt_lengths = check_prompts(make_processor(samples[0]["max_pixels"]), samples, samples_file.parent)
        trl_runs, our_runs = [], []
        for round_index in range(args.rounds):
            if not args.trl_only:
                print(f"round {round_index + 1}: btl-train", file=sys.stderr)
                our_runs.append(run_btl_train(args, samples_file, args.work, round_index))
            print(f"round {round_index + 1}: TRL", file=sys.stderr)
            with tempfile.TemporaryDirectory(dir=args.work) as scratch:
                trl_runs.append(run_trl(args, samples, samples_file, Path(scratch)))
        report(args, prompt_lengths, summary(trl_runs, args.warmup),
               summary(our_runs, args.warmup) if our_runs else None)
    except BenchError as e:
        print(f"grpo_vs_trl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
