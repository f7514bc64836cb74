#!/usr/bin/env python3
"""Write the golden references of btl's image preprocessing to tests/data/preprocess/.

Expected values come only from Pillow (`Image.resize(..., BICUBIC)`) and from transformers'
`Qwen2VLImageProcessorPil` (the PIL/NumPy backend of Qwen2VLImageProcessor, named explicitly so
the torchvision backend can never be picked). The input images are synthetic (gradients, hard
black/white blocks whose overshoot exercises the uint8 clamp, seeded noise) and stored as PNG;
every expected value is computed from the PNG as read back, so the Rust tests start from the
same pixels.

Two steps, each in its own venv (the `run` script calls both):

  build   Pillow 13 + transformers: the inputs, Pillow 13's resizes, the processor cases,
          reference.json and README.md.
  resize  any other Pillow (12): its resizes of the same inputs, added to reference.json. A
          result byte-identical to one already written points at that file instead of a copy.

Outputs (all little-endian, row-major):
  input-*.png              the inputs
  resize-pillowN-*.rgb     Pillow N's resized pixels, height x width x 3 uint8
  qwen2vl-*.resized.rgb    the processor cases' resized pixels (Pillow, at transformers' smart_resize size)
  qwen2vl-*.pixel_values.f32   transformers' pixel_values, rows x cols float32
  reference.json           sizes, processor settings, grids, file names, versions
  README.md                what is here
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

FORMAT = "btl-preprocess-reference/1"
BICUBIC = Image.Resampling.BICUBIC

# name -> (width, height, seed, side of the noisy square at the top left, or None for all).
# Noise does not compress: the large input is noisy only in a corner, so its PNG stays small.
INPUTS = {
    "odd-37x23": (37, 23, 1, None),
    "odd-131x77": (131, 77, 2, None),
    "exact-56x28": (56, 28, 3, None),
    "tall-15x600": (15, 600, 4, None),
    "large-901x433": (901, 433, 5, 96),
    "tie-50x70": (50, 70, 6, None),
    "small-30x22": (30, 22, 7, None),
    "pixel-1x1": (1, 1, 8, None),
}
NOISE = 48

# Pillow only: (input, width, height) including sizes no smart_resize would give, one-axis
# resizes (Pillow then skips the other pass), the identity, 1x1 and a factor >100 downscale.
RESIZES = [
    ("odd-37x23", 1, 1),
    ("odd-37x23", 37, 1),
    ("odd-37x23", 1, 23),
    ("odd-37x23", 37, 23),
    ("odd-37x23", 100, 61),
    ("odd-37x23", 36, 24),
    ("odd-37x23", 111, 23),
    ("odd-131x77", 65, 38),
    ("odd-131x77", 200, 40),
    # Pillow 13 runs the vertical pass first when the height loses more than twice as many
    # pixels as the width: 20 rows vs 10 columns is not more, 21 rows is.
    ("odd-131x77", 121, 57),
    ("odd-131x77", 121, 56),
    ("tall-15x600", 600, 15),
    ("large-901x433", 7, 5),
    ("large-901x433", 113, 53),
    ("large-901x433", 13, 433),
    ("large-901x433", 901, 9),
    ("pixel-1x1", 3, 5),
]

QWEN = dict(patch_size=14, merge_size=2, temporal_patch_size=2)
# name -> (input, processor settings)
PROCESSOR_CASES = {
    "upscale": ("odd-37x23", dict(min_pixels=1176, max_pixels=1003520, **QWEN)),
    "downscale": ("odd-131x77", dict(min_pixels=784, max_pixels=3136, **QWEN)),
    "exact": ("exact-56x28", dict(min_pixels=784, max_pixels=1003520, **QWEN)),
    # Ratio 40; the short side is held at one merged patch (28) while the long one shrinks.
    "extreme-aspect": ("tall-15x600", dict(min_pixels=196, max_pixels=392, **QWEN)),
    "large-factor": ("large-901x433", dict(min_pixels=784, max_pixels=1568, **QWEN)),
    # Qwen2.5-VL's own min_pixels and BTL-UI's training max_pixels; 70 / 28 = 2.5 rounds to 2.
    "qwen-defaults": ("tie-50x70", dict(min_pixels=3136, max_pixels=4014080, **QWEN)),
    # Not a real model: a small patch, three frames, to pin the flattening order in general.
    "patch4-merge2-temporal3": (
        "small-30x22",
        dict(min_pixels=64, max_pixels=10000, patch_size=4, merge_size=2, temporal_patch_size=3),
    ),
}


def synthetic(width: int, height: int, seed: int, noisy: int | None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    fx = x / max(width - 1, 1)
    fy = y / max(height - 1, 1)
    img = np.empty((height, width, 3), dtype=np.float64)
    img[..., 0] = 255 * fx
    img[..., 1] = 255 * fy
    img[..., 2] = 127.5 + 127.5 * np.sin(2 * np.pi * (3 * fx + 2 * fy))
    corner = (fx > 0.5) & (fy < 0.5)
    checker = ((x // 4 + y // 4) % 2) == 0
    img[corner & checker] = 255
    img[corner & ~checker] = 0
    noise = rng.integers(-NOISE, NOISE + 1, size=img.shape)
    if noisy is not None:
        noise[noisy:, :] = 0
        noise[:, noisy:] = 0
    img += noise
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def patchify_by_hand(resized: np.ndarray, cfg: dict) -> np.ndarray:
    """The processor's arithmetic as btl reads it: a cross-check that transformers really
    consumed the Pillow-resized pixels stored next to its output."""
    p, m, t = cfg["patch_size"], cfg["merge_size"], cfg["temporal_patch_size"]
    mean = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
    std = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)
    chw = (resized.astype(np.float64) * (1 / 255)).astype(np.float32).transpose(2, 0, 1)
    chw = (chw - mean[:, None, None]) / std[:, None, None]
    c, h, w = chw.shape
    gh, gw = h // p, w // p
    rows = []
    for bh in range(gh // m):
        for bw in range(gw // m):
            for mh in range(m):
                for mw in range(m):
                    y0, x0 = (bh * m + mh) * p, (bw * m + mw) * p
                    patch = chw[:, y0 : y0 + p, x0 : x0 + p]
                    rows.append(np.stack([patch] * t, axis=1).reshape(-1))
    return np.stack(rows)


def pillow_major() -> str:
    return PIL.__version__.split(".")[0]


def load_inputs(out: Path, inputs: dict) -> dict:
    images = {}
    for name, meta in inputs.items():
        with Image.open(out / meta["file"]) as im:
            images[name] = im.convert("RGB")
            images[name].load()
    return images


def resize_cases(out: Path, images: dict, existing: list) -> dict:
    """This Pillow's resizes; `existing` are the sets already written (to share identical files)."""
    known = {(c["input"], c["width"], c["height"]): c["expected"] for s in existing for c in s["cases"]}
    cases = []
    for name, w, h in RESIZES:
        resized = np.asarray(images[name].resize((w, h), resample=BICUBIC, reducing_gap=None))
        assert resized.shape == (h, w, 3) and resized.dtype == np.uint8
        same = known.get((name, w, h))
        if same is not None and (out / same).read_bytes() == resized.tobytes():
            file = same
        else:
            file = f"resize-pillow{pillow_major()}-{name}-to-{w}x{h}.rgb"
            (out / file).write_bytes(resized.tobytes())
        cases.append(dict(input=name, width=w, height=h, expected=file))
    return dict(pillow=PIL.__version__, cases=cases)


