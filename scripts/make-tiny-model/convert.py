#!/usr/bin/env python3
"""Run llama.cpp's convert_hf_to_gguf.py with one fix for freshly trained tokenizers.

usage: convert.py CONVERTER_DIR -- <convert_hf_to_gguf.py arguments>

CONVERTER_DIR holds convert_hf_to_gguf.py, conversion/ and gguf-py/ from the
llama-cpp-python sdist (vendor/llama.cpp); the `run` script unpacks them into the
cache. Nothing of the converter is part of this repository.

The fix: the converter identifies a BPE pre-tokenizer by hashing the ids of a probe
string. Every newly trained vocabulary has a hash the converter has never seen, so
it refuses with "BPE pre-tokenizer was not recognized". Our tokenizer uses exactly
Qwen2's pre-tokenizer (NFC, Split on the Qwen2 regex, ByteLevel), so an unknown hash
is mapped to "qwen2" after checking that pipeline in tokenizer.json. Any other
tokenizer still fails as before.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path


def _is_qwen2_pipeline(tokenizer_json: Path) -> bool:
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tj = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    if tj.get("model", {}).get("type") != "BPE" or tj.get("normalizer", {}).get("type") != "NFC":
        return False
    pre = tj.get("pre_tokenizer") or {}
    seq = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not seq or len(seq) != 2:
        return False
    split, byte_level = seq
    return (
        split.get("type") == "Split"
        and split.get("pattern", {}).get("Regex") == PRETOKENIZE_REGEX
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and byte_level.get("type") == "ByteLevel"
        and not byte_level.get("add_prefix_space")
        and not byte_level.get("use_regex")
    )


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    conv_dir = Path(sys.argv[1]).resolve()
    conv_args = sys.argv[3:]
    sys.path.insert(0, str(conv_dir))
    import convert_hf_to_gguf  # noqa: E402  (puts conv_dir/gguf-py on sys.path itself)
    from conversion import base  # noqa: E402

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        level = base.logger.level
        base.logger.setLevel(logging.ERROR)  # hide the converter's "not recognized" banner
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            if not _is_qwen2_pipeline(Path(self.dir_model) / "tokenizer.json"):
                raise
            base.logger.setLevel(level)
            base.logger.warning("convert.py: unknown BPE hash, tokenizer.json has the Qwen2 pipeline -> 'qwen2'")
            return "qwen2"
        finally:
            base.logger.setLevel(level)

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [str(conv_dir / "convert_hf_to_gguf.py"), *conv_args]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
