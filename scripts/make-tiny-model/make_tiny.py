#!/usr/bin/env python3
"""Build the tiny random Qwen2.5-VL test fixture and its transformers reference.

Two steps (the `run` script calls both, with llama.cpp's converter in between):

  build     trains the tokenizer, builds the model, saves the HF checkpoint to a
            scratch dir, writes the test screenshot, tokenizer.json, a seeded PEFT
            LoRA adapter (lora/) and the transformers reference, without and with
            the adapter (reference.partial.json in the scratch dir).
  finalize  reads the GGUFs written by the converter, records their metadata and
            the sha256 of every fixture file into reference.json, writes README.md.

Everything is seeded; with the pinned requirements the outputs are byte-identical
from run to run. Nothing here downloads anything.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import random
import shutil
import sys
from pathlib import Path

# Determinism knobs that must be set before torch / tokenizers are imported.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

SEED = 1509        # corpus, tokenizer (arXiv 2509.15566)
MODEL_SEED = 55    # weights: picked from seeds 1..60 so that neither case generates an added token
                   # and the smallest top-1 margin over both cases is largest (0.055)
LORA_SEED = 121    # adapter weights: picked from seeds 1..199 so that neither case generates an added token,
                   # the text case's first token already differs from the base model's, and the smallest
                   # top-1 margin over both cases is largest (0.058)
MODEL_NAME = "tiny-qwen25vl"
FORMAT = "btl-tiny-qwen25vl-reference/1"

# Fixture file names (the `run` script uses the same names).
F_TEXT_F16 = f"{MODEL_NAME}-f16.gguf"
F_TEXT_Q8 = f"{MODEL_NAME}-q8_0.gguf"
F_MMPROJ_F16 = f"mmproj-{MODEL_NAME}-f16.gguf"
F_MMPROJ_MISMATCHED = "mmproj-mismatched-f16.gguf"
F_IMAGE = "test-screenshot.png"
F_TOKENIZER = "tokenizer.json"
F_REFERENCE = "reference.json"
F_README = "README.md"
D_LORA = "lora"                                   # the PEFT adapter as save_pretrained writes it
F_LORA_CONFIG = f"{D_LORA}/adapter_config.json"
F_LORA_WEIGHTS = f"{D_LORA}/adapter_model.safetensors"
F_LORA_F32 = f"{MODEL_NAME}-lora-f32.gguf"         # convert_lora_to_gguf.py of lora/
F_LORA_MISMATCHED = "lora-mismatched-f32.gguf"    # mismatch_lora.py: an adapter of a 96-wide model
FIXTURE_FILES = [F_TEXT_F16, F_TEXT_Q8, F_MMPROJ_F16, F_MMPROJ_MISMATCHED, F_IMAGE, F_TOKENIZER,
                 F_LORA_CONFIG, F_LORA_WEIGHTS, F_LORA_F32, F_LORA_MISMATCHED]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tests" / "data" / "btl-ui-examples"
COMPLETIONS = REPO / "tests" / "data" / "navigation-completions.jsonl"

# ---------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------
BPE_VOCAB = 2000          # target size of the trained BPE part (256 byte symbols included)
VOCAB_PAD_TO = 128        # config vocab_size = len(tokenizer) rounded up to this (real Qwen pads too)
N_NEW_TOKENS = 32         # greedy tokens recorded per case
TOPK = 10

IMAGE_W, IMAGE_H = 224, 448   # portrait "phone screenshot", multiples of 28: no resize
MIN_PIXELS = 56 * 56          # 3136, smart_resize min_pixels (Qwen default, spec §3)
MAX_PIXELS = 4014080          # BTL-UI training max_pixels (spec §3)

TEXT = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,          # GQA, head_dim 32
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    mrope_section=[4, 6, 6],        # sums to head_dim / 2 = 16
    max_position_embeddings=4096,
)
VISION = dict(
    depth=4,
    hidden_size=64,
    intermediate_size=128,
    num_heads=2,                    # head_dim 32
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
    window_size=112,
    fullatt_block_indexes=[1, 3],   # blocks 0, 2 windowed; 1, 3 full (llama.cpp: n_wa_pattern 2)
    out_hidden_size=128,            # = text hidden_size
    hidden_act="silu",
    in_channels=3,
    tokens_per_second=2,
)
# The LoRA adapter: the text model's attention and MLP projections only (a plain list of
# names would also catch the vision blocks' gate/up/down_proj). PEFT full-matches the regex.
LORA = dict(
    r=4,
    lora_alpha=8,
    lora_dropout=0.0,
    target_modules=r"model\.language_model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)",
)
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_STD = 0.1        # A and B ~ N(0, LORA_STD^2); B is non-zero (PEFT starts it at 0, a no-op)
INIT_STD = 0.3        # larger than HF's 0.02 so a random model does not just repeat one token
NORM_JITTER = 0.1     # RMSNorm weights = 1 + NORM_JITTER * N(0, 1)
BIAS_STD = 0.02

# Qwen2.5-VL's added tokens, in Qwen's order (ids follow the trained vocab).
# (content, special)
QWEN_ADDED_TOKENS = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
]

# The Qwen2-VL / Qwen2.5-VL chat template (as shipped in the Qwen2.5-VL-*-Instruct repos).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TEXT_CASE_MESSAGES = [
    {"role": "user", "content": "Open the Settings app and turn on Wi-Fi. Which button should I tap first?"},
]


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def f32_str(v: float) -> str:
    """Shortest decimal that round-trips the float32 value."""
    import numpy as np

    return np.format_float_positional(np.float32(v), unique=True, trim="-")


class Raw(str):
    """A pre-formatted JSON number."""


def dump_json(obj, indent: int = 1) -> str:
    """Deterministic JSON: objects indented, lists of scalars on one line."""

    def scalar(x):
        if isinstance(x, Raw):
            return str(x)
        return json.dumps(x, ensure_ascii=False)

    def enc(x, level):
        pad = " " * (indent * level)
        pad_in = " " * (indent * (level + 1))
        if isinstance(x, dict):
            if not x:
                return "{}"
            items = [f"{pad_in}{json.dumps(str(k), ensure_ascii=False)}: {enc(v, level + 1)}" for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(x, (list, tuple)):
            if all(not isinstance(e, (dict, list, tuple)) for e in x):
                return "[" + ", ".join(scalar(e) for e in x) + "]"
            return "[\n" + ",\n".join(pad_in + enc(e, level + 1) for e in x) + "\n" + pad + "]"
        return scalar(x)

    return enc(obj, 0) + "\n"


def load_examples() -> dict:
    nav = json.loads((EXAMPLES / "navigation_meta_format.json").read_text(encoding="utf-8"))[0]
    grd = json.loads((EXAMPLES / "grounding_meta_format.json").read_text(encoding="utf-8"))[0]
    return {"navigation": nav, "grounding": grd}


# ---------------------------------------------------------------------------
# Corpus and tokenizer
# ---------------------------------------------------------------------------
APPS = ["Mapillary", "Weather & Radar", "Tumblr", "Settings", "Chrome", "Gmail", "Maps", "Calendar", "Clock",
        "Camera", "Photos", "Spotify", "YouTube", "Amazon Shopping", "Booking.com", "Expedia", "Contacts",
        "Messages", "Files", "Play Store", "Reddit", "Twitter", "Instagram", "WhatsApp", "Zoom", "Notes",
        "Calculator", "Keep Notes", "Drive", "Slack", "Airbnb", "Uber", "Yelp", "Duolingo", "PowerPoint"]
ELEMENTS = ["search bar", "search icon", "home icon", "back arrow", "menu button", "settings icon", "Save button",
            "OK button", "Cancel button", "Next button", "Submit button", "text field", "send button", "profile tab",
            "toggle switch", "checkbox", "dropdown menu", "app icon", "share button", "Start capturing button",
            "magnifying glass icon", "first result", "Los Angeles result", "Wi-Fi toggle", "Bluetooth switch",
            "notification bell", "Add to cart button", "play button", "close button", "keyboard", "list item",
            "Slide Notes", "Sign in button", "Allow button", "Done button", "calendar date", "weekend forecast"]
PLACES = ["Los Angeles", "New York", "San Francisco", "Paris", "Tokyo", "Berlin", "London", "Seattle", "Chicago",
          "Mt Hollywood Hiking Trl", "Boston", "Madrid", "Sydney", "Toronto", "Austin"]
THINGS = ["hiking trail", "weather forecast", "coffee shop", "flight to Paris", "hotel near the beach",
          "running shoes", "birthday party", "meeting notes", "photo album", "playlist", "alarm for 7 am",
          "dark mode", "battery saver", "grocery list", "train tickets", "pizza place", "new contact"]
PEOPLE = ["katsunaksu", "Alice", "Bob", "Maria", "John Smith", "Wei", "Priya", "Lucas", "Emma"]
VERBS = ["Tap", "Click", "Open", "Select", "Press", "Choose", "Scroll", "Swipe", "Type", "Enter", "Go back",
         "Return", "Search for", "Check", "Navigate to", "Launch", "Close", "Long press"]
FILLER = ("the a to of and on in for is it this that with as at by from screen app button page list "
          "then next first current user task action element observe layout reasoning answer tap search "
          "open icon text view menu home back swipe type input position specified previous navigate "
          "longpress located shows result results visible top bottom left right middle area need should "
          "will can already so now I we you done finish wait complete instruction history screenshot").split()
DIRECTIONS = ["up", "down", "left", "right"]


def _goal(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return f"Open {rng.choice(APPS)} and search for {rng.choice(THINGS)} in {rng.choice(PLACES)}."
    if kind == 1:
        return (f"Explore a new {rng.choice(THINGS)} using {rng.choice(APPS)}, check the weekend's weather "
                f"forecast with {rng.choice(APPS)}, and then invite {rng.choice(PEOPLE)} to join through "
                f"{rng.choice(APPS)}.")
    if kind == 2:
        return f"Send a message to {rng.choice(PEOPLE)} saying '{rng.choice(THINGS)} at {rng.randrange(1, 13)} pm'."
    if kind == 3:
        return f"In {rng.choice(APPS)}, turn on {rng.choice(THINGS)} and go back to the home screen."
    return f"Find the {rng.choice(ELEMENTS)} in {rng.choice(APPS)} and tap it."


def _plan(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"{rng.choice(VERBS)} the {rng.choice(ELEMENTS)} to {rng.choice(['proceed', 'continue', 'open it', 'check the results'])}."
    if kind == 1:
        return f"Tap on the {rng.choice(APPS)} app to start {rng.choice(['exploring', 'searching', 'checking'])} {rng.choice(THINGS)}."
    if kind == 2:
        return f"Type '{rng.choice(PLACES)}' in the search bar to change the location."
    return f"Click on '{rng.choice(PLACES)}, CA {rng.randrange(90000, 96000)}, United States' to explore that trail."


def _action(rng: random.Random, extended: bool) -> dict:
    fns = ["Tap", "Tap", "Tap", "LongPress", "Type", "Swipe", "Back", "Home"]
    if extended:
        fns += ["Wait", "Finish"]
    fn = rng.choice(fns)
    if fn in ("Tap", "LongPress"):
        return {"function": fn, "point_2d": [rng.randrange(0, 1440), rng.randrange(0, 2560)]}
    if fn == "Type":
        return {"function": fn, "text": rng.choice(PLACES + THINGS + PEOPLE)}
    if fn == "Swipe":
        return {"function": fn, "direction": rng.choice(DIRECTIONS)}
    if fn == "Finish" and rng.random() < 0.5:
        return {"function": fn, "answer": rng.choice(PLACES + THINGS)}
    return {"function": fn}


def _box(rng: random.Random) -> list[int]:
    x1, y1 = rng.randrange(0, 1300), rng.randrange(0, 2400)
    return [x1, y1, x1 + rng.randrange(20, 400), y1 + rng.randrange(20, 200)]


def _completion(rng: random.Random) -> str:
    """A BTL output in the canonical (released) dialect, spec §2."""
    nb = rng.randrange(0, 4)
    if nb == 0:
        blink = "<blink>None</blink>" if rng.random() < 0.5 else "<blink>```json\n[]\n```</blink>"
    else:
        items = ", ".join(
            json.dumps({"bbox_2d": _box(rng), "label": rng.choice(ELEMENTS)}, ensure_ascii=False) for _ in range(nb)
        )
        blink = f"<blink>```json\n[{items}]\n```</blink>"
    words = " ".join(rng.choice(FILLER) for _ in range(rng.randrange(6, 30)))
    think = f"<think> {words.capitalize()}. </think>"
    if rng.random() < 0.15:
        link_body = json.dumps([{"point_2d": [rng.randrange(0, 2560), rng.randrange(0, 1440)]}])
    else:
        link_body = json.dumps([{"Plan": _plan(rng), "Action": _action(rng, rng.random() < 0.3)}], ensure_ascii=False)
    link = f"<link>```json\n{link_body}\n```</link>"
    return f"{blink}\n{think}\n{link}"


def _nav_user(rng: random.Random, template_user: str) -> str:
    head = template_user.split("## User Instruction\n", 1)[0]
    steps = [f"Step {k}: {_plan(rng)}" for k in range(1, rng.randrange(0, 12) + 1)]
    return (f"{head}## User Instruction\n{_goal(rng)}\n\n## Action History\n" + "\n".join(steps)
            + "\n\n## Screenshots\n<image>")


def build_corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    ex = load_examples()
    nav, grd = ex["navigation"], ex["grounding"]
    docs: list[str] = []
    official = [m["content"] for m in nav["messages"]] + [m["content"] for m in grd["messages"]]
    official += [nav["solution"], grd["solution"]]
    # The official prompts, many times, so the merges learn them.
    for _ in range(40):
        docs.extend(official)
    if COMPLETIONS.is_file():
        for line in COMPLETIONS.read_text(encoding="utf-8").splitlines():
            if line.strip():
                docs.extend([json.loads(line)["completion"]] * 5)
    for _ in range(600):
        docs.append(_completion(rng))
    for _ in range(300):
        docs.append(_nav_user(rng, nav["messages"][1]["content"]))
    for _ in range(200):
        docs.append(f"Point to the UI element most relevant to {rng.choice(ELEMENTS)}.\n<image>")
    for _ in range(300):
        docs.append(" ".join(rng.choice(FILLER + ELEMENTS + APPS) for _ in range(rng.randrange(5, 40))) + ".")
    for _ in range(200):
        docs.append(" ".join(str(rng.randrange(0, 3000)) for _ in range(rng.randrange(2, 12))))
    for _ in range(100):
        docs.append("You are a helpful assistant. " + TEXT_CASE_MESSAGES[0]["content"])
    rng.shuffle(docs)
    return docs


def build_tokenizer(seed: int):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    # Exactly the Qwen2 pipeline (see transformers' Qwen2Tokenizer and Qwen's tokenizer.json).
    tok = Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(build_corpus(seed), trainer=trainer)
    # (tokenizers' add_special_tokens marks everything special, so add the two kinds separately;
    # in QWEN_ADDED_TOKENS all special ones come first, as in Qwen's ids)
    kinds = [s for _, s in QWEN_ADDED_TOKENS]
    assert kinds == sorted(kinds, reverse=True)
    tok.add_special_tokens([AddedToken(c, normalized=False, special=True) for c, s in QWEN_ADDED_TOKENS if s])
    tok.add_tokens([AddedToken(c, normalized=False, special=False) for c, s in QWEN_ADDED_TOKENS if not s])
    return tok, PRETOKENIZE_REGEX


# ---------------------------------------------------------------------------
# Test image
# ---------------------------------------------------------------------------
def make_image(path: Path) -> None:
    """A phone-like screenshot made only of shapes (no fonts, so no FreeType dependence)."""
    from PIL import Image, ImageDraw

    W, H = IMAGE_W, IMAGE_H
    img = Image.new("RGB", (W, H), (245, 246, 250))
    d = ImageDraw.Draw(img)
    # vertical background gradient
    for y in range(H):
        c = 246 - (y * 18) // H
        d.line([(0, y), (W, y)], fill=(c, c, min(255, c + 6)))
    d.rectangle([0, 0, W - 1, 15], fill=(30, 30, 36))                              # status bar
    for i in range(3):
        d.rectangle([W - 40 + i * 11, 4, W - 33 + i * 11, 11], fill=(220, 220, 220))
    d.rectangle([0, 16, W - 1, 63], fill=(33, 97, 200))                            # app bar
    d.rounded_rectangle([12, 26, W - 44, 54], radius=10, fill=(255, 255, 255))      # search field
    d.ellipse([20, 33, 33, 46], outline=(90, 90, 90), width=2)                     # magnifier
    d.line([(31, 44), (37, 50)], fill=(90, 90, 90), width=2)
    d.rectangle([44, 37, 120, 42], fill=(190, 190, 190))                           # placeholder text
    d.ellipse([W - 36, 28, W - 12, 52], fill=(255, 200, 40))                       # avatar
    palette = [(231, 76, 60), (46, 204, 113), (155, 89, 182), (241, 196, 15), (26, 188, 156), (230, 126, 34)]
    for i in range(6):                                                             # list rows
        top = 76 + i * 50
        fill = (255, 255, 255) if i % 2 == 0 else (236, 240, 247)
        d.rectangle([8, top, W - 9, top + 42], fill=fill, outline=(210, 214, 222))
        d.ellipse([16, top + 7, 44, top + 35], fill=palette[i])
        d.rectangle([54, top + 10, 54 + 40 + (i * 23) % 100, top + 16], fill=(60, 60, 70))
        d.rectangle([54, top + 24, 54 + 70 + (i * 37) % 80, top + 29], fill=(150, 150, 160))
        d.polygon([(W - 26, top + 14), (W - 18, top + 21), (W - 26, top + 28)], fill=(120, 120, 130))
    d.ellipse([W - 62, H - 112, W - 14, H - 64], fill=(220, 50, 90))               # floating action button
    d.rectangle([W - 41, H - 100, W - 35, H - 76], fill=(255, 255, 255))
    d.rectangle([W - 50, H - 91, W - 26, H - 85], fill=(255, 255, 255))
    d.rectangle([0, H - 44, W - 1, H - 1], fill=(250, 250, 252), outline=(200, 200, 205))  # bottom nav
    d.polygon([(40, H - 22), (52, H - 32), (52, H - 12)], fill=(80, 80, 90))       # back
    d.ellipse([W // 2 - 10, H - 32, W // 2 + 10, H - 12], outline=(80, 80, 90), width=3)  # home
    d.rectangle([W - 58, H - 31, W - 40, H - 13], outline=(80, 80, 90), width=3)   # recents
    img.save(path, format="PNG", optimize=False, compress_level=9)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------
def build_model(vocab_size: int, n_tokens: int, special_ids: dict):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    t = TEXT
    text_config = dict(
        vocab_size=vocab_size,
        hidden_size=t["hidden_size"],
        intermediate_size=t["intermediate_size"],
        num_hidden_layers=t["num_hidden_layers"],
        num_attention_heads=t["num_attention_heads"],
        num_key_value_heads=t["num_key_value_heads"],
        hidden_act="silu",
        max_position_embeddings=t["max_position_embeddings"],
        rms_norm_eps=t["rms_norm_eps"],
        rope_parameters={"rope_type": "default", "rope_theta": t["rope_theta"], "mrope_section": t["mrope_section"]},
        use_sliding_window=False,
        max_window_layers=t["num_hidden_layers"],
        initializer_range=INIT_STD,
        bos_token_id=special_ids["<|endoftext|>"],
        eos_token_id=special_ids["<|im_end|>"],
        pad_token_id=special_ids["<|endoftext|>"],
    )
    vision_config = dict(VISION, initializer_range=INIT_STD)
    config = Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=special_ids["<|image_pad|>"],
        video_token_id=special_ids["<|video_pad|>"],
        vision_start_token_id=special_ids["<|vision_start|>"],
        vision_end_token_id=special_ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    torch.manual_seed(MODEL_SEED)
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32).eval()

    # Re-initialise every parameter ourselves, in sorted-name order, from one seeded
    # generator: the weights then do not depend on how transformers initialises.
    gen = torch.Generator().manual_seed(MODEL_SEED)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            owner = model.get_submodule(name.rsplit(".", 1)[0])
            if "Norm" in type(owner).__name__:
                p.copy_(1.0 + NORM_JITTER * torch.randn(p.shape, generator=gen))
            elif p.ndim == 1:
                p.copy_(BIAS_STD * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(INIT_STD * torch.randn(p.shape, generator=gen))
        # Rows of the padding ids (n_tokens..vocab_size, "[PADn]" in the GGUF): zero, so their
        # logit is exactly 0 and greedy decoding never picks one.
        model.lm_head.weight[n_tokens:] = 0.0
        model.model.language_model.embed_tokens.weight[n_tokens:] = 0.0
    assert model.lm_head.weight.data_ptr() != model.model.language_model.embed_tokens.weight.data_ptr()
    return model


def build_lora(hf: Path, out: Path, scratch: Path) -> dict:
    """The seeded PEFT LoRA adapter over the saved checkpoint, in float32, written by
    PEFT's save_pretrained; only adapter_config.json and adapter_model.safetensors are
    kept (into out/lora/), not the model card PEFT writes beside them."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2_5_VLForConditionalGeneration

    base = Qwen2_5_VLForConditionalGeneration.from_pretrained(hf, dtype=torch.float32).eval()
    model = get_peft_model(base, LoraConfig(**LORA, bias="none"))
    # Like the base weights: every adapter matrix drawn in sorted-name order from one
    # seeded generator, independent of PEFT's own initialisation.
    gen = torch.Generator().manual_seed(LORA_SEED)
    params = dict(model.named_parameters())
    names = sorted(n for n in params if ".lora_A." in n or ".lora_B." in n)
    assert len(names) == 2 * len(LORA_TARGETS) * TEXT["num_hidden_layers"], names
    assert all(".language_model.layers." in n and any(f".{t}." in n for t in LORA_TARGETS) for n in names), names
    with torch.no_grad():
        for name in names:
            params[name].copy_(LORA_STD * torch.randn(params[name].shape, generator=gen))
    # PEFT records where the base came from: here an absolute scratch path, so name it instead.
    model.peft_config["default"].base_model_name_or_path = MODEL_NAME
    if scratch.exists():
        shutil.rmtree(scratch)
    model.save_pretrained(scratch, safe_serialization=True, save_embedding_layers=False)
    (out / D_LORA).mkdir(exist_ok=True)
    for name in (F_LORA_CONFIG, F_LORA_WEIGHTS):
        shutil.copyfile(scratch / Path(name).name, out / name)
    return {"n_tensors": len(names), "n_params": sum(params[n].numel() for n in names)}


