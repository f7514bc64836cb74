#!/usr/bin/env python3
"""Throughput of btl-train's learning loop, and its SFT against TRL's SFTTrainer.

Called by scripts/bench/learning-throughput (which builds the binaries and,
with --trl, provides the TRL venv); runs on any Python 3.10+ without it.

For each model of --models and each device:precision of --devices:
- SFT: `btl-train sft`, full fine-tuning with the vision tower, 8 samples per
  optimizer step in one micro-batch (their common prompt prefix shared), on
  oracle samples at --max-pixels. samples/s = 8 / seconds per step; tokens/s
  counts whole sequences (prompt with its image tokens, plus the answer),
  from the `prompt_tokens` and `completion_tokens_mean` of metrics.jsonl.
- Online GRPO: `btl-train grpo --online`, LoRA, --phones episodes per
  optimizer step on in-process virtual phones, G completions per visited
  state, at most --episode-steps steps an episode. Environment steps/s =
  visited states (metrics.jsonl `groups`) / seconds per step. Flat groups
  are trained too (`skip_flat_groups = false`): an untrained model earns no
  reward, and skipping would time sampling alone.
The first --warmup steps of every run are dropped; the table gives the
median over the rest. `first loss` is the loss of step 1, the same samples
and the same initial weights on every device, so rows of one model must
agree (float32 to a few 1e-5; bfloat16 autocast to about 1e-2).

--profile: each run takes one more step, recorded with libtorch's profiler
(`run.profile_steps`, see host-trainer/src/profile.rs) and left out of the
timing; the run's profile/summary.txt says how many operators, kernels and
CUDA runtime calls a step makes and how long the GPU computes in it.

Models: `tiny` is the parity fixture (host-trainer/tests/data/tiny-qwen25vl-hf,
0.5M parameters); `mini` and `small` are made by `btl-train init` from
host-trainer/models/btl-{mini,small}.toml (5.4M, the default model's size,
and 21.8M). All share the fixture's 1,486-token tokenizer.

--trl: TRL's SFTTrainer on the first model, the same samples in the same
order, the same settings (full fine-tuning of every weight, float32 on the
CPU, 8 samples per optimizer step in one batch, loss on the answer tokens
only, AdamW lr 1e-4 (0.9, 0.999, 1e-8), weight decay 0.1, max grad norm 1.0,
cosine schedule with 5% warm-up, no gradient checkpointing) and the same
number of torch threads, timed from its `on_step_begin` to `on_step_end`
callback. Its dataset is `btl-train data export --format ms-swift-sft` of
the same samples (each answer the exact text btl-train trains on), and the
script checks that TRL's processor gives btl-train's token ids for every
prompt and answer before timing anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from grpo_vs_trl import (CHAT_TEMPLATE, OPTIM_TOML, BenchError, btl_train_prompt_ids, conversation, make_processor,
                         trainer_settings)

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "host-trainer" / "tests" / "data" / "tiny-qwen25vl-hf"
TOKENIZER = REPO / "tests" / "data" / "tiny-qwen25vl" / "tokenizer.json"
MODEL_CONFIGS = REPO / "host-trainer" / "models"
SAMPLES_PER_STEP = 8
# Oracle episodes of these templates make the SFT samples: short and long
# answers, typed text and taps.
TASKS = "wifi_on,alarm_set,contact_add,web_search,note_create,brightness_set"


def run(cmd: list[str], what: str, env: dict | None = None) -> str:
    done = subprocess.run([str(c) for c in cmd], env=env, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed ({done.returncode}): {' '.join(map(str, cmd))}\n{done.stderr.strip()}")
    return done.stdout


# ---------------------------------------------------------------------------
# Inputs


def make_samples(args) -> Path:
    """Oracle samples at --max-pixels: --samples as given, or collected with --btl."""
    if args.samples:
        return args.samples.resolve()
    out = args.work / "oracle"
    samples = args.work / "samples" / "oracle.json"
    if samples.exists():
        return samples
    shutil.rmtree(out, ignore_errors=True)
    run([args.btl, "collect", "--sim", "2", "--tasks", TASKS, "--episodes", "2", "--split", "train",
         "--policy", "oracle", "--profile", "btl-extended", "--until-finish", "--max-pixels",
         str(args.max_pixels), "--out", out], "btl collect")
    run([args.btl_train, "data", "from-trajectories", out, "--out", samples], "btl-train data from-trajectories")
    return samples


def checkpoint(args, model: str) -> Path:
    if model == "tiny":
        return TINY
    out = args.work / f"init-{model}"
    if not (out / "hf" / "model.safetensors").exists():
        run([args.btl_train, "init", "--config", MODEL_CONFIGS / f"btl-{model}.toml", "--out", out, "--force"],
            f"btl-train init ({model})")
    return out / "hf"


# ---------------------------------------------------------------------------
# btl-train


def config_toml(args, objective: str, model_dir: Path, device: str, precision: str, samples: Path,
                output_dir: Path) -> str:
    q = json.dumps  # a JSON string is a valid TOML basic string for these paths
    common = f"""# Written by scripts/bench/learning_throughput.py.
