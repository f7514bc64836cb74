#!/usr/bin/env python3
"""btl's LlamaPolicy against llama.cpp's llama-mtmd-cli: latency ratios.

Called by scripts/bench/llama-vs-mtmd-cli, which builds both programs. Both
get the same text GGUF, projector, screenshot (already at the model frame, so
neither resizes it), the BTL prompt of the official navigation sample (its
system turn and its user turn with the screenshot), threads, context and
batch sizes, greedy decoding and answer length; the script checks that both
see the same number of prompt tokens and write the same answer. Each repeat
is one round: a bench_llama process (btl: a first generation after loading,
then the timed ones) and two llama-mtmd-cli runs (which warm up at start), so
that a shared machine's load, drifting over time, weighs on both sides alike.

mtmd-cli prints llama.cpp's timings at log verbosity 4. It runs with
`--poll 0`: by default (50) the threads of its llama.cpp threadpool keep
spinning between batches and take the cores from the vision encoder's own
threads (on 2 cores its encoder then takes ~4x as long); btl makes no such
threadpool. One more row gives mtmd-cli's prompt evaluation with the default.

What each side reports, and so what the rows compare:
- image encode: mtmd-cli's "mtmd batch encoding done in N ms"; btl's
  `encode_ms` (the same encoder call, inside its prompt evaluation);
- prompt evaluation, image encoding included: mtmd-cli's llama_perf "prompt
  eval time" (llama.cpp's clock runs from the first prompt batch to the first
  read of logits, so it spans the encoder too); btl's `encode_ms` +
  `prefill_ms`;
- decode: mtmd-cli's llama_perf "eval time" per run; btl's `decode_ms` per
  generated token, which also counts sampling (mtmd-cli's does not);
- total: prompt evaluation + decode.
Medians over the repeats. Ratios are btl's time over mtmd-cli's (below 1:
btl is faster). Then btl alone: the second step of an episode (one more line
of action history) with and without its prefix cache.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "tiny-qwen25vl"
SAMPLE = REPO / "tests" / "data" / "btl-ui-examples" / "navigation_meta_format.json"
MARKER = "<__media__>"
# Qwen's chat format as a jinja template for llama-mtmd-cli. The CLI renders
# the system turn and the user turn separately and, with llama.cpp's built-in
# chatml, puts an extra newline between them; writing each turn's separator
# before it rather than after yields exactly the string transformers' template
# (and btl) renders.
CHATML = ('{% for m in messages %}{% if not loop.first %}{{ "\\n" }}{% endif %}'
          '<|im_start|>{{ m.role }}{{ "\\n" }}{{ m.content }}<|im_end|>{% endfor %}'
          '{% if add_generation_prompt %}{{ "\\n" }}<|im_start|>assistant{{ "\\n" }}{% endif %}')


def parse_cli(output: str) -> dict:
    """The timings and answer llama-mtmd-cli printed (stdout and stderr)."""

    def number(pattern: str, what: str) -> re.Match:
        m = re.search(pattern, output)
        if not m:
            sys.exit(f"llama-mtmd-cli printed no {what}; its output:\n{output[-3000:]}")
        return m

    encode = number(r"mtmd batch encoding done in (\d+) ms", "encoding time")
    perf = r"llama_perf_context_print:\s+"
    prompt = number(perf + r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", "prompt eval time")
    decode = number(perf + r"eval time =\s*([\d.]+) ms /\s*(\d+) runs", "eval time")
    return {
        "encode_ms": float(encode[1]),
        "prefill_ms": float(prompt[1]),
        "prompt_tokens": int(prompt[2]),
        "decode_ms": float(decode[1]),
        "decode_runs": int(decode[2]),
    }


def run_btl(args, work: Path) -> list[dict]:
    cmd = [str(args.btl), "--model", str(args.model), "--mmproj", str(args.mmproj),
           "--image", str(args.image), "--system", str(work / "system.txt"),
           "--user", str(work / "user.txt"), "--threads", str(args.threads),
           "--max-tokens", str(args.max_tokens), "--context", str(args.context),
           "--repeats", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        sys.exit(f"bench_llama failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_cli(args, system: str, user: str, n_ctx: int, poll: int) -> tuple[dict, str]:
    cmd = [str(args.mtmd_cli), "-m", str(args.model), "--mmproj", str(args.mmproj),
           "--image", str(args.image), "-sys", system, "-p", user.replace("<image>", MARKER),
           "-n", str(args.max_tokens), "--temp", "0", "--seed", "0", "-t", str(args.threads),
           "-c", str(n_ctx), "-b", str(min(n_ctx, 2048)), "-ub", str(min(n_ctx, 2048)),
           "--jinja", "--chat-template", CHATML, "-lv", "4", "--poll", str(poll)]
    done = subprocess.run(cmd, capture_output=True)
    # The answer is printed piece by piece, each token's bytes as they are,
    # so a random model's answer need not be UTF-8 (btl decodes it lossily).
    out, err = (b.decode("utf-8", "replace") for b in (done.stdout, done.stderr))
    if done.returncode != 0:
        sys.exit(f"llama-mtmd-cli failed ({done.returncode}):\n{err[-3000:]}")
    return parse_cli(out + err), out


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--btl", type=Path, required=True, help="the bench_llama example")
    p.add_argument("--mtmd-cli", type=Path, required=True)
    p.add_argument("--model", type=Path, default=FIXTURE / "tiny-qwen25vl-f16.gguf")
    p.add_argument("--mmproj", type=Path, default=FIXTURE / "mmproj-tiny-qwen25vl-f16.gguf")
    p.add_argument("--image", type=Path, default=FIXTURE / "test-screenshot.png")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    sample = json.loads(SAMPLE.read_text())[0]
    system, user = (m["content"] for m in sample["messages"][:2])
    # One round = one bench_llama process and the two mtmd-cli runs, so that
    # the load of a shared machine drifting over time hits both sides alike.
    n_ctx = args.context
    btl, cli, polling, answers = [], [], [], set()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "system.txt").write_text(system)
        (work / "user.txt").write_text(user)
        for _ in range(args.repeats):
            btl += run_btl(args, work)
            prompt_tokens = next(r["prompt_tokens"] for r in btl if r["case"] == "full")
            n_ctx = max(args.context, prompt_tokens + args.max_tokens)
            timings, answer = run_cli(args, system, user, n_ctx, poll=0)
            cli.append(timings)
            answers.add(answer.strip())
            polling.append(run_cli(args, system, user, n_ctx, poll=50)[0])
    for r in btl:
        r["prompt_ms"] = r["encode_ms"] + r["prefill_ms"]
    full = [r for r in btl if r["case"] == "full"]
    firsts = [r for r in btl if r["case"] == "first"]

    b = {
        "encode": median(full, "encode_ms"),
        "prefill": median(full, "prompt_ms"),
        "per_token": statistics.median(r["decode_ms"] / max(r["generated_tokens"], 1) for r in full),
    }
    c = {
        "encode": median(cli, "encode_ms"),
        "prefill": median(cli, "prefill_ms"),
        "per_token": statistics.median(r["decode_ms"] / max(r["decode_runs"], 1) for r in cli),
    }
    generated = full[0]["generated_tokens"]
    b["total"] = b["prefill"] + b["per_token"] * generated
    c["total"] = c["prefill"] + c["per_token"] * generated
    same = answers == {full[0]["text"].strip()}

    print(f"btl vs llama-mtmd-cli: {args.model.name} + {args.mmproj.name}, {args.image.name}, "
          f"{args.threads} threads, median of {args.repeats}")
    print(f"prompt tokens: btl {full[0]['prompt_tokens']}, mtmd-cli {cli[0]['prompt_tokens']}; "
          f"answer: {generated} tokens, {'the same' if same else 'DIFFERENT'} from both")
    print(f"{'':34} {'btl':>10} {'mtmd-cli':>10} {'btl/cli':>9}")
    rows = [
        ("image encode (ms)", b["encode"], c["encode"]),
        ("prompt eval incl. image (ms)", b["prefill"], c["prefill"]),
        ("decode (ms/token)", b["per_token"], c["per_token"]),
        ("total, prompt + decode (ms)", b["total"], c["total"]),
    ]
    for label, x, y in rows:
        print(f"{label:34} {x:>10.2f} {y:>10.2f} {x / y:>8.2f}x")
    tokens = full[0]["prompt_tokens"]
    print(f"{'prompt tokens/s':34} {tokens / b['prefill'] * 1e3:>10.0f} {tokens / c['prefill'] * 1e3:>10.0f}")
    print(f"{'decode tokens/s':34} {1e3 / b['per_token']:>10.0f} {1e3 / c['per_token']:>10.0f}")

    spin = median(polling, "prefill_ms")
    print(f"{'mtmd-cli --poll 50: prompt eval':34} {b['prefill']:>10.2f} {spin:>10.2f} {b['prefill'] / spin:>8.2f}x")
    first = median(firsts, "prompt_ms")
    print(f"{'btl first call: prompt eval (ms)':34} {first:>10.2f} {c['prefill']:>10.2f} {first / c['prefill']:>8.2f}x")

    reuse = [r for r in btl if r["case"] == "step2-reuse"]
    fresh = [r for r in btl if r["case"] == "step2-no-reuse"]
    with_ms, without_ms = median(reuse, "prompt_ms"), median(fresh, "prompt_ms")
    print()
    print("btl, second step of an episode (one more history line), prompt evaluation:")
    print(f"  prefix reuse  {with_ms:>10.2f} ms ({reuse[0]['cached_prompt_tokens']} of "
          f"{reuse[0]['prompt_tokens']} tokens cached)")
    print(f"  no reuse      {without_ms:>10.2f} ms")
    print(f"  ratio         {with_ms / without_ms:>10.2f}x")
    if not same:
        print("the answers differ:", sorted(answers), "vs", full[0]["text"], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
