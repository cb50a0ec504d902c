"""Text hygiene for everything a writer controls (pure functions, no I/O).

Two jobs, kept apart on purpose:

- *Cleaning* changes what is stored: control characters (other than newline and tab) and every
  character that renders as nothing or hides text are removed, by the Unicode standard's categories
  rather than a hand-kept list (`invisible`): format characters (Cf: zero-width, bidi overrides,
  soft hyphen, BOM, tags, the Egyptian and shorthand format controls, musical-symbol begin/end
  marks), private-use (Co) and unassigned (Cn) code points, lone surrogates, variation selectors
  (VS1–256 and Mongolian FVS: a payload fits in U+E0100…) and the other default-ignorable letters
  (Hangul fillers, CGJ, Khmer inherent vowels). Emoji keep what makes them emoji: a ZWJ between two
  pictographs, VS15/VS16 after a symbol and before a keycap. U+2800 BRAILLE PATTERN BLANK renders as
  a blank cell and is the usual filler of "invisible" text: it is stored as a plain space (braille
  prose keeps its word breaks, nothing hides in it). Line endings become `\n`. Titles, tags and
  keywords are also NFKC-normalised and folded onto one line, because they are rendered as labels;
  bodies keep their own spelling (code and prose as written).
- *Folding* never changes what is stored: it is the view the lint and the secret gate read, where
  compatibility forms (fullwidth, ligatures, circled letters), combining marks and invisible
  characters collapse, and each remaining non-ASCII letter is replaced by its UTS #39 skeleton
  prototype when that is ASCII (`skeleton_char`), from the Unicode confusables data that
  `confusable-homoglyphs` ships — Armenian "օ", Cherokee "Ꭵ", small capitals "ɪɢɴᴏʀᴇ", Cyrillic and
  Greek alike — so an obfuscated "ignore previous instructions" reads the same as the plain one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

from confusable_homoglyphs.confusables import confusables_data

# Cc (controls) except \n and \t; \r is turned into \n first.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
_STRIPPED_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Cs"})
# Default_Ignorable_Code_Point letters and marks that are not Cf (DerivedCoreProperties.txt:
# Other_Default_Ignorable_Code_Point and Variation_Selector); the property itself is not in `unicodedata`.
_VARIATION_SELECTORS = frozenset(
    [*range(0x180B, 0x180E), 0x180F, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)
_OTHER_IGNORABLE = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0})
_ZWJ, _VS15, _VS16, _KEYCAP = "\u200d", "\ufe0e", "\ufe0f", "\u20e3"
_BRAILLE_BLANK = "\u2800"
_SKIN_TONES = range(0x1F3FB, 0x1F400)


@lru_cache(maxsize=4096)
def invisible(ch: str) -> bool:
    """Whether `ch` renders as nothing (or hides text) by its Unicode properties, context aside."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in _STRIPPED_CATEGORIES
        or cp in _VARIATION_SELECTORS
        or cp in _OTHER_IGNORABLE
    )


def _pictograph(ch: str) -> bool:
    return unicodedata.category(ch) == "So" or ord(ch) in _SKIN_TONES


def _keeps(text: str, i: int) -> bool:
    """An invisible at `i` that is part of an emoji sequence (ZWJ between pictographs, VS15/16 after one)."""
    ch = text[i]
    prev = text[i - 1] if i else ""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if ch == _ZWJ:
        return bool(prev) and bool(nxt) and (_pictograph(prev) or prev == _VS16) and _pictograph(nxt)
    if ch in (_VS15, _VS16):
        return bool(prev) and (_pictograph(prev) or nxt == _KEYCAP)
    return False


_TABLE_MAX = 1 << 16


class _Table(dict[int, str | None]):
    """A `str.translate` table filled on first sight of each code point (the loop stays in C)."""

    def __init__(self, fill: Callable[[str], str | None]) -> None:
        super().__init__()
        self.fill = fill

    def __missing__(self, cp: int) -> str | None:
        if len(self) >= _TABLE_MAX:  # a text of every code point must not grow it without bound
            self.clear()
        out = self[cp] = self.fill(chr(cp))
        return out


_DROP_INVISIBLE = _Table(lambda ch: None if invisible(ch) else ch)
_EMOJI_GLUE = frozenset({_ZWJ, _VS15, _VS16})