[model]
checkpoint = {q(str(model_dir))}
tokenizer = {q(str(TOKENIZER))}
precision = "{precision}"
device = "{device}"
"""
    if objective == "sft":
        steps = args.sft_steps + args.profile
        body = f"""mode = "full"
train_vision = true

[data]
samples = [{q(str(samples))}]
shuffle = false
max_pixels = {args.max_pixels}

[sft]
samples_per_step = {SAMPLES_PER_STEP}
micro_batch = {SAMPLES_PER_STEP}
batching = "{args.batching}"
"""
    else:
        steps = args.grpo_steps + args.profile
        body = f"""mode = "lora"

[data]
max_pixels = {args.max_pixels}

[grpo]
num_generations = {args.generations}
max_completion_length = {args.max_completion_length}
skip_flat_groups = false

[online]
tasks = ["wifi_on", "alarm_on"]
phones = {args.phones}
max_steps = {args.episode_steps}
"""
    return common + body + "\n" + OPTIM_TOML + f"""
[run]
objective = "{'sft' if objective == 'sft' else 'grpo'}"
steps = {steps}
seed = 0
output_dir = {q(str(output_dir))}
save_every = 0
""" + (f"profile_steps = [{steps}, {steps}]\n" if args.profile else "")


def run_btl_train(args, objective: str, model: str, device: str, precision: str, samples: Path) -> dict:
    name = f"{objective}-{model}-{device.replace(':', '')}-{precision}-{args.batching}"
    out = args.work / "runs" / name
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = args.work / "runs" / f"{name}.toml"
    config.write_text(config_toml(args, objective, checkpoint(args, model), device, precision, samples, out),
                      encoding="utf-8")
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    started = time.perf_counter()
    run([args.btl_train, "grpo" if objective == "online-grpo" else "sft", "--config", config],
        f"btl-train {objective} ({model}, {device}, {precision})", env)
    wall = time.perf_counter() - started
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    # A profiled step (--profile) is the last one, and is not timed.
    timed = lines[args.warmup:len(lines) - args.profile]
    if not timed:
        raise BenchError(f"{out}/metrics.jsonl: {len(lines)} steps, none past the {args.warmup} warm-up step(s)")
    seconds = statistics.median(m["seconds"] for m in timed)
    row = {"objective": objective, "model": model, "device": device, "precision": precision,
           "batching": args.batching,
           "steps": len(timed), "seconds": seconds, "first_loss": lines[0]["loss"], "wall": wall}
    if args.profile:
        row["profile"] = str(out / "profile" / "summary.txt")
    if objective == "sft":
        tokens = statistics.fmean(m["prompt_tokens"] + m["completion_tokens_mean"] * SAMPLES_PER_STEP
                                  for m in timed)
        row.update(samples_per_s=SAMPLES_PER_STEP / seconds, tokens_per_s=tokens / seconds,
                   tokens_per_sample=tokens / SAMPLES_PER_STEP)
    else:
        states = statistics.fmean(m["groups"] for m in timed)
        row.update(env_steps_per_s=statistics.fmean(m["groups"] / m["seconds"] for m in timed),
                   states_per_step=states,
                   completion_tokens=statistics.fmean(m["completion_tokens_mean"] for m in timed))
    return row


# ---------------------------------------------------------------------------
# TRL's SFTTrainer


def trl_dataset(args, samples: Path) -> list[dict]:
    """The samples as TRL prompt/completion rows, through btl-train's own SFT export."""
    out = args.work / "trl-data"
    shutil.rmtree(out, ignore_errors=True)
    run([args.btl_train, "data", "export", "--format", "ms-swift-sft", "--samples", samples, "--out", out],
        "btl-train data export")
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return rows[: args.sft_steps * SAMPLES_PER_STEP]


