#!/usr/bin/env python3
"""Golden references for host-trainer's Qwen2.5-VL, computed by transformers.

Reads the tiny random Qwen2.5-VL checkpoint that scripts/make-tiny-model builds
(its HF scratch dir), and writes under host-trainer/tests/data/:

  tiny-qwen25vl-hf/   the checkpoint host-trainer's tests load: config.json (transformers 5
                      style, as saved), config-4x.json (the same model in the transformers 4.x
                      flat style) and model.safetensors with the weights rounded to float16
                      (half the size; every golden below is computed from these rounded weights)
  reference.safetensors, reference.json
                      the cases below, each under its own prefix.

Cases (the Rust test that reads each names the function here):
  case_images       pixel_values + image_grid_thw of two images from the PIL image processor,
                    and the vision tower's output for each alone and both together (float32)
  case_positions    get_rope_index positions for the BTL prompt and for a two-image prompt
  case_logits       logits of the image + BTL navigation prompt (float32): rows at chosen
                    positions, and every position's logsumexp and argmax; greedy ids from
                    generate() (KV cache)
  case_batch        a batch of two sequences with one image each: last-position logits
  case_grpo         float64: a GRPO-style loss (token log-probs × advantages) over two
                    completions of the image prompt, its value, the token log-probs, the
                    gradients of a few parameters and the gradient norm of every parameter
  case_grpo_lora    float64: the GRPO loss with a PEFT LoRA adapter on the text model (clipped
                    ratio, KL to the adapter-free model, masked completions of unequal length),
                    the adapter's values and the gradient of each LoRA matrix; PEFT's saved key
                    layout and adapter_config.json; float32 greedy ids of the merged model
  case_sft          float64: supervised fine-tuning's masked cross-entropy over two canonical BTL
                    answers after the image prompt, per-token log-probs and gradients
  case_grpo_lora_bf16
                    the same GRPO loss in mixed precision: bfloat16 base weights, float32
                    adapters, forward passes under torch.autocast(bfloat16); log-probs, loss and
                    LoRA gradients. Not committed: `--bf16-only` computes it on the machine that
                    runs the test (see bf16_only)

float64 in transformers: its RMSNorm and vision rotary cast "to float32" (meant as an upcast
for half precision), which in a float64 model is a downcast. The script patches those two to
compute in float64 for case_grpo and case_grpo_lora, as host-trainer does (`compute_kind`).
Everything else runs unpatched (for float32 the patched code does the same operations).

Determinism: seeded, one thread, deterministic algorithms. Run through `run` beside this file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

FORMAT = "btl-trainer-reference/1"
REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny-qwen25vl"

# Image A: the tiny fixture's 224×448 screenshot, shrunk by max_pixels to 84×168
# (grid 12×6 → 6×3 merged tokens: two window rows, the second padded).
# Image B: a 40×30 drawing, grown by min_pixels to 84×56 (grid 4×6, one padded window).
IMAGE_A_MAX_PIXELS = 28 * 28 * 18
IMAGE_B_MIN_PIXELS = 56 * 56
N_GREEDY = 16
GRPO_COMPLETION = 8
GRPO_ADVANTAGES = [1.0, -0.5]
GRPO_SEED = 7
GRPO_LORA_SEED = 11
GRPO_LORA_LENGTHS = [8, 5, 8, 3]
GRPO_LORA_REWARDS = [1.0, 0.2, 0.5, 0.5]
GRPO_LORA_BETA = 0.04
GRPO_LORA_EPSILON = 0.2
LORA_R = 4
LORA_ALPHA = 8
LORA_INIT_STD = 0.1
# The seven projections of every text decoder layer, by full module name: the vision blocks'
# MLPs are also called gate_proj/up_proj/down_proj, so suffixes alone would adapt them too.
LORA_TARGET_MODULES = r"model\.language_model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"
LORA_TARGET_SUFFIXES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# adapter_config.json records the base model's path; the loader's temp dir would make it vary.
LORA_BASE_MODEL_NAME = "tiny-qwen25vl-hf"
# Parameters whose whole gradient is stored (small ones from every block family).
GRADIENT_PARAMS = [
    "visual.blocks.0.attn.qkv.bias",
    "visual.blocks.1.norm2.weight",
    "visual.blocks.2.attn.proj.weight",
    "visual.blocks.3.mlp.down_proj.bias",
    "visual.merger.ln_q.weight",
    "visual.merger.mlp.2.bias",
    "model.layers.0.self_attn.q_proj.bias",
    "model.layers.1.self_attn.k_proj.bias",
    "model.layers.1.self_attn.o_proj.weight",
    "model.layers.1.input_layernorm.weight",
    "model.norm.weight",
]


def checkpoint_name(module_name: str) -> str:
    """transformers 5 module names → the names in checkpoint files."""
    if module_name.startswith("model.language_model."):
        return "model." + module_name[len("model.language_model."):]
    if module_name.startswith("model.visual."):
        return "visual." + module_name[len("model.visual."):]
    return module_name


def dump_json(obj) -> str:
    """Sorted, indented JSON with every list of numbers on one line."""

    def enc(x, level):
        pad, inner = " " * level, " " * (level + 1)
        if isinstance(x, dict):
            if not x:
                return "{}"
            items = [f"{inner}{json.dumps(k)}: {enc(x[k], level + 1)}" for k in sorted(x)]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(x, list) and any(isinstance(e, (dict, list)) for e in x):
            return "[\n" + ",\n".join(inner + enc(e, level + 1) for e in x) + "\n" + pad + "]"
        return json.dumps(x)

    return enc(obj, 0) + "\n"


def make_image_b():
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (40, 30), (250, 240, 230))
    d = ImageDraw.Draw(img)
    for x in range(40):
        d.line([(x, 0), (x, 9)], fill=(6 * x, 255 - 6 * x, 128))
    d.ellipse([4, 12, 20, 28], fill=(200, 30, 60))
    d.rectangle([24, 14, 37, 26], outline=(20, 20, 120), width=2)
    return img


def flatten_4x(config: dict) -> dict:
    """The transformers 4.x layout of a 5.x Qwen2.5-VL config.json."""
    text = dict(config["text_config"])
    rope = text.pop("rope_parameters")
    flat = {k: v for k, v in config.items() if k != "text_config"}
    for key in ("model_type", "layer_types", "dtype"):
        text.pop(key, None)
    flat.update(text)
    flat["rope_theta"] = rope["rope_theta"]
    flat["rope_scaling"] = {"type": "mrope", "mrope_section": rope["mrope_section"]}
    vision = dict(flat["vision_config"])
    vision["in_chans"] = vision.pop("in_channels")
    vision.pop("rope_parameters", None)
    flat["vision_config"] = vision
    flat["torch_dtype"] = "float16"
    flat["transformers_version"] = "4.50.0"
    flat.pop("dtype", None)
    return flat


def patch_float64(module) -> None:
    """RMSNorm and the vision rotary in max(dtype, float32) instead of float32."""
    import torch

    def wide(dtype):
        return torch.float64 if dtype == torch.float64 else torch.float32

    def rms_forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        h = hidden_states.to(wide(input_dtype))
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * h.to(input_dtype)

    def rotary_vision(q, k, cos, sin):
        dt = wide(q.dtype)
        qw, kw = q.to(dt), k.to(dt)
        cos, sin = cos.unsqueeze(-2).to(dt), sin.unsqueeze(-2).to(dt)
        q_embed = qw * cos + module.rotate_half(qw) * sin
        k_embed = kw * cos + module.rotate_half(kw) * sin
        return q_embed.to(q.dtype), k_embed.to(k.dtype)

    module.Qwen2_5_VLRMSNorm.forward = rms_forward
    module.apply_rotary_pos_emb_vision = rotary_vision


def lora_config():
    """The adapter of case_grpo_lora (a fresh object: PEFT fills in fields of the one it is given)."""
    from peft import LoraConfig

    return LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.0, bias="none",
                      target_modules=LORA_TARGET_MODULES)


def lora_modules(peft_model) -> dict:
    """Checkpoint-style module name → PEFT's LoRA layer, in model order."""
    from peft.tuners.lora import LoraLayer

    prefix = "base_model.model."
    return {checkpoint_name(name[len(prefix):]): module for name, module in peft_model.named_modules()
            if isinstance(module, LoraLayer)}