def strip_invisible(text: str) -> str:
    """`text` without invisible characters (emoji sequences kept whole); U+2800 becomes a space."""
    if text.isascii():
        return text
    text = text.replace(_BRAILLE_BLANK, " ")
    if _EMOJI_GLUE.isdisjoint(text):
        return text.translate(_DROP_INVISIBLE)
    return "".join(ch for i, ch in enumerate(text) if not invisible(ch) or _keeps(text, i))


@lru_cache(maxsize=65536)
def skeleton_char(ch: str) -> str:
    """The ASCII prototype `ch` is confusable with per the UTS #39 data, else `ch` (pure, cached).

    The data lists each confusables.txt line both ways (source → prototype and back), so a source's
    one entry is its prototype. Some prototypes are themselves non-Latin (small capital A → Cherokee
    GO); the walk follows prototypes and capitals (Cherokee small GO → CHEROKEE LETTER GO → "A") a few steps
    until it reaches ASCII. A Latin letter the data leaves out is read off its Unicode name.
    """
    if ch.isascii():
        return ch
    seen: set[str] = set()
    frontier = [ch]
    for _ in range(4):
        step: list[str] = []
        for x in frontier:
            if x in seen:
                continue
            seen.add(x)
            entries = [str(e["c"]) for e in confusables_data.get(x, ())]
            for t in entries:
                if t.isascii() and any(c.isalnum() for c in t):
                    return t
            step += [t for t in entries if len(t) == 1]
            upper = x.upper()  # lower case is no look-alike of upper (σ looks like o, Σ does not)
            step += [upper] if len(upper) == 1 and upper != x else []
        frontier = step
    m = _LATIN_NAME.match(unicodedata.name(ch, ""))
    return m.group(1) if m else ch


# Latin letters the confusables data leaves out (small capitals such as U+0274 ɴ), read off their
# Unicode names: "LATIN LETTER SMALL CAPITAL N" is an N.
_LATIN_NAME = re.compile(
    r"^LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL |DOTLESS )?([A-Z])(?: WITH .+)?$"
)


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_nul(text: str) -> bool:
    return "\x00" in text


def has_surrogate(text: str) -> bool:
    return bool(_SURROGATE.search(text))


def clean_text(text: str) -> str:
    """Stored form of a multi-line text: `\\n` line endings, no controls but tab, no invisible characters."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    return strip_invisible(_CONTROLS.sub("", text))


def one_line(text: str, limit: int | None = None) -> str:
    """Stored form of a label (title, tag, keyword): NFKC, cleaned, every whitespace run one space."""
    text = unicodedata.normalize("NFKC", clean_text(text))
    text = _SPACES.sub(" ", text).strip()
    return text[:limit] if limit is not None else text


def fold(text: str) -> str:
    """The lint's and gate's view: NFKC, invisibles gone, accents stripped, look-alikes on their skeleton."""
    text = clean_text(text)
    if text.isascii():
        return text
    # the skeleton reads canonical forms (UTS #39: NFD, map, NFD); compatibility forms (fullwidth,
    # mathematical letters) are decomposed after, and what that makes is mapped once more
    text = _skeleton(unicodedata.normalize("NFD", text))
    return _skeleton(unicodedata.normalize("NFKD", text))


_SKELETON = _Table(lambda ch: None if unicodedata.combining(ch) else skeleton_char(ch))


def _skeleton(text: str) -> str:
    """Combining marks dropped, every other character on its ASCII prototype (where it has one)."""
    return text.translate(_SKELETON)


def longest_backtick_run(*texts: str) -> int:
    """The longest run of backticks in any of `texts` as written, NFC- or NFKC-normalised.

    A renderer or tokenizer may normalise before a model reads the text: U+1FEF GREEK VARIA becomes a
    backtick under NFC, U+FF40 FULLWIDTH GRAVE ACCENT under NFKC. A fence must outlast those runs too.
    """
    runs = [
        len(m)
        for t in texts
        for form in {t, unicodedata.normalize("NFC", t), unicodedata.normalize("NFKC", t)}
        for m in re.findall(r"`+", form)
    ]
    return max(runs, default=0)