def check_trl_batches(trainer, expected: list[tuple[list[int], list[int]]]) -> None:
    """Fails unless TRL's collator gives btl-train's prompt ids and trains btl-train's answer ids."""
    for start in range(0, len(expected), SAMPLES_PER_STEP):
        indices = range(start, min(start + SAMPLES_PER_STEP, len(expected)))
        batch = trainer.data_collator([trainer.train_dataset[i] for i in indices])
        for row, index in enumerate(indices):
            ids = batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist()
            labels = [t for t in batch["labels"][row].tolist() if t != -100]
            prompt, answer = expected[index]
            ours = prompt + answer
            if ids != ours:
                at = next((k for k, (a, b) in enumerate(zip(ids, ours)) if a != b), min(len(ids), len(ours)))
                raise BenchError(f"sample {index}: TRL's input ids differ from btl-train's prompt and answer "
                                 f"at token {at} of {len(ids)} and {len(ours)} (prompt: {len(prompt)}): "
                                 f"{ids[at:at + 5]} against {ours[at:at + 5]}")
            if labels != answer:
                raise BenchError(f"sample {index}: TRL trains {len(labels)} tokens, btl-train {len(answer)} "
                                 "(the answer and <|im_end|>)")


def run_trl(args, model: str, samples: Path) -> dict:
    import torch
    from datasets import Dataset
    from PIL import Image
    from tokenizers import Tokenizer
    from transformers import PrinterCallback, Qwen2_5_VLForConditionalGeneration, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(args.threads)
    rows = trl_dataset(args, samples)
    if len(rows) < args.sft_steps * SAMPLES_PER_STEP:
        raise BenchError(f"{samples}: {len(rows)} samples, {args.sft_steps * SAMPLES_PER_STEP} needed")
    processor = make_processor(args.max_pixels)
    # No newline after the answer's <|im_end|>: TRL's completion is then
    # exactly the tokens btl-train trains on (the answer and <|im_end|>).
    # The newline is an expression: trim_blocks would eat a literal one.
    processor.chat_template = CHAT_TEMPLATE.replace(
        "<|im_end|>\n{% endfor %}",
        "<|im_end|>{% if not (loop.last and message['role'] == 'assistant') %}{{ '\\n' }}{% endif %}{% endfor %}")
    raw = Tokenizer.from_file(str(TOKENIZER))
    im_end = raw.token_to_id("<|im_end|>")
    merge = processor.image_processor.merge_size
    data, expected = [], []
    for row in rows:
        prompt, answer = row["messages"][:-1], row["messages"][-1]["content"]
        image = Image.open(row["images"][0]).convert("RGB")
        data.append({"prompt": conversation(prompt), "completion": [{"role": "assistant", "content": answer}],
                     "images": [image]})
        grid = processor.image_processor(images=[image])["image_grid_thw"][0]
        image_tokens = int(grid[0] * grid[1] * grid[2]) // (merge * merge)
        expected.append((btl_train_prompt_ids(raw, prompt, image_tokens),
                         raw.encode(answer, add_special_tokens=False).ids + [im_end]))

    class StepTimer(TrainerCallback):
        """Each step from the end of the one before (data loading included, as in btl-train's
        `seconds`), and the span from `on_step_begin` alone (the model's work)."""

        def __init__(self):
            self.last = self.started = 0.0
            self.seconds: list[float] = []
            self.compute: list[float] = []

        def on_train_begin(self, args_, state, control, **kwargs):
            self.last = time.perf_counter()

        def on_step_begin(self, args_, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args_, state, control, **kwargs):
            now = time.perf_counter()
            self.seconds.append(now - self.last)
            self.compute.append(now - self.started)
            self.last = now

    config = SFTConfig(
        **trainer_settings(args.sft_steps, 0, args.work / "trl-out"),
        per_device_train_batch_size=SAMPLES_PER_STEP,
        gradient_accumulation_steps=1,
        completion_only_loss=True,
        max_length=None,
        shuffle_dataset=False,
        train_sampling_strategy="sequential",
        dataloader_num_workers=args.trl_workers,
    )
    hf = Qwen2_5_VLForConditionalGeneration.from_pretrained(checkpoint(args, model), dtype=torch.float32,
                                                            attn_implementation="sdpa")
    timer = StepTimer()
    trainer = SFTTrainer(model=hf, args=config, train_dataset=Dataset.from_list(data), processing_class=processor,
                         callbacks=[timer])
    trainer.remove_callback(PrinterCallback)
    check_trl_batches(trainer, expected)
    frozen = [name for name, p in trainer.model.named_parameters() if not p.requires_grad]
    if frozen:
        raise BenchError(f"TRL froze {len(frozen)} tensors (e.g. {frozen[0]}); btl-train trains every weight")
    trainer.train()
    if len(timer.seconds) != args.sft_steps:
        raise BenchError(f"TRL ran {len(timer.seconds)} steps, {args.sft_steps} asked for")
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    seconds = statistics.median(timer.seconds[args.warmup:])
    return {"objective": "sft (TRL)", "model": model, "device": "cpu", "precision": "f32",
            "steps": len(timer.seconds) - args.warmup, "seconds": seconds,
            "first_loss": logs[0]["loss"] if logs else float("nan"),
            "samples_per_s": SAMPLES_PER_STEP / seconds,
            "compute_seconds": statistics.median(timer.compute[args.warmup:])}


