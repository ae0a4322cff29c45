"""Text drawn as an RGB image: what a text env's `render_mode="rgb_array"` returns.

stable-baselines3's `make_vec_env` creates every env with `render_mode="rgb_array"` (for video
recording), so a text env that refused it could not be used there with default settings. The image is
the same transcript `"ansi"` returns, drawn in Pillow's built-in bitmap font, black on white: the last
`max_lines` wrapped lines (the newest turns), so the size stays fixed within an episode.
"""

from __future__ import annotations

import textwrap

import numpy as np

from searchgym.errors import ConfigError

WIDTH_CHARS = 100
MAX_LINES = 40
_CHAR_W, _LINE_H, _MARGIN = 6, 12, 4


def require_pillow() -> None:
    """ConfigError unless Pillow (needed to draw text) is installed; called when the env is created."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise ConfigError("render_mode='rgb_array' draws the transcript with Pillow: pip install pillow "
                          "(stable-baselines3's extra brings it), or use render_mode='ansi' or None") from None


def text_to_rgb(text: str, *, width_chars: int = WIDTH_CHARS, max_lines: int = MAX_LINES) -> np.ndarray:
    """`text` wrapped to `width_chars` and drawn as a (H, W, 3) uint8 image of fixed size."""
    from PIL import Image, ImageDraw, ImageFont

    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, width_chars) or [""])
    lines = lines[-max_lines:]
    size = (2 * _MARGIN + width_chars * _CHAR_W, 2 * _MARGIN + max_lines * _LINE_H)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    for i, line in enumerate(lines):
        # The bitmap font covers Latin-1; other characters are drawn as '?'.
        safe = line.encode("latin-1", "replace").decode("latin-1")
        draw.text((_MARGIN, _MARGIN + i * _LINE_H), safe, fill="black", font=font)
    return np.asarray(image, dtype=np.uint8)
