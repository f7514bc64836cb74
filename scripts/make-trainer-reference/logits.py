"""Logits of a Hugging Face Qwen2.5-VL checkpoint for one prompt, in float32.

Used by host-trainer's `init` test: a checkpoint written by `btl-train init`
must load in transformers and give what host-trainer computes.

    python logits.py HF_DIR INPUT.safetensors OUT.safetensors

INPUT holds `input_ids` (1, n) int64 and optionally `pixel_values`
(patches, C*T*P*P) float32 with `image_grid_thw` (images, 3) int64; OUT gets
`logits` (n, vocab) float32.
"""

import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2_5_VLForConditionalGeneration


def main() -> None:
    hf_dir, inputs_path, out_path = sys.argv[1:4]
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        hf_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    inputs = load_file(inputs_path)
    ids = inputs["input_ids"]
    kwargs = dict(input_ids=ids, mm_token_type_ids=(ids == model.config.image_token_id).int())
    if "pixel_values" in inputs:
        kwargs.update(pixel_values=inputs["pixel_values"], image_grid_thw=inputs["image_grid_thw"])
    with torch.no_grad():
        logits = model(**kwargs).logits[0].float().contiguous()
    save_file({"logits": logits}, out_path)


if __name__ == "__main__":
    main()
