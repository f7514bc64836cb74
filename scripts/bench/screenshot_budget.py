"""Prints scripts/bench/screenshot-budget's table from bench_llama's JSON
lines (one file per budget: `first`, then `step2` with the prefix cached).

The phone column is an estimate, not a measurement. It scales this CPU's
times by one factor: the prompt-evaluation rate measured here against a
published phone rate. MNN-LLM's figure for Qwen2-VL-2B at 4 bits on an Arm
CPU with KleidiAI is about 266 prompt tokens/s. Qwen2-VL-2B's language model
has 1.54B parameters and Qwen2.5-VL-3B's has 3.09B, so prompt evaluation,
which is bound by compute, is taken to run at 266 x 1.54 / 3.09 tokens/s.
The vision towers are about the same size (675M and 669M parameters), and
the same factor is applied to vision encoding. A step's estimate covers
encoding and prompt evaluation only, without decoding the answer.

Usage: python screenshot_budget.py WORK BUDGETS THREADS
"""

import json
import os
import platform
import sys

PHONE_PROMPT_TOKENS_PER_S = 266 * 1.54 / 3.09
PATCH_MERGE = 28 * 28  # pixels per image token: 14-pixel patches, 2x2 merged


def main() -> None:
    work, budgets, threads = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    runs = {}
    for budget in budgets:
        cases = [json.loads(line) for line in open(f"{work}/budget-{budget}.jsonl")]
        runs[budget] = {c["case"]: c for c in cases}
    # One speed factor: this CPU's prompt tokens per second over every
    # step 1, against the phone's.
    tokens = sum(r["first"]["prompt_tokens"] for r in runs.values())
    seconds = sum(r["first"]["prefill_ms"] for r in runs.values()) / 1000
    here = tokens / seconds
    factor = here / PHONE_PROMPT_TOKENS_PER_S

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.machine())
    print(f"Qwen2.5-VL-3B dimensions (random weights; text q4_0, vision f16), {cpu}, "
          f"{threads} threads of {os.cpu_count()} CPUs")
    print(f"measured here: encode and prompt evaluation; step 2 has step 1's prefix cached; "
          f"prompt evaluation {here:.1f} tokens/s")
    print(f"phone: an ESTIMATE, this CPU's encode + step-2 evaluation x {factor:.3f} "
          f"(published {PHONE_PROMPT_TOKENS_PER_S:.0f} tokens/s for a 3B model, scaled from MNN's 266 at 1.5B)")
    header = (f"{'max_pixels':>10} {'frame':>9} {'image tok':>9} {'prompt tok':>10} {'encode s':>8} "
              f"{'step1 eval s':>12} {'step2 eval s':>12} {'cached':>6} {'prefix gain':>11} "
              f"{'step2 s':>7} {'peak RSS GiB':>12} {'phone step s':>12}")
    print(header)
    for budget, r in runs.items():
        first, second = r["first"], r["step2"]
        width, height = first["image"]
        image_tokens = width * height // PATCH_MERGE
        encode = first["encode_ms"] / 1000
        eval1, eval2 = first["prefill_ms"] / 1000, second["prefill_ms"] / 1000
        step2 = second["encode_ms"] / 1000 + eval2
        phone = step2 * factor
        print(f"{int(budget):>10} {f'{width}x{height}':>9} {image_tokens:>9} {first['prompt_tokens']:>10} "
              f"{encode:>8.1f} {eval1:>12.1f} {eval2:>12.1f} {second['cached_prompt_tokens']:>6} "
              f"{eval1 / eval2:>10.2f}x {step2:>7.1f} {first['peak_rss_bytes'] / 2**30:>12.2f} {phone:>12.1f}")


if __name__ == "__main__":
    main()