def grpo_lora_terms(logp, old_logp, ref_logp, mask, adv, beta: float, epsilon: float):
    """Per-token KL and the masked GRPO loss of case_grpo_lora; returns (kl, loss)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    surrogate = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * a)
    kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
    tok = surrogate + beta * kl
    loss = ((tok * mask).sum(-1) / mask.sum(-1)).mean()
    return kl, loss


def case_grpo_lora(load, tok, prompt: list[int], grid: list[int], pixel_values, n_text: int,
                   text_prompt_ids: list[int], image_id: int, tensors: dict, meta: dict) -> None:
    """GRPO with a PEFT LoRA adapter (float64, RMSNorm and vision rotary patched as for case_grpo).

    Model: the rounded checkpoint in float64, wrapped by `peft.get_peft_model` with
    `LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", target_modules=LORA_TARGET_MODULES)`.
    PEFT matches a string target with `re.fullmatch` on module names, so the adapter sits on the
    7 projections q/k/v/o_proj, gate/up/down_proj of each text layer (14 modules) and on nothing
    of the vision tower. An adapted linear computes `W x + b + (alpha / r) * B (A x)`, scale 2.

    Adapter values: a `torch.Generator` seeded `GRPO_LORA_SEED + 1` draws, module by module in model
    order (layer 0 q, k, v, o, gate, up, down, then layer 1) and A before B,
    `torch.randn(shape, dtype=float32) * 0.1` in float32, cast to float64 (so every value is exact
    in float32). A is (r, in), B is (out, r); B is non-zero, so the policy differs from the
    reference. Stored as `grpo_lora.lora.<module>.lora_A` / `.lora_B`, <module> named as in
    checkpoint files (`model.layers.0.self_attn.q_proj`).

    Batch: G = 4 rows, each the case_grpo prompt (image A + "Open Wi-Fi settings.", `prompt_len`
    tokens) followed by 8 completion ids: `torch.randint(0, n_bpe_tokens, (4, 8))` from a generator
    seeded `GRPO_LORA_SEED` (ordinary BPE ids, no added tokens). Row i has real length
    GRPO_LORA_LENGTHS[i] = [8, 5, 8, 3]; its later positions hold `<|endoftext|>` and have
    completion_mask 0. The padded rows go through the model whole, without an attention mask
    (under causal attention right padding leaves every real position unchanged).

    Loss, with p = prompt_len and rewards [1.0, 0.2, 0.5, 0.5]:
      adv      = (r - mean(r)) / (std(r) + 1e-4), std unbiased (N - 1), as torch.std
      logp     = log_softmax(logits[:, p-1:-1]).gather(completion ids), adapter enabled
      ref_logp = the same under `model.disable_adapter()` and no_grad
      old_logp = logp.detach()
      ratio    = exp(logp - old_logp)
      surr     = -min(ratio * adv, clamp(ratio, 1 - eps, 1 + eps) * adv), eps = 0.2
      kl       = exp(ref_logp - logp) - (ref_logp - logp) - 1
      tok      = surr + beta * kl, beta = 0.04
      loss     = mean over the 4 rows of sum_t(tok * mask) / sum_t(mask)
    Stored: `grpo_lora.loss` (1,), `grpo_lora.logp`, `.ref_logp`, `.kl` (4, 8) (entries where the
    mask is 0 are those of the pad tokens: no part of the loss), and the gradient of the loss
    w.r.t. every LoRA matrix, `grpo_lora.grad.<module>.lora_A` / `.lora_B`. Central finite
    differences on two entries check those gradients (asserted here, not stored).

    JSON `grpo_lora` also holds the keys PEFT's `save_pretrained` writes for this adapter
    (`get_peft_model_state_dict`, checked against the file it writes) and the adapter_config.json
    it writes (base_model_name_or_path set to LORA_BASE_MODEL_NAME).

    `grpo_lora.merged_greedy` (float32, unpatched operations): a float32 model with the same
    adapter values, merged by `merge_and_unload()`; `generate()` (KV cache) of 16 greedy tokens
    after the text prompt ids of tests/data/tiny-qwen25vl/reference.json (no image), with every
    step's top-1 margin.
    """
    import safetensors.torch
    import torch
    from peft import get_peft_model, get_peft_model_state_dict

    model = get_peft_model(load(torch.float64), lora_config())
    model.train()  # no dropout anywhere (lora_dropout 0); train() only as a trainer would call it
    modules = lora_modules(model)
    expected = [f"model.layers.{i}.{'mlp' if s.endswith(('gate_proj', 'up_proj', 'down_proj')) else 'self_attn'}.{s}"
                for i in range(model.config.text_config.num_hidden_layers) for s in LORA_TARGET_SUFFIXES]
    assert list(modules) == expected, list(modules)
    lora_rng = torch.Generator().manual_seed(GRPO_LORA_SEED + 1)
    with torch.no_grad():
        for name, module in modules.items():
            assert module.scaling["default"] == LORA_ALPHA / LORA_R
            for part in ("lora_A", "lora_B"):
                weight = getattr(module, part)["default"].weight
                assert weight.dtype == torch.float64 and weight.requires_grad
                value = (torch.randn(weight.shape, generator=lora_rng, dtype=torch.float32) * LORA_INIT_STD).double()
                weight.copy_(value)
                tensors[f"grpo_lora.lora.{name}.{part}"] = value

    completion_rng = torch.Generator().manual_seed(GRPO_LORA_SEED)
    g, width = len(GRPO_LORA_LENGTHS), max(GRPO_LORA_LENGTHS)
    completions = torch.randint(0, n_text, (g, width), generator=completion_rng)
    mask = (torch.arange(width)[None, :] < torch.tensor(GRPO_LORA_LENGTHS)[:, None]).double()
    pad_id = tok.token_to_id("<|endoftext|>")
    completions = torch.where(mask.bool(), completions, torch.full_like(completions, pad_id))
    rows = [prompt + c.tolist() for c in completions]
    ids_t = torch.tensor(rows)
    p = len(prompt)
    inputs = dict(input_ids=ids_t, mm_token_type_ids=(ids_t == image_id).int(),
                  pixel_values=torch.cat([pixel_values] * g).double(), image_grid_thw=torch.tensor([grid] * g))

    def completion_logp():
        logits = model(**inputs).logits
        return torch.log_softmax(logits[:, p - 1:-1], dim=-1).gather(-1, ids_t[:, p:, None])[..., 0]

    rewards = torch.tensor(GRPO_LORA_REWARDS, dtype=torch.float64)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    with torch.no_grad(), model.disable_adapter():
        ref_logp = completion_logp()
    logp = completion_logp()
    old_logp = logp.detach()
    kl, loss = grpo_lora_terms(logp, old_logp, ref_logp, mask, adv, GRPO_LORA_BETA, GRPO_LORA_EPSILON)
    loss.backward()
    assert math.isfinite(loss.item())
    assert (logp.detach() - ref_logp).abs().max() > 1e-3, "the adapter barely changes the policy"
    tensors["grpo_lora.loss"] = loss.detach().reshape(1)
    tensors["grpo_lora.logp"] = logp.detach()
    tensors["grpo_lora.ref_logp"] = ref_logp
    tensors["grpo_lora.kl"] = kl.detach()
    for name, module in modules.items():
        for part in ("lora_A", "lora_B"):
            grad = getattr(module, part)["default"].weight.grad
            assert grad is not None and grad.abs().max() > 0, (name, part)
            tensors[f"grpo_lora.grad.{name}.{part}"] = grad.detach().clone()

    # The stored gradients against central differences of the same loss (old_logp held fixed,
    # as autograd treats it).
    def loss_now() -> float:
        with torch.no_grad():
            return grpo_lora_terms(completion_logp(), old_logp, ref_logp, mask, adv,
                                   GRPO_LORA_BETA, GRPO_LORA_EPSILON)[1].item()

    h = 1e-5
    for name, part, index in [("model.layers.0.self_attn.q_proj", "lora_B", (5, 1)),
                              ("model.layers.1.mlp.down_proj", "lora_A", (2, 17))]:
        weight = getattr(modules[name], part)["default"].weight
        original = weight[index].item()
        with torch.no_grad():
            weight[index] = original + h
            up = loss_now()
            weight[index] = original - h
            down = loss_now()
            weight[index] = original
        numeric, analytic = (up - down) / (2 * h), weight.grad[index].item()
        assert abs(numeric - analytic) <= 1e-6 * abs(analytic) and abs(analytic) > 1e-6, \
            (name, part, index, numeric, analytic)

    # What save_pretrained writes: its keys and adapter_config.json.
    model.peft_config["default"].base_model_name_or_path = LORA_BASE_MODEL_NAME
    # save_embedding_layers="auto" would look the base model up (no embedding is adapted here).
    state_keys = list(get_peft_model_state_dict(model, save_embedding_layers=False))
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, save_embedding_layers=False)
        saved_keys = list(safetensors.torch.load_file(str(Path(tmp) / "adapter_model.safetensors")))
        adapter_config = json.loads((Path(tmp) / "adapter_config.json").read_text())
    assert sorted(saved_keys) == sorted(state_keys), (saved_keys, state_keys)
    assert len(state_keys) == 2 * len(modules)

    # float32, merged: the same values are exact in float32.
    merged = get_peft_model(load(torch.float32), lora_config())
    with torch.no_grad():
        for name, module in lora_modules(merged).items():
            for part in ("lora_A", "lora_B"):
                getattr(module, part)["default"].weight.copy_(tensors[f"grpo_lora.lora.{name}.{part}"].float())
    text_t = torch.tensor([text_prompt_ids])
    text_inputs = dict(input_ids=text_t, mm_token_type_ids=torch.zeros_like(text_t, dtype=torch.int32))
    with torch.no_grad():
        adapter_logits = merged(**text_inputs).logits
        with merged.disable_adapter():
            base_logits = merged(**text_inputs).logits
    merged = merged.merge_and_unload().eval()
    with torch.no_grad():
        merged_logits = merged(**text_inputs).logits
        torch.testing.assert_close(merged_logits, adapter_logits, rtol=1e-4, atol=1e-4)
        assert not torch.equal(merged_logits.argmax(-1), base_logits.argmax(-1)), "merge indistinguishable"
        gen = merged.generate(**text_inputs, do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                              eos_token_id=None, pad_token_id=None, temperature=None, top_p=None, top_k=None,
                              output_logits=True, return_dict_in_generate=True)
    greedy = [int(x) for x in gen.sequences[0, len(text_prompt_ids):]]
    margins = [float(torch.topk(s[0], 2).values.diff().abs()) for s in gen.logits]
    assert len(greedy) == N_GREEDY and min(margins) > 1e-3, f"greedy top-1 margins too small to compare: {margins}"

    meta["grpo_lora"] = {
        "input_ids": rows, "prompt_len": p, "grid": grid, "pad_id": pad_id,
        "completion_lengths": GRPO_LORA_LENGTHS, "completion_mask": mask.int().tolist(),
        "rewards": GRPO_LORA_REWARDS, "advantages": adv.tolist(), "beta": GRPO_LORA_BETA,
        "epsilon": GRPO_LORA_EPSILON, "r": LORA_R, "alpha": LORA_ALPHA, "scale": LORA_ALPHA / LORA_R,
        "target_modules": LORA_TARGET_MODULES, "target_module_suffixes": LORA_TARGET_SUFFIXES,
        "lora_modules": list(modules), "init": "randn float32 * 0.1, as float64; A then B, module order",
        "loss": "mean over rows of sum_t(mask * (-min(ratio*A, clamp(ratio,1-eps,1+eps)*A) + beta*kl)) / "
                "sum_t(mask); ratio = exp(logp - logp.detach()); kl = exp(ref-logp) - (ref-logp) - 1",
        "peft_state_dict_keys": state_keys, "adapter_config": adapter_config,
        "patched_for_float64": ["Qwen2_5_VLRMSNorm.forward", "apply_rotary_pos_emb_vision"],
        "merged_greedy": {"dtype": "float32", "input_ids": text_prompt_ids, "greedy_ids": greedy,
                          "step_top1_margins": margins, "min_margin": min(margins)},
    }


def case_grpo_lora_bf16(load, tensors: dict, meta: dict) -> None:
    """case_grpo_lora in mixed precision, as a bf16 GRPO run computes it.

    Model: the committed checkpoint loaded in bfloat16 (sdpa attention; the float64 patches, still
    set, compute in float32 for it, as transformers' own code does),
    wrapped by `get_peft_model` with case_grpo_lora's config; PEFT keeps the adapters in float32
    (`autocast_adapter_dtype`), and they get case_grpo_lora's values. Every forward pass runs under
    `torch.autocast("cpu", dtype=torch.bfloat16)`; log-probs are `log_softmax` of the logits cast to
    float32, then float64, and the loss is case_grpo_lora's on the same batch, advantages and
    constants. Stored under `grpo_lora_bf16.`: `logp`, `ref_logp` (4, 8), `loss` (1,) and the
    float32 gradient of every LoRA matrix, `grad.<module>.lora_A` / `.lora_B`.
    """
    import torch
    from peft import get_peft_model

    c = meta["grpo_lora"]
    model = get_peft_model(load(torch.bfloat16), lora_config())
    model.train()
    modules = lora_modules(model)
    with torch.no_grad():
        for name, module in modules.items():
            for part in ("lora_A", "lora_B"):
                weight = getattr(module, part)["default"].weight
                assert weight.dtype == torch.float32, (name, part, weight.dtype)
                weight.copy_(tensors[f"grpo_lora.lora.{name}.{part}"].float())
    ids = torch.tensor(c["input_ids"])
    p = c["prompt_len"]
    mask = torch.tensor(c["completion_mask"], dtype=torch.float64)
    image_id = model.config.image_token_id
    pixel_values = tensors["images.a.pixel_values"].float()
    inputs = dict(input_ids=ids, mm_token_type_ids=(ids == image_id).int(),
                  pixel_values=torch.cat([pixel_values] * len(ids)), image_grid_thw=torch.tensor([c["grid"]] * len(ids)))

    def completion_logp():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(**inputs).logits
        assert logits.dtype == torch.bfloat16, logits.dtype
        return torch.log_softmax(logits[:, p - 1:-1].float(), dim=-1).gather(-1, ids[:, p:, None])[..., 0].double()

    rewards = torch.tensor(c["rewards"], dtype=torch.float64)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    with torch.no_grad(), model.disable_adapter():
        ref_logp = completion_logp()
    logp = completion_logp()
    _, loss = grpo_lora_terms(logp, logp.detach(), ref_logp, mask, adv, c["beta"], c["epsilon"])
    loss.backward()
    assert math.isfinite(loss.item())
    tensors["grpo_lora_bf16.logp"] = logp.detach()
    tensors["grpo_lora_bf16.ref_logp"] = ref_logp
    tensors["grpo_lora_bf16.loss"] = loss.detach().reshape(1)
    for name, module in modules.items():
        for part in ("lora_A", "lora_B"):
            grad = getattr(module, part)["default"].weight.grad
            assert grad is not None and grad.dtype == torch.float32, (name, part)
            tensors[f"grpo_lora_bf16.grad.{name}.{part}"] = grad.detach().clone()
    meta["grpo_lora_bf16"] = {"autocast": {"device_type": "cpu", "dtype": "bfloat16"},
                              "base_weights": "bfloat16", "adapters": "float32", "attn_implementation": "sdpa",
                              "log_probs": "log_softmax(logits.float()), as float64"}


SFT_ANSWERS = [
    '<blink>```json\n[{"bbox_2d": [10, 60, 214, 92], "label": "Wi-Fi"}]\n```</blink>\n<think>Open the Wi-Fi '
    'row.</think>\n<link>```json\n[{"Plan": "Open the Wi-Fi row.", "Action": {"function": "Tap", '
    '"point_2d": [112, 76]}}]\n```</link><|im_end|>',
    '<blink>```json\n[]\n```</blink>\n<think>Go back.</think>\n<link>```json\n[{"Plan": "Go back.", '
    '"Action": {"function": "Back"}}]\n```</link><|im_end|>',
]


def case_sft(load, tok, tensors: dict, meta: dict) -> None:
    """Supervised fine-tuning's masked cross-entropy (float64, RMSNorm and vision rotary patched as
    for case_grpo).

    Batch: two rows, each case_grpo_lora's prompt (image A + "Open Wi-Fi settings.", chat format up
    to "<|im_start|>assistant\n") followed by one of SFT_ANSWERS tokenized with the tiny tokenizer
    (canonical BTL answers ending in <|im_end|>; the second has an empty blink), the shorter right-
    padded with <|endoftext|>. Labels are -100 on every prompt position (image tokens included) and
    on the padding, the ids elsewhere.

    Loss: transformers' causal-LM loss (`ForCausalLMLoss`: logits shifted by one, cross-entropy
    with ignore_index -100, mean over every non-ignored token of the batch), written out here in
    float64 because transformers' own function casts the logits to float32 first; the script checks
    that `model(..., labels=labels).loss` agrees to float32 precision. Stored under `sft.`: `loss`
    (1,), `token_logp` (rows, answer length: log p of each answer token, 0 on padding) and the
    gradient of every GRADIENT_PARAMS entry (`grad.<name>`).
    """
    import torch

    c = meta["grpo_lora"]
    prompt = c["input_ids"][0][:c["prompt_len"]]
    answers = [tok.encode(a, add_special_tokens=False).ids for a in SFT_ANSWERS]
    pad = tok.token_to_id("<|endoftext|>")
    width = max(map(len, answers))
    ids = torch.tensor([prompt + a + [pad] * (width - len(a)) for a in answers])
    labels = ids.clone()
    labels[:, :len(prompt)] = -100
    for row, a in enumerate(answers):
        labels[row, len(prompt) + len(a):] = -100
    model = load(torch.float64)
    model.train()
    image_id = model.config.image_token_id
    pixel_values = tensors["images.a.pixel_values"].double()
    out = model(input_ids=ids, mm_token_type_ids=(ids == image_id).int(),
                pixel_values=torch.cat([pixel_values] * len(ids)),
                image_grid_thw=torch.tensor([c["grid"]] * len(ids)), labels=labels)
    logits = out.logits
    assert logits.dtype == torch.float64
    shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(shift_logits.reshape(-1, shift_logits.shape[-1]),
                                             shift_labels.reshape(-1), ignore_index=-100, reduction="mean")
    assert abs(loss.item() - out.loss.item()) <= 1e-5 * abs(loss.item()), (loss.item(), out.loss.item())
    logp = torch.log_softmax(shift_logits, dim=-1)
    p = len(prompt)
    answer_logp = logp[:, p - 1:].gather(-1, ids[:, p:, None].clamp(min=0))[..., 0]
    answer_mask = (labels[:, p:] != -100).double()
    loss.backward()
    named = {checkpoint_name(k): v for k, v in model.named_parameters()}
    for name in GRADIENT_PARAMS:
        tensors[f"sft.grad.{name}"] = named[name].grad.detach().clone()
    tensors["sft.loss"] = loss.detach().reshape(1)
    tensors["sft.token_logp"] = (answer_logp * answer_mask).detach()
    meta["sft"] = {"input_ids": ids.tolist(), "prompt_len": p, "grid": c["grid"],
                   "answer_lengths": [len(a) for a in answers], "answers": SFT_ANSWERS,
                   "loss": "mean over the batch's answer tokens of -log p(token | everything before it)",
                   "gradient_params": GRADIENT_PARAMS,
                   "patched_for_float64": ["Qwen2_5_VLRMSNorm.forward", "apply_rotary_pos_emb_vision"]}
    assert math.isfinite(loss.item())
    del model


def add_case(golden: Path, name: str) -> None:
    """Computes one case from the committed checkpoint and golden files in `golden` and adds it to
    them, every other entry unchanged (a new case without regenerating the rest)."""
    import safetensors.torch
    import torch
    from safetensors import safe_open
    from tokenizers import Tokenizer
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

    torch.manual_seed(GRPO_SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    path = golden / "reference.safetensors"
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    tensors = safetensors.torch.load_file(str(path))
    meta = json.loads((golden / "reference.json").read_text())
    patch_float64(modeling_qwen2_5_vl)
    ckpt = golden / "tiny-qwen25vl-hf"
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    cases = {"sft": lambda: case_sft(lambda dtype: load_checkpoint(ckpt, dtype), tok, tensors, meta)}
    cases[name]()
    safetensors.torch.save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(path),
                                metadata=metadata)
    (golden / "reference.json").write_text(dump_json(meta))


def load_checkpoint(ckpt: Path, dtype, config_file: str = "config.json"):
    """The committed checkpoint in `dtype` (sdpa attention), from `config_file` as its config."""
    from transformers import Qwen2_5_VLForConditionalGeneration

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ckpt / "model.safetensors", tmp)
        shutil.copy(ckpt / config_file, Path(tmp) / "config.json")
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(tmp, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def bf16_only(golden: Path, out: Path) -> None:
    """case_grpo_lora_bf16 alone, from the committed checkpoint and golden files in `golden`.

    bfloat16 kernels round differently from one CPU to the next (oneDNN's native bf16 dot products
    on CPUs that have them, ATen's float-accumulating loops elsewhere, vector widths chosen at run
    time), so this case is not committed: host-trainer's test runs this on the machine and in the
    environment it runs in, and compares with what it computes itself. The threads are left at
    torch's default, which is also libtorch's in the test process.
    """
    import safetensors.torch
    import torch
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

    torch.manual_seed(GRPO_SEED)
    tensors = safetensors.torch.load_file(str(golden / "reference.safetensors"))
    meta = json.loads((golden / "reference.json").read_text())
    # The committed case was made after case_grpo's float64 patches; for bfloat16 they compute
    # in float32, as transformers' own code does.
    patch_float64(modeling_qwen2_5_vl)
    ckpt = golden / "tiny-qwen25vl-hf"
    before = set(tensors)
    case_grpo_lora_bf16(lambda dtype: load_checkpoint(ckpt, dtype), tensors, meta)
    case = {k: v.contiguous() for k, v in tensors.items() if k not in before}
    versions = {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                "threads": str(torch.get_num_threads())}
    safetensors.torch.save_file(case, str(out), metadata={"format": FORMAT, **versions})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf-dir", help="tiny HF checkpoint from scripts/make-tiny-model")
    ap.add_argument("--out", required=True, help="host-trainer/tests/data (with --bf16-only: the file to write)")
    ap.add_argument("--bf16-only", metavar="GOLDEN_DIR",
                    help="compute case_grpo_lora_bf16 alone from the committed files in GOLDEN_DIR")
    ap.add_argument("--add-case", choices=["sft"],
                    help="compute this case alone and add it to the committed files in --out")
    args = ap.parse_args()
    if args.add_case:
        add_case(Path(args.out), args.add_case)
        return
    if args.bf16_only:
        bf16_only(Path(args.bf16_only), Path(args.out))
        return
    if not args.hf_dir:
        ap.error("--hf-dir is required (except with --bf16-only)")

    import numpy as np
    import peft
    import safetensors.torch
    import torch
    import transformers
    from PIL import Image
    from tokenizers import Tokenizer
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    torch.manual_seed(GRPO_SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    hf = Path(args.hf_dir)
    out = Path(args.out)
    ckpt = out / "tiny-qwen25vl-hf"
    if ckpt.exists():
        shutil.rmtree(ckpt)
    ckpt.mkdir(parents=True)

    # --- the committed checkpoint: float16 weights, 5.x and 4.x configs -------------------
    source = safetensors.torch.load_file(str(hf / "model.safetensors"))
    half = {k: v.to(torch.float16).contiguous() for k, v in sorted(source.items())}
    safetensors.torch.save_file(half, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((hf / "config.json").read_text())
    config["dtype"] = "float16"
    (ckpt / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (ckpt / "config-4x.json").write_text(json.dumps(flatten_4x(config), indent=2, sort_keys=True) + "\n")

    def load(dtype, config_file="config.json"):
        return load_checkpoint(ckpt, dtype, config_file)

    model = load(torch.float32)
    cfg = model.config
    image_id = cfg.image_token_id
    merge = cfg.vision_config.spatial_merge_size
    tensors: dict[str, torch.Tensor] = {}
    meta: dict = {
        "format": FORMAT,
        "generator": "scripts/make-trainer-reference/make_reference.py",
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
            "peft": peft.__version__,
        },
    }

    # The 4.x config must describe the same model: transformers gives identical logits.
    legacy = load(torch.float32, "config-4x.json")
    probe = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=probe).logits, legacy(input_ids=probe).logits)
    del legacy

    # --- case_images ---------------------------------------------------------------------
    improc_a = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=IMAGE_A_MAX_PIXELS, patch_size=14,
                                        temporal_patch_size=2, merge_size=2)
    improc_b = Qwen2VLImageProcessorPil(min_pixels=IMAGE_B_MIN_PIXELS, max_pixels=4014080, patch_size=14,
                                        temporal_patch_size=2, merge_size=2)
    image_a = Image.open(TINY / "test-screenshot.png").convert("RGB")
    px_a = improc_a(images=[image_a], return_tensors="pt")
    px_b = improc_b(images=[make_image_b()], return_tensors="pt")
    grid_a = [int(x) for x in px_a["image_grid_thw"][0]]
    grid_b = [int(x) for x in px_b["image_grid_thw"][0]]
    assert grid_a == [1, 12, 6] and grid_b == [1, 4, 6], (grid_a, grid_b)
    pv_a, pv_b = px_a["pixel_values"], px_b["pixel_values"]
    tensors["images.a.pixel_values"] = pv_a
    tensors["images.b.pixel_values"] = pv_b
    meta["images"] = {"a": {"grid_thw": grid_a, "source": "tests/data/tiny-qwen25vl/test-screenshot.png",
                            "max_pixels": IMAGE_A_MAX_PIXELS},
                      "b": {"grid_thw": grid_b, "source": "make_image_b()", "min_pixels": IMAGE_B_MIN_PIXELS}}
    with torch.no_grad():
        def vision(pv, grids):
            return model.model.visual(pv, grid_thw=torch.tensor(grids)).pooler_output
        tensors["images.a.embeds"] = vision(pv_a, [grid_a])
        tensors["images.b.embeds"] = vision(pv_b, [grid_b])
        tensors["images.ab.embeds"] = vision(torch.cat([pv_a, pv_b]), [grid_a, grid_b])

    # --- prompts -------------------------------------------------------------------------
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    reference = json.loads((TINY / "reference.json").read_text())
    btl_prompt = reference["cases"]["image"]["prompt_text"]

    def encode(text: str, grids: list[list[int]]) -> list[int]:
        for g in grids:
            assert "<|image_pad|>" in text
            n = g[0] * g[1] * g[2] // merge**2
            text = text.replace("<|image_pad|>", "<|IMAGE|>" * n, 1)
        text = text.replace("<|IMAGE|>", "<|image_pad|>")
        return tok.encode(text, add_special_tokens=False).ids

    def rope_index(ids: list[list[int]], grids: list[list[int]]):
        input_ids = torch.tensor(ids)
        return model.model.get_rope_index(
            input_ids, mm_token_type_ids=(input_ids == image_id).int(),
            image_grid_thw=torch.tensor(grids) if grids else None)

    # --- case_positions ------------------------------------------------------------------
    btl_ids = encode(btl_prompt, [grid_a])
    two_prompt = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Compare with "
                  "<|vision_start|><|image_pad|><|vision_end|> please.<|im_end|>\n<|im_start|>assistant\n")
    two_ids = encode(two_prompt, [grid_a, grid_b])
    pos_btl, delta_btl = rope_index([btl_ids], [grid_a])
    pos_two, delta_two = rope_index([two_ids], [grid_a, grid_b])
    meta["positions"] = {
        "btl": {"input_ids": btl_ids, "grids": [grid_a], "rows": pos_btl[:, 0].tolist(),
                "delta": int(delta_btl[0, 0])},
        "two_images": {"input_ids": two_ids, "grids": [grid_a, grid_b], "rows": pos_two[:, 0].tolist(),
                       "delta": int(delta_two[0, 0])},
    }

    # --- case_logits ---------------------------------------------------------------------
    ids_t = torch.tensor([btl_ids])
    inputs = dict(input_ids=ids_t, mm_token_type_ids=(ids_t == image_id).int(),
                  pixel_values=pv_a, image_grid_thw=torch.tensor([grid_a]))
    with torch.no_grad():
        logits = model(**inputs).logits[0]
    n = logits.shape[0]
    first_image = btl_ids.index(image_id)
    rows = sorted(set(list(range(0, n, 32)) + list(range(first_image - 1, first_image + 20)) + list(range(n - 8, n))))
    tensors["logits.rows"] = logits[rows].contiguous()
    tensors["logits.logsumexp"] = torch.logsumexp(logits, dim=-1)
    with torch.no_grad():
        gen = model.generate(**inputs, do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                             eos_token_id=None, pad_token_id=None, temperature=None, top_p=None, top_k=None,
                             output_logits=True, return_dict_in_generate=True)
    greedy = [int(x) for x in gen.sequences[0, n:]]
    margins = [float(torch.topk(s[0], 2).values.diff().abs()) for s in gen.logits]
    assert min(margins) > 1e-3, f"greedy top-1 margins too small to compare: {margins}"
    meta["logits"] = {"input_ids": btl_ids, "grid": grid_a, "rows": rows, "argmax": logits.argmax(-1).tolist(),
                      "greedy_ids": greedy, "greedy_min_margin": min(margins)}

    # --- case_batch ----------------------------------------------------------------------
    short = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Tap the search bar.<|im_end|>\n"
    seq_a = encode(short, [grid_a])
    seq_b = encode(short, [grid_b])
    filler = tok.encode(" the list view", add_special_tokens=False).ids
    while len(seq_b) < len(seq_a):
        seq_b = seq_b[:-1] + [filler[len(seq_b) % len(filler)]] + seq_b[-1:]
    assert len(seq_a) == len(seq_b)
    ids_t = torch.tensor([seq_a, seq_b])
    with torch.no_grad():
        logits = model(input_ids=ids_t, mm_token_type_ids=(ids_t == image_id).int(),
                       pixel_values=torch.cat([pv_a, pv_b]), image_grid_thw=torch.tensor([grid_a, grid_b])).logits
    tensors["batch.last_logits"] = logits[:, -1].contiguous()
    meta["batch"] = {"input_ids": [seq_a, seq_b], "grids": [grid_a, grid_b]}

    # --- case_grpo (float64) -------------------------------------------------------------
    del model
    patch_float64(modeling_qwen2_5_vl)
    model = load(torch.float64)
    model.train()  # no dropout in this model; train() only as a trainer would call it
    prompt = encode("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Open Wi-Fi settings."
                    "<|im_end|>\n<|im_start|>assistant\n", [grid_a])
    gen_rng = torch.Generator().manual_seed(GRPO_SEED)
    n_text = reference["tokenizer"]["n_bpe_tokens"]
    completions = torch.randint(0, n_text, (len(GRPO_ADVANTAGES), GRPO_COMPLETION), generator=gen_rng)
    seqs = [prompt + c.tolist() for c in completions]
    ids_t = torch.tensor(seqs)
    logits = model(input_ids=ids_t, mm_token_type_ids=(ids_t == image_id).int(),
                   pixel_values=torch.cat([pv_a, pv_a]).double(), image_grid_thw=torch.tensor([grid_a, grid_a])).logits
    p = len(prompt)
    logp = torch.log_softmax(logits[:, p - 1:-1], dim=-1).gather(-1, ids_t[:, p:, None])[..., 0]
    adv = torch.tensor(GRPO_ADVANTAGES, dtype=torch.float64)
    loss = -(adv[:, None] * logp).mean(-1).mean()
    loss.backward()
    named = {checkpoint_name(k): v for k, v in model.named_parameters()}
    for name in GRADIENT_PARAMS:
        tensors[f"grpo.grad.{name}"] = named[name].grad.detach().clone()
    tensors["grpo.logp"] = logp.detach()
    tensors["grpo.loss"] = loss.detach().reshape(1)
    norms = {name: named[name].grad.norm().item() for name in sorted(named)}
    assert all(v > 0 for v in norms.values()), [k for k, v in norms.items() if not v > 0]
    tensors["grpo.grad_norms"] = torch.tensor([norms[k] for k in sorted(norms)], dtype=torch.float64)
    meta["grpo"] = {"input_ids": seqs, "prompt_len": p, "grid": grid_a, "advantages": GRPO_ADVANTAGES,
                    "loss": "-(mean over sequences of advantage × mean over completion tokens of log p)",
                    "grad_norm_names": sorted(norms), "gradient_params": GRADIENT_PARAMS,
                    "patched_for_float64": ["Qwen2_5_VLRMSNorm.forward", "apply_rotary_pos_emb_vision"]}
    assert math.isfinite(loss.item())
    del model

    # --- case_grpo_lora (float64; merged greedy in float32) ----------------------------------
    case_grpo_lora(load, tok, prompt, grid_a, pv_a, n_text, reference["cases"]["text"]["prompt_ids"], image_id,
                   tensors, meta)
    case_sft(load, tok, tensors, meta)

    safetensors.torch.save_file({k: v.contiguous() for k, v in sorted(tensors.items())},
                                str(out / "reference.safetensors"), metadata={"format": FORMAT})
    (out / "reference.json").write_text(dump_json(meta))
    print(f"wrote {ckpt} and {out / 'reference.safetensors'}, {out / 'reference.json'}")


if __name__ == "__main__":
    main()
