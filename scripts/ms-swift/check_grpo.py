"""Helpers of scripts/ms-swift/check-grpo, run in its ms-swift venv.

  processor SRC DST MAX_PIXELS
      DST: the Hugging Face checkpoint SRC (as `btl-train` writes one:
      config, weights, tokenizer.json) with the processor files transformers
      and ms-swift load (tokenizer and image processor configs, chat
      template).
  rewards RUN_DIR
      Prints the rewards ms-swift logged per step (RUN_DIR/logging.jsonl).
  compare RUN_DIR DATASET BTL
      Checks that the rewards ms-swift logged for the completions it sampled
      (RUN_DIR/completions.jsonl, written with --log_completions) equal
      `btl score` on the same completions against the same samples (the
      dataset's `btl_sample` column), term by term and weighted; prints the
      comparison and exits 1 on any difference.
  env RUN_DIR ENV_LOG ENV_DIR BTL BTL_TRAIN
      Checks that the rewards ms-swift logged for its multi-turn rollouts
      (RUN_DIR/completions.jsonl) are those recomputed from the episodes btl
      sim env recorded under ENV_DIR: `btl score` of every answer against
      its step's sample from `btl-train data from-trajectories`, and the
      recorded ending; compared as multisets of (process, outcome). Prints
      the rollouts (ENV_LOG, btl_env_plugin.py's BTL_ENV_LOG) and exits 1 on
      any difference.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# btl-train's chat format (grpo/prompt.rs) as a chat template, shared with
# the TRL benchmark.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from grpo_vs_trl import CHAT_TEMPLATE, VISION  # noqa: E402

TERMS = {"BtlFormat": "format", "BtlBlink": "blink", "BtlLink": "link"}
WEIGHTS = {"format": 0.1, "blink": 0.3, "link": 0.6}


def processor(src: Path, dst: Path, max_pixels: int) -> None:
    from transformers import Qwen2_5_VLProcessor, Qwen2Tokenizer
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    shutil.copytree(src, dst, dirs_exist_ok=True)
    vision = json.loads((src / "config.json").read_text(encoding="utf-8"))["vision_config"]
    tokenizer = Qwen2Tokenizer(tokenizer_file=str(src / "tokenizer.json"), bos_token=None, eos_token="<|im_end|>",
                               pad_token="<|endoftext|>", unk_token=None, clean_up_tokenization_spaces=False)
    images = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=max_pixels, patch_size=vision["patch_size"],
                                   temporal_patch_size=vision["temporal_patch_size"],
                                   merge_size=vision["spatial_merge_size"])
    Qwen2_5_VLProcessor(image_processor=images, tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(),
                        chat_template=CHAT_TEMPLATE).save_pretrained(dst)


def rewards(run_dir: Path) -> None:
    steps = 0
    for line in (run_dir / "logging.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "reward" not in row:
            continue
        steps += 1
        terms = ", ".join(f"{term} {float(row[f'rewards/{column}/mean']):.4f}" for column, term in TERMS.items())
        print(f"  step {row['global_step/max_steps']}: reward {float(row['reward']):.4f} ({terms}), "
              f"loss {row['loss']}, KL {row.get('kl', '?')}")
    if steps == 0:
        raise SystemExit(f"{run_dir}/logging.jsonl logs no reward")


def logged_rows(run_dir: Path) -> list[dict]:
    """One dict per logged completion (ms-swift writes one line per step, each a column of lists)."""
    rows = []
    for line in (run_dir / "completions.jsonl").read_text(encoding="utf-8").splitlines():
        step = json.loads(line)
        for k in range(len(step["completion"])):
            rows.append({key: values[k] for key, values in step.items()})
    return rows


def sample_of(prompt: str, samples: list[dict]) -> int:
    """The one sample whose conversation ms-swift's prompt text renders (its
    log keeps the `<image>` mark; the rendered form is accepted too)."""
    found = []
    for i, sample in enumerate(samples):
        texts = [m["content"] for m in sample["messages"]]
        if all(t in prompt or t.replace("<image>", VISION) in prompt for t in texts):
            found.append(i)
    if len(found) != 1:
        raise SystemExit(f"a logged prompt matches {len(found)} samples of the dataset, not one")
    return found[0]


def compare(run_dir: Path, dataset: Path, btl: str) -> None:
    samples = [json.loads(json.loads(line)["btl_sample"])
               for line in dataset.read_text(encoding="utf-8").splitlines()]
    rows = logged_rows(run_dir)
    if not rows:
        raise SystemExit(f"{run_dir}/completions.jsonl logs no completion")
    with tempfile.TemporaryDirectory(prefix="check-grpo-") as tmp:
        samples_path, completions_path = Path(tmp, "samples.json"), Path(tmp, "completions.jsonl")
        samples_path.write_text(json.dumps(samples), encoding="utf-8")
        with completions_path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps({"sample": sample_of(row["prompt"], samples), "completion": row["completion"]}) + "\n")
        done = subprocess.run([btl, "score", "--samples", str(samples_path), "--completions", str(completions_path),
                               "--mode", "released", "--weights", "0.1,0.3,0.6", "--json"],
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"btl score failed ({done.returncode}): {done.stderr.strip()}")
    scores = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    scores = [s for s in scores if "summary" not in s]
    if len(scores) != len(rows):
        raise SystemExit(f"btl score scored {len(scores)} of {len(rows)} completions")
    print(f"{'step':>4} {'completion':>10}  {'ms-swift format/blink/link (weighted)':<40} btl score format/blink/link (total)")
    differences = 0
    for k, (row, score) in enumerate(zip(rows, scores)):
        logged = {term: float(row[column]) for column, term in TERMS.items()}
        weighted = sum(WEIGHTS[t] * v for t, v in logged.items())
        same = all(abs(logged[t] - float(score[t])) <= 1e-6 for t in WEIGHTS) and abs(weighted - score["total"]) <= 1e-6
        differences += not same
        print(f"{row['step']:>4} {k:>10}  {logged['format']:.4f}/{logged['blink']:.4f}/{logged['link']:.4f} ({weighted:.4f})"
              f"{'':<10} {score['format']:.4f}/{score['blink']:.4f}/{score['link']:.4f} ({score['total']:.4f})"
              f"{'' if same else '  DIFFERENT'}")
    distinct = len({round(float(s["total"]), 6) for s in scores})
    print(f"{len(rows) - differences} of {len(rows)} completions: ms-swift's logged rewards equal btl score "
          f"({distinct} distinct totals; MAX_PIXELS={os.environ.get('MAX_PIXELS', 'unset')})")
    if differences:
        raise SystemExit(1)


def episode_rewards(episode: Path, btl: str, btl_train: str) -> tuple[float, float]:
    """One recorded `btl sim env` episode's rewards, recomputed without the
    environment: every answer it was given (each attempt of each step) scored
    by `btl score` against that step's sample, which `btl-train data
    from-trajectories` makes from the oracle's recorded answer; the outcome
    from the episode's recorded ending."""
    steps = [json.loads(line) for line in (episode / "steps.jsonl").read_text(encoding="utf-8").splitlines()]
    record = json.loads((episode / "episode.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="check-grpo-env-") as tmp:
        samples_path, completions_path = Path(tmp, "samples.json"), Path(tmp, "completions.jsonl")
        subprocess.run([btl_train, "data", "from-trajectories", str(episode), "--out", str(samples_path)],
                       capture_output=True, text=True, check=True)
        index = {sample["id"].rsplit("/", 1)[1]: k
                 for k, sample in enumerate(json.loads(samples_path.read_text(encoding="utf-8")))}
        answers = [(index[f"step-{step['index']:04d}"], attempt["raw"])
                   for step in steps for attempt in step["attempts"] if attempt.get("raw") is not None]
        with completions_path.open("w", encoding="utf-8") as f:
            for sample, raw in answers:
                f.write(json.dumps({"sample": sample, "completion": raw}) + "\n")
        done = subprocess.run([btl, "score", "--samples", str(samples_path), "--completions", str(completions_path),
                               "--mode", "released", "--weights", "0.1,0.3,0.6", "--json"],
                              capture_output=True, text=True, check=True)
    totals = [json.loads(line)["total"] for line in done.stdout.splitlines()
              if line.strip() and "summary" not in json.loads(line)]
    if len(totals) != len(answers):
        raise SystemExit(f"{episode}: btl score scored {len(totals)} of {len(answers)} answers")
    outcome = record.get("outcome") or {}
    # A rollout cut off at --max_turns was cancelled: it never ended done.
    done_by_itself = outcome.get("stop", {}).get("reason") != "cancelled"
    return sum(totals) / len(totals), float(done_by_itself and outcome.get("success") is True)


def env(run_dir: Path, env_log: Path, env_dir: Path, btl: str, btl_train: str) -> None:
    episodes = [json.loads(line) for line in env_log.read_text(encoding="utf-8").splitlines()]
    # ms-swift logs the last step's completions a second time when training
    # ends: one line per step is kept.
    lines = {}
    for line in (run_dir / "completions.jsonl").read_text(encoding="utf-8").splitlines():
        step = json.loads(line)
        lines[json.dumps(step["step"])] = step
    logged = [{key: values[k] for key, values in step.items()}
              for step in lines.values() for k in range(len(step["completion"]))]
    recorded = sorted(env_dir.glob("*/episode-*"))
    if not episodes or not logged or not recorded:
        raise SystemExit(f"no rollouts: {len(episodes)} in {env_log}, {len(logged)} logged completions, "
                         f"{len(recorded)} recorded episodes in {env_dir}")
    columns = {term: next((k for k in logged[0] if term in k), None) for term in ("BtlEnvProcess", "BtlEnvOutcome")}
    if None in columns.values():
        raise SystemExit(f"completions.jsonl has no reward columns {columns}: {sorted(logged[0])}")

    def key(process, outcome):
        return (round(float(process), 6), round(float(outcome), 6))

    swift = sorted(key(row[columns["BtlEnvProcess"]], row[columns["BtlEnvOutcome"]]) for row in logged)
    rescored = sorted(key(*episode_rewards(e, btl, btl_train)) for e in recorded)
    for e in episodes:
        print(f"  {e['task']} (seed {e['seed']}): {e['turns']} turns, ended by {e['btl_why']}, "
              f"process {e['btl_process']:.4f}, outcome {e['btl_outcome']:.0f}")
    print(f"ms-swift logged (process, outcome) per rollout:    {swift}")
    print(f"btl score on the recorded episodes' answers:       {rescored}")
    if swift != rescored:
        raise SystemExit("the rewards ms-swift logged are not btl score's on the episodes btl sim env recorded")
    print(f"{len(swift)} of {len(swift)} rollouts: ms-swift's logged rewards equal btl score on the recorded "
          f"episodes ({len(set(swift))} distinct)")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "processor":
        processor(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "rewards":
        rewards(Path(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) == 7 and sys.argv[1] == "env":
        env(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
