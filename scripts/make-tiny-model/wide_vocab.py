"""Widens a text GGUF's vocabulary to Qwen2.5-VL's 151,936 entries without
changing what the model does: for measuring what a vocabulary of Qwen's
size costs where every entry is looked at (the BTL grammar's check of each
candidate token).

The new entries are word-like byte-level pieces (concatenations of the
model's own tokens, as BPE merges make them), appended after the existing
ids, with no merges, so the tokenizer never produces them and every prompt
tokenizes as before. Their rows of the embedding and of the output matrix
are zero: a logit of 0, below what a trained model gives the token it
means, so greedy decoding picks the original model's tokens while the
sampler and the grammar see all 151,936 candidates.

Usage: python wide_vocab.py IN.gguf OUT.gguf [VOCAB] (seeded, byte-reproducible).
"""

import random
import sys

import numpy as np
from gguf import GGUFReader
from gguf_copy import copy_metadata, write

QWEN_VOCAB = 151936
SEED = 2
WIDENED = ("token_embd.weight", "output.weight")


def new_pieces(tokens: list[str], count: int) -> list[str]:
    """`count` pieces not among `tokens`, each the concatenation of two
    word-like tokens (letters, optionally after the byte-level space Ġ)."""
    rng = random.Random(SEED)
    wordy = [t for t in tokens if t.lstrip("Ġ").isalpha()]
    tails = [t for t in wordy if not t.startswith("Ġ")]
    seen = set(tokens)
    pieces = []
    while len(pieces) < count:
        piece = rng.choice(wordy) + rng.choice(tails)
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    return pieces


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    vocab = int(sys.argv[3]) if len(sys.argv) > 3 else QWEN_VOCAB
    fields = GGUFReader(src).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    added = vocab - len(tokens)
    if added <= 0:
        sys.exit(f"{src} already has {len(tokens)} tokens, not fewer than {vocab}")
    # Token type 1: a normal token.
    reader, writer = copy_metadata(src, dst, {
        "tokenizer.ggml.tokens": tokens + new_pieces(tokens, added),
        "tokenizer.ggml.token_type": types + [1] * added,
    })
    for t in reader.tensors:
        data = np.array(t.data)
        if t.name in WIDENED:
            # Zero bytes are zero rows in every GGML type (f32, f16, and
            # q8_0's scale-and-values blocks alike).
            data = np.concatenate([data, np.zeros((added, data.shape[1]), dtype=data.dtype)])
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    write(writer)


if __name__ == "__main__":
    main()
