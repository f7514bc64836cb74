"""The BTL reward inside ms-swift's GRPO, computed by btl itself.

An ms-swift reward plugin: each call writes the batch's samples and
completions to a temporary directory and runs `btl score --json` on them,
so training scores exactly as `btl score` does (the `released` or `paper`
rules of the spec, §4). The dataset comes from
`btl-train data export --format ms-swift`, whose `btl_sample` column holds
each row's whole official-format sample.

Reward functions (pass them to `--reward_funcs`):
  btl         the weighted total, weights from BTL_REWARD_WEIGHTS;
  btl_format, btl_blink, btl_link
              the three terms, to be weighted by ms-swift's `--reward_weights`
              (0.1 0.3 0.6 in the BTL-UI recipe) and logged one by one.

Environment:
  BTL_BIN             the btl executable (default: `btl` on PATH);
  BTL_REWARD_MODE     released (default) or paper;
  BTL_REWARD_WEIGHTS  format,blink,link for `btl` (default 0.1,0.3,0.6).
"""

import json
import os
import subprocess
import tempfile

try:
    from swift.rewards import ORM, orms  # ms-swift 4.x
except ImportError:
    from swift.plugin import ORM, orms  # ms-swift 3.x


def _text(completion):
    """The completion's text; some ms-swift versions pass message lists."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return completion.get("content") or ""
    if isinstance(completion, list) and completion:
        return _text(completion[-1])
    return ""


def btl_score(completions, samples):
    """`btl score` of each completion against its sample (a JSON string or
    dict): one dict with format, blink, link and total per completion."""
    if len(completions) != len(samples):
        raise ValueError(f"{len(completions)} completions for {len(samples)} samples")
    with tempfile.TemporaryDirectory(prefix="btl-reward-") as tmp:
        samples_path = os.path.join(tmp, "samples.json")
        completions_path = os.path.join(tmp, "completions.jsonl")
        with open(samples_path, "w", encoding="utf-8") as f:
            json.dump([json.loads(s) if isinstance(s, str) else s for s in samples], f)
        with open(completions_path, "w", encoding="utf-8") as f:
            for i, completion in enumerate(completions):
                f.write(json.dumps({"sample": i, "completion": _text(completion)}) + "\n")
        command = [
            os.environ.get("BTL_BIN", "btl"),
            "score",
            "--samples", samples_path,
            "--completions", completions_path,
            "--mode", os.environ.get("BTL_REWARD_MODE", "released"),
            "--weights", os.environ.get("BTL_REWARD_WEIGHTS", "0.1,0.3,0.6"),
            "--json",
        ]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"btl score exited with {run.returncode}: {run.stderr.strip()}")
    scores = [None] * len(completions)
    for line in run.stdout.splitlines():
        row = json.loads(line)
        if "summary" not in row:
            scores[row["sample"]] = row
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise RuntimeError(f"btl score gave no reward for completions {missing}")
    return scores


class _BtlTerm(ORM):
    """One term of the BTL reward; `btl_sample` is the dataset column."""

    term = "total"

    def __call__(self, completions, btl_sample, **kwargs):
        return [float(s[self.term]) for s in btl_score(completions, btl_sample)]


class BtlTotal(_BtlTerm):
    term = "total"


class BtlFormat(_BtlTerm):
    term = "format"


class BtlBlink(_BtlTerm):
    term = "blink"


class BtlLink(_BtlTerm):
    term = "link"


orms["btl"] = BtlTotal
orms["btl_format"] = BtlFormat
orms["btl_blink"] = BtlBlink
orms["btl_link"] = BtlLink