# ---------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------
def greedy(model, inputs: dict, n_new: int, eog_ids: set[int], n_tokens: int):
    """Greedy decoding by full recomputation (no KV cache): the most literal reference."""
    import torch

    ids = inputs["input_ids"]
    mm = inputs["mm_token_type_ids"]
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "mm_token_type_ids", "attention_mask")}
    out_ids, margins, first_logits = [], [], None
    for _ in range(n_new):
        with torch.no_grad():
            logits = model(input_ids=ids, mm_token_type_ids=mm, use_cache=False, **extra).logits[0, -1].float()
        if first_logits is None:
            first_logits = logits.clone()
        top2 = torch.topk(logits, 2)
        nxt = int(top2.indices[0])
        margins.append(float(top2.values[0] - top2.values[1]))
        out_ids.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]], dtype=ids.dtype)], dim=1)
        mm = torch.cat([mm, torch.zeros((1, 1), dtype=mm.dtype)], dim=1)
    first_eog = next((i for i, t in enumerate(out_ids) if t in eog_ids), None)
    assert max(out_ids) < n_tokens, f"a padding id was generated: {out_ids}"
    return out_ids, margins, first_logits, first_eog


def generate_with_cache(model, inputs: dict, n_new: int) -> list[int]:
    """Cross-check with transformers' generate() (KV cache, rope_deltas path)."""
    import torch

    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=n_new, min_new_tokens=n_new,
                             eos_token_id=None, pad_token_id=None, temperature=None, top_p=None, top_k=None)
    return [int(x) for x in out[0, inputs["input_ids"].shape[1]:]]