# ---------------------------------------------------------------------------
# Report


def report(args, rows: list[dict]) -> None:
    print(f"{args.threads} torch threads on the CPU; {args.max_pixels:,}-pixel screenshots; medians over "
          f"{args.sft_steps - args.warmup} SFT and {args.grpo_steps - args.warmup} online GRPO step(s) per row "
          f"after {args.warmup} warm-up step(s)")
    print(f"SFT: {SAMPLES_PER_STEP} samples per step, full fine-tuning; online GRPO: LoRA, {args.phones} phones, "
          f"G = {args.generations}, at most {args.max_completion_length} tokens per completion, "
          f"{args.episode_steps} steps per episode")
    print()
    print(f"{'run':<12} {'model':<6} {'device':<6} {'prec.':<5} {'batching':<13} {'s/step':>8} {'samples/s':>10} {'tokens/s':>10} "
          f"{'env steps/s':>12} {'first loss':>11}")
    for r in rows:
        samples = f"{r['samples_per_s']:.2f}" if "samples_per_s" in r else "-"
        tokens = f"{r['tokens_per_s']:.0f}" if "tokens_per_s" in r else "-"
        env = f"{r['env_steps_per_s']:.2f}" if "env_steps_per_s" in r else "-"
        # A GRPO step 1 loss is only its β·KL term, 0 before any update.
        loss = f"{r['first_loss']:.5f}" if "samples_per_s" in r else "-"
        batching = r.get("batching", "-") if r["objective"] == "sft" else "-"
        print(f"{r['objective']:<12} {r['model']:<6} {r['device']:<6} {r['precision']:<5} {batching:<13} {r['seconds']:>8.3f} "
              f"{samples:>10} {tokens:>10} {env:>12} {loss:>11}")
    trl = next((r for r in rows if r["objective"] == "sft (TRL)"), None)
    ours = next((r for r in rows if trl and r["objective"] == "sft" and r["model"] == trl["model"]
                 and r["device"] == "cpu" and r["precision"] == "f32"), None)
    if trl and ours:
        ratio = trl["seconds"] / ours["seconds"]
        print()
        print(f"SFT, TRL / btl-train seconds per step ({trl['model']}, CPU, float32): {ratio:.2f} "
              f"(goal ≥ 2: {'met' if ratio >= 2 else 'NOT met'}); TRL's steps without its data loading "
              f"(on_step_begin to on_step_end): {trl['compute_seconds']:.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--btl-train", type=Path, required=True)
    ap.add_argument("--btl", type=Path, help="agent-core's btl binary, to collect the oracle samples")
    ap.add_argument("--samples", type=Path, help="oracle samples to use instead (official format, ≥ 8)")
    ap.add_argument("--work", type=Path, required=True, help="scratch directory")
    ap.add_argument("--models", default="tiny,small", help="comma-separated: tiny, mini, small")
    ap.add_argument("--devices", default="cpu:f32",
                    help="comma-separated device:precision, e.g. cpu:f32,cuda:f32,cuda:bf16")
    ap.add_argument("--sft-steps", type=int, default=6)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--no-grpo", action="store_true", help="time SFT only")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-pixels", type=int, default=200_704)
    ap.add_argument("--phones", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--max-completion-length", type=int, default=64)
    ap.add_argument("--episode-steps", type=int, default=4)
    ap.add_argument("--trl", action="store_true", help="add TRL's SFTTrainer on the first model (needs the TRL venv)")
    ap.add_argument("--trl-workers", type=int, default=0,
                    help="TRL's data loader processes (0: it loads in the training process, between steps)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--batching", choices=["auto", "shared-prefix", "padded"], default="auto",
                    help="how SFT evaluates its 8-sample micro-batch (sft.batching): auto is padded on a GPU, "
                         "shared-prefix on the CPU")
    ap.add_argument("--profile", action="store_const", const=1, default=0,
                    help="record one more step of each run with libtorch's profiler (not timed); its "
                         "summary is in the run's profile/summary.txt")
    args = ap.parse_args()
    if min(args.sft_steps, args.grpo_steps) <= args.warmup:
        ap.error("--sft-steps and --grpo-steps must exceed --warmup")
    if args.samples is None and args.btl is None:
        ap.error("--btl (to collect samples) or --samples is required")
    models = args.models.split(",")
    devices = [d.split(":") for d in args.devices.split(",")]
    for m in models:
        if m not in ("tiny", "mini", "small"):
            ap.error(f"--models: unknown model '{m}' (tiny, mini, small)")
    for d in devices:
        if len(d) != 2 or d[1] not in ("f32", "bf16"):
            ap.error(f"--devices: '{':'.join(d)}' is not DEVICE:f32 or DEVICE:bf16")
    try:
        args.work = args.work.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        samples = make_samples(args)
        rows = []
        for model in models:
            for device, precision in devices:
                print(f"{model} on {device} ({precision}): SFT", file=sys.stderr)
                rows.append(run_btl_train(args, "sft", model, device, precision, samples))
                if not args.no_grpo:
                    print(f"{model} on {device} ({precision}): online GRPO", file=sys.stderr)
                    rows.append(run_btl_train(args, "online-grpo", model, device, precision, samples))
        if args.trl:
            print(f"{models[0]}: TRL's SFTTrainer", file=sys.stderr)
            rows.append(run_trl(args, models[0], samples))
        report(args, rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    except BenchError as e:
        print(f"learning_throughput: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