def build(out: Path) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
        smart_resize,
    )

    inputs = {}
    for name, (w, h, seed, noisy) in INPUTS.items():
        file = f"input-{name}.png"
        Image.fromarray(synthetic(w, h, seed, noisy)).save(out / file, optimize=True)
        inputs[name] = dict(file=file, width=w, height=h, seed=seed)
    images = load_inputs(out, inputs)
    for name, (w, h, seed, noisy) in INPUTS.items():
        assert np.array_equal(np.asarray(images[name]), synthetic(w, h, seed, noisy)), name

    cases = []
    for case, (name, cfg) in PROCESSOR_CASES.items():
        image = images[name]
        proc = Qwen2VLImageProcessorPil(**cfg)
        assert proc.backend == "pil"
        got = proc.preprocess(image, return_tensors=None)
        pixel_values = np.asarray(got["pixel_values"])
        grid = [int(v) for v in np.asarray(got["image_grid_thw"]).reshape(-1)]
        assert pixel_values.dtype == np.float32, pixel_values.dtype

        factor = cfg["patch_size"] * cfg["merge_size"]
        h, w = smart_resize(image.height, image.width, factor, cfg["min_pixels"], cfg["max_pixels"])
        resized = np.asarray(image.resize((w, h), resample=BICUBIC))
        by_hand = patchify_by_hand(resized, cfg)
        assert by_hand.tobytes() == pixel_values.tobytes(), f"{case}: transformers used other pixels"
        assert grid == [1, h // cfg["patch_size"], w // cfg["patch_size"]], (case, grid)

        resized_file = f"qwen2vl-{case}.resized.rgb"
        values_file = f"qwen2vl-{case}.pixel_values.f32"
        (out / resized_file).write_bytes(resized.tobytes())
        (out / values_file).write_bytes(pixel_values.astype("<f4").tobytes())
        rows, cols = pixel_values.shape
        cases.append(
            dict(
                name=case,
                input=name,
                config=cfg,
                resized=dict(width=w, height=h, file=resized_file),
                pixel_values=dict(rows=rows, cols=cols, file=values_file),
                image_grid_thw=grid,
            )
        )

    reference = dict(
        format=FORMAT,
        generator="scripts/make-preprocess-reference/run",
        processor_class="transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.Qwen2VLImageProcessorPil",
        resize_call="PIL.Image.Image.resize((width, height), resample=BICUBIC, reducing_gap=None)",
        versions=dict(
            python=".".join(platform.python_version_tuple()[:2]),
            machine=platform.machine(),
            **{p: importlib.metadata.version(p) for p in ("pillow", "numpy", "transformers")},
        ),
        inputs=inputs,
        resize=[resize_cases(out, images, [])],
        processor=cases,
    )
    save(out, reference)


def add_resizes(out: Path) -> None:
    reference = json.loads((out / "reference.json").read_text())
    assert all(s["pillow"] != PIL.__version__ for s in reference["resize"]), "this Pillow is done"
    reference["resize"].append(resize_cases(out, load_inputs(out, reference["inputs"]), reference["resize"]))
    save(out, reference)


def save(out: Path, reference: dict) -> None:
    (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    write_readme(out, reference)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "resize"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (build if args.step == "build" else add_resizes)(args.out)


def write_readme(out: Path, ref: dict) -> None:
    lines = [
        "# preprocess: golden references for btl's image preprocessing",
        "",
        "Generated by `scripts/make-preprocess-reference/run`; do not edit by hand. Expected values",
        f"come from Pillow {' and '.join(s['pillow'] for s in ref['resize'])} (`Image.resize(..., BICUBIC)`) and",
        f"transformers {ref['versions']['transformers']} with Pillow {ref['versions']['pillow']}",
        "(`Qwen2VLImageProcessorPil`, the PIL backend); inputs are synthetic PNGs.",
        "The tests are `tests/preprocess.rs`; `reference.json` lists every case and file.",
        "",
        "| processor case | input | resized (w×h) | grid t,h,w | pixel_values rows×cols |",
        "|---|---|---|---|---|",
    ]
    for c in ref["processor"]:
        i = ref["inputs"][c["input"]]
        lines.append(
            f"| {c['name']} | {i['width']}×{i['height']} | {c['resized']['width']}×{c['resized']['height']} "
            f"| {','.join(map(str, c['image_grid_thw']))} | {c['pixel_values']['rows']}×{c['pixel_values']['cols']} |"
        )
    lines.append("")
    for s in ref["resize"]:
        own = {c["expected"] for c in s["cases"] if c["expected"].startswith(f"resize-pillow{s['pillow'].split('.')[0]}-")}
        lines.append(
            f"Pillow {s['pillow']} resizes: {len(s['cases'])} cases, {len(own)} files of its own "
            "(`resize-pillow*.rgb`, height×width×3 uint8; a result equal to an earlier Pillow's shares its file)."
        )
    lines.append("")
    (out / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