def case_record(tokenizer, messages, prompt_text, inputs, model, eog_ids, extra=None):
    import torch

    n_tokens = len(tokenizer)

    prompt_ids = [int(x) for x in inputs["input_ids"][0]]
    gen_ids, margins, logits, first_eog = greedy(model, inputs, N_NEW_TOKENS, eog_ids, n_tokens)
    cached = generate_with_cache(model, inputs, N_NEW_TOKENS)
    if cached != gen_ids:
        raise SystemExit(f"generate() with KV cache disagrees with the recomputed greedy ids:\n{cached}\n{gen_ids}")
    top = torch.topk(logits, TOPK)
    rec = {
        "messages": messages,
        "prompt_text": prompt_text,
        "n_prompt_tokens": len(prompt_ids),
        "prompt_ids": prompt_ids,
    }
    if extra:
        rec.update(extra)
    rec.update({
        "n_new_tokens": N_NEW_TOKENS,
        "generated_ids": gen_ids,
        "generated_text": tokenizer.decode(gen_ids, skip_special_tokens=False),
        "first_eog_index": first_eog,
        "step_top1_margins": [Raw(f32_str(m)) for m in margins],
        "first_step": {
            "argmax": int(top.indices[0]),
            "top10_ids": [int(i) for i in top.indices],
            "top10_logits": [Raw(f32_str(v)) for v in top.values],
            "logits": [Raw(f32_str(v)) for v in logits.tolist()],
        },
    })
    return rec


