"""Prints scripts/bench/screenshot-readability's table: how much of the
text on virtual-phone screenshots is still legible after the agent's resize
to each screenshot budget (max_pixels).

The reader is Tesseract, not our model: a proxy for whether the pixels
still hold the letters (a text it misses may still be readable to a model
trained on this font, so the figures compare budgets, not models). Each
text node of each recorded screen (its UI tree says the text and where it
is) is cut out of the screenshot resized as the agent resizes it
(Qwen2.5-VL's smart_resize, Pillow 12's bicubic), scaled back by the
same factors (bicubic again, so Tesseract sees letters of one size at
every budget and only the detail lost differs), and read. Full resolution is the control:
what Tesseract misses there (accents, icons) it misses everywhere.

A text counts as read when its normalised form is a substring of what
Tesseract returns for its box; `similar` is the mean best-line
difflib ratio, which also credits near misses ("Hiro Muller" for "Hiro
Müller").

Usage: python screenshot_readability.py BUDGETS EPISODE_DIR...
"""

import difflib
import io
import math
import os
import re
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from collections import defaultdict

from PIL import Image, ImageOps

PATCH_MERGE = 28  # a vision token covers 28 x 28 pixels: 14-pixel patches, 2 x 2 merged
MIN_PIXELS = 56 * 56
MIN_CHARS, MAX_CHARS = 2, 48  # the texts a goal names (tap_text.rs's bounds)
MIN_SIDE = 8
BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def smart_resize(width, height, max_pixels):
    """Qwen2.5-VL's image processor: each side a multiple of 28, the area at
    most max_pixels, the aspect ratio kept as nearly as that allows."""
    h = max(PATCH_MERGE, round(height / PATCH_MERGE) * PATCH_MERGE)
    w = max(PATCH_MERGE, round(width / PATCH_MERGE) * PATCH_MERGE)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(PATCH_MERGE, math.floor(height / beta / PATCH_MERGE) * PATCH_MERGE)
        w = max(PATCH_MERGE, math.floor(width / beta / PATCH_MERGE) * PATCH_MERGE)
    elif h * w < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h = math.ceil(height * beta / PATCH_MERGE) * PATCH_MERGE
        w = math.ceil(width * beta / PATCH_MERGE) * PATCH_MERGE
    return w, h


def normalise(text):
    text = unicodedata.normalize("NFC", text).casefold()
    return " ".join(text.split())


def texts(xml_path, width, height):
    """The one-line texts a goal could name, with their bounds, each once
    per screen (a text shown twice is left out, as tap-text leaves it)."""
    seen = defaultdict(list)
    for node in ET.parse(xml_path).iter("node"):
        text = node.get("text", "")
        m = BOUNDS.fullmatch(node.get("bounds", ""))
        if not m or "\n" in text or not MIN_CHARS <= len(text.strip()) <= MAX_CHARS:
            continue
        x1, y1, x2, y2 = map(int, m.groups())
        if x1 < 0 or y1 < 0 or x2 > width or y2 > height:
            continue
        if x2 - x1 < MIN_SIDE or y2 - y1 < MIN_SIDE:
            continue
        seen[text].append((x1, y1, x2, y2))
    return [(t, boxes[0]) for t, boxes in seen.items() if len(boxes) == 1]


def ocr(image):
    png = io.BytesIO()
    image.save(png, format="PNG")
    out = subprocess.run(
        ["tesseract", "stdin", "stdout", "--psm", "6", "-l", "eng"],
        input=png.getvalue(), capture_output=True, check=True,
    )
    return out.stdout.decode("utf-8", "replace")


def crop_at(screen, resized, box):
    """The box (rounded outward to whole pixels) cut from the resized
    screenshot and scaled back by the resize's own factors, with a margin of its own corner colour (Tesseract
    misreads glyphs that touch the border)."""
    sx = resized.width / screen.width
    sy = resized.height / screen.height
    x1, y1, x2, y2 = box
    small = resized.crop((math.floor(x1 * sx), math.floor(y1 * sy),
                          math.ceil(x2 * sx), math.ceil(y2 * sy)))
    back = small.resize((max(1, round(small.width / sx)), max(1, round(small.height / sy))),
                        Image.BICUBIC)
    return ImageOps.expand(back, border=16, fill=back.getpixel((0, 0)))


def main():
    budgets = [int(b) for b in sys.argv[1].split(",")]
    dirs = sys.argv[2:]
    rows = defaultdict(lambda: {"n": 0, "read": defaultdict(int), "similar": defaultdict(float)})
    size = None
    for root in dirs:
        for episode in sorted(os.listdir(root)):
            path = os.path.join(root, episode)
            if not os.path.isdir(path):
                continue
            template = re.sub(r"-(heldout|train-open|train|validation)-s\d+$", "", episode)
            for name in sorted(os.listdir(path)):
                if not name.endswith(".xml"):
                    continue
                screen = Image.open(os.path.join(path, name[:-4] + ".png")).convert("RGB")
                size = screen.size
                sized = {0: screen}
                for budget in budgets:
                    w, h = smart_resize(screen.width, screen.height, budget)
                    sized[budget] = screen.resize((w, h), Image.BICUBIC)
                for text, box in texts(os.path.join(path, name), screen.width, screen.height):
                    want = normalise(text)
                    for key in (template, "all"):
                        rows[key]["n"] += 1
                    for budget, resized in sized.items():
                        got = ocr(crop_at(screen, resized, box))
                        lines = [normalise(l) for l in got.splitlines() if l.strip()]
                        hit = want in normalise(got)
                        best = max((difflib.SequenceMatcher(None, want, l).ratio() for l in lines),
                                   default=0.0)
                        for key in (template, "all"):
                            rows[key]["read"][budget] += hit
                            rows[key]["similar"][budget] += best

    if size is None or not rows:
        sys.exit("screenshot_readability: no screen with a text to read in " + " ".join(dirs))
    width, height = size
    header = ["texts", f"full {width}x{height}"]
    for budget in budgets:
        w, h = smart_resize(width, height, budget)
        header.append(f"{budget} ({w}x{h}, {w // PATCH_MERGE * (h // PATCH_MERGE)} tokens)")
    print("| template | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 1) + "|")
    keys = sorted(k for k in rows if k != "all") + ["all"]
    for key in keys:
        r = rows[key]
        cells = [str(r["n"])]
        for budget in [0] + budgets:
            read, n = r["read"][budget], r["n"]
            cells.append(f"{read}/{n} = {100 * read / n:.0f}% read, similar {r['similar'][budget] / n:.2f}")
        name = "**all**" if key == "all" else key
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
