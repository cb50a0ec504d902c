"""Text hygiene for everything a writer controls (pure functions, no I/O).

Two jobs, kept apart on purpose:

- *Cleaning* changes what is stored: control characters (other than newline and tab) and invisible
  format characters (zero-width, bidi overrides, soft hyphen, BOM) are removed, line endings become
  `\n`. Titles, tags and keywords are also NFKC-normalised and folded onto one line, because they
  are rendered as labels; bodies keep their own spelling (code and prose as written).
- *Folding* never changes what is stored: it is the view the lint and the secret gate read, where
  compatibility forms (fullwidth, ligatures, circled letters), look-alike letters from Cyrillic and
  Greek, combining marks and invisible characters all collapse to plain ASCII-ish text, so an
  obfuscated "ignore previous instructions" reads the same as the plain one.
"""

from __future__ import annotations

import re
import unicodedata

# Cc (controls) except \n and \t; \r is turned into \n first.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Invisible "format" characters and friends that render as nothing (or reorder text) in a prompt,
# and lone surrogates (JSON can carry them, UTF-8 storage cannot).
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e007f\ud800-\udfff]"
)
_SPACES = re.compile(r"\s+")

# Letters that look like Latin ones (Cyrillic, Greek, a few others); NFKC does not map these.
_CONFUSABLES = str.maketrans(
    {
        # Cyrillic lower
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "з": "3",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "ѕ": "s",
        "ԁ": "d",
        "ԛ": "q",
        "ԝ": "w",
        "ɡ": "g",
        "һ": "h",
        "ӏ": "l",
        # Cyrillic upper
        "А": "A",
        "В": "B",
        "Е": "E",
        "Ё": "E",
        "І": "I",
        "Ї": "I",
        "Ј": "J",
        "К": "K",
        "М": "M",
        "Н": "H",
        "О": "O",
        "Р": "P",
        "С": "C",
        "Т": "T",
        "У": "Y",
        "Х": "X",
        "Ѕ": "S",
        "Ԁ": "D",
        "Ԛ": "Q",
        "Ԝ": "W",
        "Ӏ": "I",
        # Greek
        "α": "a",
        "β": "b",
        "ε": "e",
        "ι": "i",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        "ω": "w",
        "Α": "A",
        "Β": "B",
        "Ε": "E",
        "Ζ": "Z",
        "Η": "H",
        "Ι": "I",
        "Κ": "K",
        "Μ": "M",
        "Ν": "N",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Υ": "Y",
        "Χ": "X",
        # Latin look-alikes outside ASCII
        "ı": "i",
        "ȷ": "j",
        "ℓ": "l",
        "ſ": "s",
        "ꓲ": "I",
    }
)


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_nul(text: str) -> bool:
    return "\x00" in text


def has_surrogate(text: str) -> bool:
    return bool(_SURROGATE.search(text))


def clean_text(text: str) -> str:
    """Stored form of a multi-line text: `\\n` line endings, no controls but tab, no invisible characters."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    return _INVISIBLE.sub("", _CONTROLS.sub("", text))


def one_line(text: str, limit: int | None = None) -> str:
    """Stored form of a label (title, tag, keyword): NFKC, cleaned, every whitespace run one space."""
    text = unicodedata.normalize("NFKC", clean_text(text))
    text = _SPACES.sub(" ", text).strip()
    return text[:limit] if limit is not None else text


def fold(text: str) -> str:
    """The lint's and gate's view: NFKC, invisibles gone, look-alikes mapped, accents stripped."""
    text = unicodedata.normalize("NFKC", clean_text(text)).translate(_CONFUSABLES)
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))
