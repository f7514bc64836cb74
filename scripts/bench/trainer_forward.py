#!/usr/bin/env python3
"""host-trainer vs transformers: forward and forward+backward time on the CPU.

Called by scripts/bench/trainer-forward (which builds host-trainer's
bench_forward example and provides the venv). For each model size it writes a
float32 checkpoint and one input (a 224×448 screenshot's worth of random
patches + text), times transformers, runs bench_forward on the same files,
and prints a table of seconds and ratios (host-trainer / transformers; below 1
is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "host-trainer" / "tests" / "data" / "tiny-qwen25vl-hf"

# A mid-size model (~60M parameters): Qwen2.5-VL's shape at a fraction of the width and depth.
MID = dict(
    text_config=dict(vocab_size=8192, hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                     num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=4096,
                     rms_norm_eps=1e-6, bos_token_id=8004, eos_token_id=8005, pad_token_id=8004,
                     rope_parameters=dict(rope_type="default", rope_theta=1e6, mrope_section=[8, 12, 12])),
    vision_config=dict(depth=6, hidden_size=384, intermediate_size=1024, num_heads=6, out_hidden_size=768,
                       patch_size=14, temporal_patch_size=2, spatial_merge_size=2, window_size=112,
                       fullatt_block_indexes=[2, 5], hidden_act="silu", in_channels=3),
    image_token_id=8000, video_token_id=8001, vision_start_token_id=8002, vision_end_token_id=8003,
    tie_word_embeddings=False,
)
GRID = [1, 32, 16]  # a 224×448 screenshot: 512 patches, 128 image tokens
N_TEXT = 256


def make_inputs(path: Path, image_token_id: int, vocab: int, seed: int) -> None:
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    n_patches = GRID[0] * GRID[1] * GRID[2]
    pixel_values = torch.randn(n_patches, 3 * 2 * 14 * 14, generator=gen)
    text = torch.randint(0, min(vocab, image_token_id) - 10, (N_TEXT,), generator=gen)
    image = torch.full((n_patches // 4,), image_token_id)
    ids = torch.cat([text[:16], image, text[16:]]).reshape(1, -1)
    save_file({"pixel_values": pixel_values, "input_ids": ids, "grid_thw": torch.tensor(GRID)}, str(path))


def time_transformers(checkpoint: Path, inputs: Path, runs: int, threads: int) -> dict:
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen2_5_VLForConditionalGeneration

    torch.set_num_threads(threads)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        checkpoint, dtype=torch.float32, attn_implementation="sdpa")
    t = load_file(str(inputs))
    ids = t["input_ids"]
    kwargs = dict(input_ids=ids, mm_token_type_ids=(ids == model.config.image_token_id).int(),
                  pixel_values=t["pixel_values"], image_grid_thw=t["grid_thw"].reshape(1, 3))

    def forward():
        model.eval()
        with torch.no_grad():
            model(**kwargs)

    def forward_backward():
        model.train()
        logits = model(**kwargs).logits
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None])
        (-logp.mean()).backward()
        model.zero_grad(set_to_none=False)

    def median(f):
        f()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    return {"forward_s": median(forward), "forward_backward_s": median(forward_backward)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-binary", required=True, help="host-trainer's bench_forward example")
    ap.add_argument("--work", required=True, help="scratch dir for the mid-size checkpoint and inputs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the two sides; the best median counts")
    args = ap.parse_args()

    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    mid = work / "mid-qwen25vl"
    if not (mid / "model.safetensors").exists():
        torch.manual_seed(0)
        config = Qwen2_5_VLConfig(**MID)
        Qwen2_5_VLForConditionalGeneration(config).to(torch.float32).save_pretrained(mid)
    sizes = [("tiny", TINY), ("mid", mid)]

    rows = []
    for name, checkpoint in sizes:
        config = json.loads((checkpoint / "config.json").read_text())
        inputs = work / f"inputs-{name}.safetensors"
        make_inputs(inputs, config["image_token_id"], config["text_config"]["vocab_size"], seed=1)
        # Alternate the two sides and keep each one's best median: on a shared machine the
        # load changes between runs, and the minimum is the least disturbed estimate.
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(json.loads(subprocess.run(
                [args.bench_binary, str(checkpoint), str(inputs), str(args.runs), str(args.threads)],
                check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]))
            theirs.append(time_transformers(checkpoint, inputs, args.runs, args.threads))
        best = lambda results: {k: min(r[k] for r in results) for k in results[0]}  # noqa: E731
        rows.append((name, best(ours), best(theirs)))

    tokens = GRID[0] * GRID[1] * GRID[2] // 4 + N_TEXT
    print(f"CPU, float32, {args.threads} threads, best of {args.rounds} alternating medians of {args.runs} runs; input: {GRID[1]}×{GRID[2]} patches "
          f"({GRID[1] * 14}×{GRID[2] * 14} px) + {N_TEXT} text tokens = {tokens} tokens")
    print(f"{'model':<6} {'pass':<17} {'host-trainer s':>15} {'transformers s':>15} {'ratio':>7}")
    for name, ours, theirs in rows:
        for key, label_pass in [("forward_s", "forward"), ("forward_backward_s", "forward+backward")]:
            print(f"{name:<6} {label_pass:<17} {ours[key]:>15.4f} {theirs[key]:>15.4f} {ours[key] / theirs[key]:>7.2f}")


if __name__ == "__main__":
    main()