def process(tok, improc, prompt: str, image):
    """What Qwen2_5_VLProcessor.__call__ does for one prompt and at most one image.

    (The processor class itself insists on a video processor, which needs torchvision.)
    Every <|image_pad|> of the rendered prompt becomes t*h*w/merge^2 image tokens;
    mm_token_type_ids marks them with 1 so transformers uses 3-D M-RoPE positions.
    """
    import torch

    out = {}
    if image is not None:
        px = improc(images=[image], return_tensors="pt")
        out["pixel_values"] = px["pixel_values"]
        out["image_grid_thw"] = px["image_grid_thw"]
        n = int(px["image_grid_thw"][0].prod()) // (improc.merge_size ** 2)
        assert prompt.count("<|image_pad|>") == 1
        prompt = prompt.replace("<|image_pad|>", "<|image_pad|>" * n)
    enc = tok(prompt, add_special_tokens=False, return_tensors="pt")
    image_id = tok.convert_tokens_to_ids("<|image_pad|>")
    out["input_ids"] = enc["input_ids"]
    out["attention_mask"] = enc["attention_mask"]
    out["mm_token_type_ids"] = (enc["input_ids"] == image_id).to(torch.int32)
    return out


def cmd_build(args) -> None:
    import numpy as np
    import peft
    import PIL
    import safetensors
    import tokenizers
    import torch
    import transformers
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Tokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    hf = Path(args.hf_dir)
    out = Path(args.out)
    if hf.exists():
        shutil.rmtree(hf)
    hf.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)

    # 1. tokenizer
    raw_tok, regex = build_tokenizer(SEED)
    raw_json = raw_tok.to_str(pretty=True)  # before transformers touches the backend object
    tok = Qwen2Tokenizer(
        tokenizer_object=raw_tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        errors="replace",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        add_prefix_space=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    special_ids = {c: tok.convert_tokens_to_ids(c) for c, _ in QWEN_ADDED_TOKENS}
    n_tok = len(tok)
    vocab_size = -(-n_tok // VOCAB_PAD_TO) * VOCAB_PAD_TO

    # 2. image processor (the PIL one: the default Qwen2VLImageProcessor would need torchvision)
    improc = Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=VISION["patch_size"],
                                      temporal_patch_size=VISION["temporal_patch_size"],
                                      merge_size=VISION["spatial_merge_size"])
    tok.save_pretrained(hf)
    # transformers 5 re-serialises the backend with its own decoder/post-processor defaults;
    # write the trained tokenizer as it was instead, which has Qwen2's tokenizer.json layout
    # (ByteLevel post-processor: the converter then records add_bos_token = false, as for Qwen).
    (hf / "tokenizer.json").write_text(raw_json, encoding="utf-8")
    # The converter's mmproj path reads image_mean/std from preprocessor_config.json
    # (or processor_config.json); write the former explicitly in the classic layout.
    pp = improc.to_dict()
    pp["image_processor_type"] = "Qwen2VLImageProcessor"
    pp["min_pixels"], pp["max_pixels"] = MIN_PIXELS, MAX_PIXELS
    (hf / "preprocessor_config.json").write_text(dump_json(pp), encoding="utf-8")

    # 3. model
    model = build_model(vocab_size, n_tok, special_ids)
    model.generation_config = GenerationConfig(
        bos_token_id=special_ids["<|endoftext|>"],
        eos_token_id=[special_ids["<|im_end|>"], special_ids["<|endoftext|>"]],
        pad_token_id=special_ids["<|endoftext|>"],
        do_sample=False,
    )
    model.save_pretrained(hf)
    n_params = sum(p.numel() for p in model.parameters())

    # 4. reload everything from disk, as a user of the checkpoint would
    tok2 = AutoTokenizer.from_pretrained(hf)
    improc = Qwen2VLImageProcessorPil.from_pretrained(hf)
    assert improc.size["shortest_edge"] == MIN_PIXELS and improc.size["longest_edge"] == MAX_PIXELS, improc.size
    model = type(model).from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(tok2).__name__ == "Qwen2Tokenizer", type(tok2)
    assert len(tok2) == n_tok

    # tokenizer sanity: the transformers tokenizer and the raw tokenizers pipeline agree
    ex = load_examples()
    nav = ex["navigation"]
    for m in nav["messages"] + ex["grounding"]["messages"]:
        a = tok2(m["content"], add_special_tokens=False)["input_ids"]
        b = raw_tok.encode(m["content"], add_special_tokens=False).ids
        assert a == b, "transformers and tokenizers disagree"
        assert tok2.decode(a) == m["content"]

    # 5. test image
    img_path = out / F_IMAGE
    make_image(img_path)
    shutil.copyfile(hf / "tokenizer.json", out / F_TOKENIZER)

    # end-of-generation ids: the generation config's, plus the FIM tokens llama.cpp also treats as EOG
    eog_hf = {special_ids["<|im_end|>"], special_ids["<|endoftext|>"]}
    eog_llama = eog_hf | {special_ids[t] for t in ("<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")}
    eog_ids = eog_llama

    # 6a. text-only case
    text_prompt = tok2.apply_chat_template(TEXT_CASE_MESSAGES, tokenize=False, add_generation_prompt=True)
    t_inputs = process(tok2, improc, text_prompt, None)
    assert int(t_inputs["mm_token_type_ids"].sum()) == 0
    text_case = case_record(tok2, TEXT_CASE_MESSAGES, text_prompt, t_inputs, model, eog_ids)

    # 6b. image + BTL navigation case: the official example's messages, <image> -> an image content part
    messages = []
    for m in nav["messages"]:
        c = m["content"]
        if "<image>" in c:
            before, after = c.split("<image>", 1)
            assert "<image>" not in after
            parts = []
            if before:
                parts.append({"type": "text", "text": before})
            parts.append({"type": "image"})
            if after:
                parts.append({"type": "text", "text": after})
            messages.append({"role": m["role"], "content": parts})
        else:
            messages.append({"role": m["role"], "content": c})
    image_prompt = tok2.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # the rendered prompt is the official text with <image> replaced by the vision tokens
    expected = ("<|im_start|>system\n" + nav["messages"][0]["content"] + "<|im_end|>\n<|im_start|>user\n"
                + nav["messages"][1]["content"].replace("<image>", "<|vision_start|><|image_pad|><|vision_end|>")
                + "<|im_end|>\n<|im_start|>assistant\n")
    assert image_prompt == expected, "chat template rendering differs from the official messages"
    from PIL import Image

    with Image.open(img_path) as im:
        image = im.convert("RGB")
    i_inputs = process(tok2, improc, image_prompt, image)
    grid = [int(x) for x in i_inputs["image_grid_thw"][0]]
    merge = VISION["spatial_merge_size"]
    n_img_tok = grid[0] * grid[1] * grid[2] // (merge * merge)
    assert int(i_inputs["mm_token_type_ids"].sum()) == n_img_tok
    assert int((i_inputs["input_ids"] == special_ids["<|image_pad|>"]).sum()) == n_img_tok
    # M-RoPE positions (what llama.cpp calls n_past after the prompt)
    pos, deltas = model.model.get_rope_index(i_inputs["input_ids"], image_grid_thw=i_inputs["image_grid_thw"],
                                             attention_mask=i_inputs.get("attention_mask"),
                                             mm_token_type_ids=i_inputs["mm_token_type_ids"])
    n_positions = int(pos.max()) + 1
    first_img = [int(x) for x in i_inputs["input_ids"][0]].index(special_ids["<|image_pad|>"])
    image_case = case_record(
        tok2, nav["messages"], image_prompt, i_inputs, model, eog_ids,
        extra={
            "source": "tests/data/btl-ui-examples/navigation_meta_format.json: messages (system + user), "
                      "<image> replaced by an image content part for the chat template",
            "image": F_IMAGE,
            "image_grid_thw": grid,
            "n_image_tokens": n_img_tok,
            "first_image_token_index": first_img,
            "n_mrope_positions": n_positions,
        },
    )
    vocab_tok = raw_tok.get_vocab_size(with_added_tokens=False)

    # 6c. both cases again with the LoRA adapter, loaded back from the fixture dir as a user would
    from peft import PeftModel

    lora_info = build_lora(hf, out, hf / "peft-lora")
    lora_base = type(model).from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    lora_model = PeftModel.from_pretrained(lora_base, out / D_LORA).eval()
    lora_cases = {}
    for name, inputs, base_case in (("text", t_inputs, text_case), ("image", i_inputs, image_case)):
        rec = case_record(tok2, None, None, inputs, lora_model, eog_ids)
        ids, base_ids = rec["generated_ids"], base_case["generated_ids"]
        # an added token could be an end of generation for llama.cpp and stop it early
        assert rec["first_eog_index"] is None and max(ids) < vocab_tok, (name, ids)
        differs = next((i for i, (a, b) in enumerate(zip(ids, base_ids)) if a != b), None)
        lora_cases[name] = {
            "prompt": f"cases.{name} (the same prompt ids)",
            **{k: v for k, v in rec.items() if k not in ("messages", "prompt_text", "prompt_ids")},
            "first_index_differing_from_base": differs,
        }
    assert lora_cases["text"]["first_index_differing_from_base"] is not None, "the adapter changes nothing"

    image_info = {
        "file": F_IMAGE,
        "width": IMAGE_W,
        "height": IMAGE_H,
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "resized_width": grid[2] * VISION["patch_size"],
        "resized_height": grid[1] * VISION["patch_size"],
        "grid_thw": grid,
        "n_patches": grid[0] * grid[1] * grid[2],
        "n_image_tokens": n_img_tok,
        "image_mean": [Raw(f32_str(v)) for v in improc.image_mean],
        "image_std": [Raw(f32_str(v)) for v in improc.image_std],
        "processor": type(improc).__name__,
    }

    btl_counts = {
        "navigation_system": len(tok2(nav["messages"][0]["content"], add_special_tokens=False)["input_ids"]),
        "navigation_user": len(tok2(nav["messages"][1]["content"], add_special_tokens=False)["input_ids"]),
        "navigation_system_chars": len(nav["messages"][0]["content"]),
        "navigation_user_chars": len(nav["messages"][1]["content"]),
    }
    ref = {
        "format": FORMAT,
        "generator": "scripts/make-tiny-model/run (make_tiny.py + convert.py)",
        "seed": SEED,
        "model_seed": MODEL_SEED,
        "versions": {
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "safetensors": safetensors.__version__,
            "numpy": np.__version__,
            "pillow": PIL.__version__,
            "peft": peft.__version__,
        },
        "reference_backend": "transformers Qwen2_5_VLForConditionalGeneration, float32, CPU, eager attention, "
                             "1 thread; greedy by full recomputation, checked against generate() with KV cache",
        "model": {
            "architecture": "Qwen2_5_VLForConditionalGeneration",
            "n_params": n_params,
            "text": {**{k: v for k, v in TEXT.items()}, "vocab_size": vocab_size,
                     "head_dim": TEXT["hidden_size"] // TEXT["num_attention_heads"], "tie_word_embeddings": False},
            "vision": dict(VISION),
            "init": {"std": INIT_STD, "norm": f"1 + {NORM_JITTER}*N(0,1)", "bias_std": BIAS_STD},
        },
        "tokenizer": {
            "file": F_TOKENIZER,
            "kind": "byte-level BPE, Qwen2 pre-tokenizer (NFC, Split on the Qwen2 regex, ByteLevel)",
            "pretokenize_regex": regex,
            "n_bpe_tokens": vocab_tok,
            "n_tokens": n_tok,
            "config_vocab_size": vocab_size,
            "added_tokens": {c: special_ids[c] for c, _ in QWEN_ADDED_TOKENS},
            "eos_token_id": special_ids["<|im_end|>"],
            "pad_token_id": special_ids["<|endoftext|>"],
            "eog_ids_generation_config": sorted(eog_hf),
            "eog_ids_llama_cpp": sorted(eog_llama),
            "btl_prompt_token_counts": btl_counts,
            "chat_template": CHAT_TEMPLATE,
        },
        "image": image_info,
        "cases": {"text": text_case, "image": image_case},
        "lora": {
            "adapter_dir": D_LORA,
            "gguf": F_LORA_F32,
            "mismatched_gguf": F_LORA_MISMATCHED,
            "seed": LORA_SEED,
            **LORA,
            "targets": LORA_TARGETS,
            "init_std": LORA_STD,
            "alpha_over_r": LORA["lora_alpha"] / LORA["r"],
            **lora_info,
            "reference_backend": "peft PeftModel.from_pretrained(base, lora/), the base as for `cases` (float32 "
                                 "weights, not rounded to the f16 of the base GGUF)",
            "cases": lora_cases,
        },
    }
    (hf / "reference.partial.json").write_text(dump_json(ref), encoding="utf-8")
    for name, c in ref["cases"].items():
        print(f"[make_tiny] case {name}: {c['n_prompt_tokens']} prompt tokens, generated {c['generated_ids']}")
        print(f"[make_tiny]   text: {c['generated_text']!r}  first EOG index: {c['first_eog_index']}")
    for name, c in ref["lora"]["cases"].items():
        print(f"[make_tiny] LoRA case {name}: generated {c['generated_ids']} (differs from the base at "
              f"{c['first_index_differing_from_base']}; smallest margin {min(float(m) for m in c['step_top1_margins']):.4f})")
    print(f"[make_tiny] tokenizer: {n_tok} tokens (config vocab {vocab_size}); BTL prompt token counts {btl_counts}")
    print(f"[make_tiny] image grid {grid}, {n_img_tok} image tokens, {n_positions} M-RoPE positions; params {n_params}")


# ---------------------------------------------------------------------------
# finalize: GGUF metadata, hashes, README
# ---------------------------------------------------------------------------
GGUF_KEYS = [
    "general.architecture", "general.name", "general.file_type", "general.quantization_version",
    "qwen2vl.context_length", "qwen2vl.embedding_length", "qwen2vl.block_count", "qwen2vl.feed_forward_length",
    "qwen2vl.attention.head_count", "qwen2vl.attention.head_count_kv", "qwen2vl.rope.freq_base",
    "qwen2vl.rope.dimension_sections", "qwen2vl.attention.layer_norm_rms_epsilon",
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token",
    "clip.projector_type", "clip.has_vision_encoder", "clip.use_silu", "clip.vision.n_wa_pattern",
    "clip.vision.image_size", "clip.vision.patch_size", "clip.vision.embedding_length",
    "clip.vision.block_count", "clip.vision.projection_dim", "clip.vision.spatial_merge_size",
    "clip.vision.image_mean", "clip.vision.image_std",
]

LORA_GGUF_KEYS = ["general.architecture", "general.type", "general.name", "general.file_type",
                  "adapter.type", "adapter.lora.alpha"]


def gguf_summary(path: Path, keys: list[str] = GGUF_KEYS) -> dict:
    import gguf

    r = gguf.GGUFReader(str(path))
    meta = {}
    for key in keys:
        f = r.get_field(key)
        if f is None:
            continue
        v = f.contents()
        if isinstance(v, float):
            v = Raw(f32_str(v))
        elif isinstance(v, list) and v and isinstance(v[0], float):
            v = [Raw(f32_str(x)) for x in v]
        meta[key] = v
    for key in ("tokenizer.ggml.tokens",):
        f = r.get_field(key)
        if f is not None:
            meta["n_vocab"] = len(f.data)
    f = r.get_field("tokenizer.chat_template")
    if f is not None:
        meta["chat_template_sha256"] = hashlib.sha256(f.contents().encode("utf-8")).hexdigest()
    types: dict[str, int] = {}
    for t in r.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return {
        "metadata": meta,
        "n_tensors": len(r.tensors),
        "tensor_types": dict(sorted(types.items())),
        "tensors": [f"{t.name} {t.tensor_type.name} {list(int(x) for x in t.shape)}" for t in r.tensors],
    }


def cmd_finalize(args) -> None:
    hf = Path(args.hf_dir)
    out = Path(args.out)
    # parse_float=Raw keeps every number exactly as build wrote it
    ref = json.loads((hf / "reference.partial.json").read_text(encoding="utf-8"), parse_float=Raw)
    ref["versions"]["gguf"] = importlib.metadata.version("gguf")
    ref["versions"]["converter"] = args.converter
    ref["gguf"] = {name: gguf_summary(out / name) for name in (F_TEXT_F16, F_TEXT_Q8, F_MMPROJ_F16)}
    # consistency checks between the GGUFs and the model
    tm = ref["gguf"][F_TEXT_F16]["metadata"]
    assert tm["general.architecture"] == "qwen2vl", tm
    assert list(tm["qwen2vl.rope.dimension_sections"]) == TEXT["mrope_section"] + [0], tm
    assert tm["tokenizer.ggml.pre"] == "qwen2", tm
    assert tm["n_vocab"] == ref["tokenizer"]["config_vocab_size"]
    mm = ref["gguf"][F_MMPROJ_F16]["metadata"]
    assert mm["clip.projector_type"] == "qwen2.5vl_merger", mm
    lora = gguf_summary(out / F_LORA_F32, LORA_GGUF_KEYS)
    ref["gguf"][F_LORA_F32] = lora
    lm = lora["metadata"]
    assert (lm["general.architecture"], lm["general.type"], lm["adapter.type"]) == ("qwen2vl", "adapter", "lora"), lm
    assert float(lm["adapter.lora.alpha"]) == LORA["lora_alpha"], lm
    # every adapted matrix becomes a lora_a / lora_b pair, all kept in f32
    assert lora["n_tensors"] == ref["lora"]["n_tensors"] and lora["tensor_types"] == {"F32": lora["n_tensors"]}, lora
    ref["files"] = {name: {"bytes": (out / name).stat().st_size, "sha256": sha256_file(out / name)}
                    for name in FIXTURE_FILES}
    (out / F_REFERENCE).write_text(dump_json(ref), encoding="utf-8")
    write_readme(out, ref)
    for name in FIXTURE_FILES + [F_REFERENCE, F_README]:
        p = out / name
        print(f"[finalize] {sha256_file(p)}  {p.stat().st_size:>9}  {name}")


def write_readme(out: Path, ref: dict) -> None:
    v = ref["versions"]
    t = ref["model"]["text"]
    vi = ref["model"]["vision"]
    tk = ref["tokenizer"]
    im = ref["image"]
    tc, ic = ref["cases"]["text"], ref["cases"]["image"]
    lo = ref["lora"]
    lines = [
        "# tiny-qwen25vl: a tiny random Qwen2.5-VL and its transformers reference",
        "",
        "Test fixtures for btl's llama.cpp backend. The model is **random** (no training); it exists to",
        "prove that btl loads a Qwen2.5-VL GGUF + mmproj, tokenizes the BTL prompts, places the image and",
        "decodes exactly like the numeric reference (HF transformers, float32, CPU).",
        "",
        "Generated by `scripts/make-tiny-model/run` (see its README); do not edit by hand.",
        "Re-running it regenerates every file here byte for byte (same pinned venv, x86-64 CPU).",
        "",
        "```sh",
        "scripts/make-tiny-model/run            # writes tests/data/tiny-qwen25vl/",
        "```",
        "",
        "## Files",
        "",
        "| file | bytes | sha256 |",
        "|---|---|---|",
    ]
    for name, f in ref["files"].items():
        lines.append(f"| `{name}` | {f['bytes']:,} | `{f['sha256']}` |")
    lines += [
        f"| `{F_REFERENCE}` | — | (holds the table above) |",
        "",
        f"- `{F_TEXT_F16}`, `{F_TEXT_Q8}`: text model (`general.architecture=qwen2vl`, "
        f"`rope.dimension_sections={t['mrope_section'] + [0]}`, `tokenizer.ggml.pre=qwen2`, chat template included).",
        f"- `{F_MMPROJ_F16}`: vision tower + merger (`clip.projector_type=qwen2.5vl_merger`).",
        f"- `{F_MMPROJ_MISMATCHED}`: the same projector with its last layer 96 wide instead of the text "
        "model's 128 (`mismatch_mmproj.py`): llama.cpp must refuse the pair.",
        f"- `{F_IMAGE}`: {im['width']}×{im['height']} (w×h) synthetic phone screenshot, shapes only.",
        f"- `{F_TOKENIZER}`: the HF tokenizer, for reference (the GGUF carries the same vocabulary).",
        f"- `{F_LORA_CONFIG}`, `{F_LORA_WEIGHTS}`: a seeded LoRA adapter in PEFT's `save_pretrained` format (float32).",
        f"- `{F_LORA_F32}`: that adapter converted by llama.cpp's `convert_lora_to_gguf.py` (f32; "
        "`general.type=adapter`, `adapter.type=lora`, `adapter.lora.alpha` stored).",
        f"- `{F_LORA_MISMATCHED}`: the same adapter header with every {TEXT['hidden_size']}-wide dimension made 96 "
        "(`mismatch_lora.py`), the adapter of another model: llama.cpp must refuse it.",
        f"- `{F_REFERENCE}`: what transformers computes; the GGUFs' metadata and tensor lists; the sha256s.",
        "",
        "## Model",
        "",
        f"- Text: hidden {t['hidden_size']}, {t['num_hidden_layers']} layers, {t['num_attention_heads']} heads / "
        f"{t['num_key_value_heads']} KV heads (head_dim {t['head_dim']}), FFN {t['intermediate_size']}, "
        f"rope_theta {float(t['rope_theta']):g}, M-RoPE sections {t['mrope_section']}, untied lm_head, vocab {t['vocab_size']}.",
        f"- Vision: depth {vi['depth']}, hidden {vi['hidden_size']}, {vi['num_heads']} heads, FFN {vi['intermediate_size']}, "
        f"patch {vi['patch_size']}, merge {vi['spatial_merge_size']}, window {vi['window_size']}, "
        f"full-attention blocks {vi['fullatt_block_indexes']} (the others use window attention), out {vi['out_hidden_size']}.",
        f"- {ref['model']['n_params']:,} parameters, seeded normal init (std {ref['model']['init']['std']}; "
        f"RMSNorm weights {ref['model']['init']['norm']}).",
        f"- Tokenizer: byte-level BPE trained on a seeded synthetic corpus (the official BTL-UI prompts, BTL "
        f"completions, JSON actions, digits), exactly the Qwen2 pre-tokenizer, the {len(tk['added_tokens'])} Qwen2.5 added "
        f"tokens (`<|endoftext|>`={tk['added_tokens']['<|endoftext|>']}, `<|im_start|>`={tk['added_tokens']['<|im_start|>']}, "
        f"`<|im_end|>`={tk['added_tokens']['<|im_end|>']}, `<|vision_start|>`={tk['added_tokens']['<|vision_start|>']}, "
        f"`<|image_pad|>`={tk['added_tokens']['<|image_pad|>']}, ...); {tk['n_tokens']} tokens, padded to "
        f"{tk['config_vocab_size']} (unused ids are `[PADn]` in the GGUF). The Qwen2-VL chat template.",
        "",
        "## Reference cases (`reference.json` → `cases`)",
        "",
        f"- `text`: one user message, rendered with the chat template (which adds Qwen's default system prompt "
        f"\"You are a helpful assistant.\"; llama.cpp's built-in `chatml` does not): {tc['n_prompt_tokens']} prompt tokens.",
        f"- `image`: the system + user messages of `tests/data/btl-ui-examples/navigation_meta_format.json`, "
        f"`<image>` → `<|vision_start|><|image_pad|>×{ic['n_image_tokens']}<|vision_end|>`: {ic['n_prompt_tokens']} prompt "
        f"tokens, image grid (t,h,w) {ic['image_grid_thw']}, {ic['n_mrope_positions']} M-RoPE positions. "
        f"Image processor min_pixels {im['min_pixels']}, max_pixels {im['max_pixels']} (no resize at this size).",
        f"- Each case: `prompt_text`, `prompt_ids`, {tc['n_new_tokens']} greedy `generated_ids` (EOG not stopped on; "
        "`first_eog_index` says if one of `tokenizer.eog_ids_llama_cpp` occurs; none does), `step_top1_margins` (top-1 minus top-2 logit per step: where a small "
        "margin is, f16/q8_0 may legitimately diverge), and `first_step` logits (top-10 and the full vector).",
        "- transformers ≥ 5 needs `mm_token_type_ids` to use 3-D M-RoPE positions; the reference passes it.",
        "- With llama.cpp's mtmd, write the media marker (`<__media__>`) where the prompt has "
        "`<|vision_start|><|image_pad|><|vision_end|>`: mtmd adds vision_start/vision_end itself. After the prompt, "
        "generation continues at the M-RoPE position `n_mrope_positions`, not at `n_prompt_tokens`.",
        "- Padding ids (`n_tokens` ≤ id < vocab) have zero lm_head rows (logit 0), so they are never generated.",
        f"- `lora` → `cases`: the same two prompts with the adapter applied (PEFT `PeftModel` over the float32 model): "
        f"{lo['cases']['text']['n_new_tokens']} greedy ids, margins and first-step logits as above, and "
        f"`first_index_differing_from_base` (text: {lo['cases']['text']['first_index_differing_from_base']}, "
        f"image: {lo['cases']['image']['first_index_differing_from_base']}).",
        "- The reference is float32; the GGUFs are f16/q8_0, so exact agreement is expected only as far as the",
        "  margins allow. Compare logits with a tolerance.",
        "",
        "## LoRA adapter (`reference.json` → `lora`)",
        "",
        f"- r {lo['r']}, lora_alpha {lo['lora_alpha']} (llama.cpp and PEFT scale the update by alpha / r = "
        f"{float(lo['alpha_over_r']):g}), dropout {lo['lora_dropout']}, on the text model's "
        f"{', '.join(lo['targets'])} only (not the vision tower); {lo['n_tensors']} matrices, {lo['n_params']:,} parameters.",
        f"- A and B both ~ N(0, {lo['init_std']}²) from seed {lo['seed']} (PEFT would start B at zero, a no-op).",
        "- The reference runs the float32 base weights, as `cases` does; the base GGUF is f16, so agreement with",
        "  llama.cpp again holds as far as the margins allow.",
        "",
        "## Versions",
        "",
        f"torch {v['torch']}, transformers {v['transformers']}, tokenizers {v['tokenizers']}, safetensors {v['safetensors']}, "
        f"numpy {v['numpy']}, pillow {v['pillow']}, peft {v['peft']}, gguf {v['gguf']}, python {v['python']}; "
        f"converter: {v['converter']}.",
        "",
    ]
    (out / F_README).write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--hf-dir", required=True, help="scratch dir for the HF checkpoint (wiped)")
    b.add_argument("--out", required=True, help="fixture dir")
    f = sub.add_parser("finalize")
    f.add_argument("--hf-dir", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--converter", required=True, help="converter provenance string")
    args = ap.parse_args()
    {"build": cmd_build, "finalize": cmd_finalize}[args.cmd](args)


if __name__ == "__main__":
    main()
