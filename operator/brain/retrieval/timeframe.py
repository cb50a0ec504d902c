"""Time in the question: "last week", "in May", "before the migration" as a window over `valid_from`.

A question that names a time asks about what was recorded (or true) then, and the legs know nothing
of time: "what did we decide last week about retries" ranks an old retry note as high as the new
one. This module only reads the question; the pipeline applies the result (a boost for memories in
the window, and for "before X" the version valid just before X). Pure: `now` is an argument.

Recognised, case-insensitively:
- relative days and periods: today, yesterday, last/this/past week|month|year, last N days|weeks|months,
  N days|weeks|months ago, recently;
- months and years: "in May", "in May 2025", "in 2024", "since March", "since 2024";
- ordering: "before <phrase>", "after <phrase>", where the phrase is a date ("before June 2025") or a
  named event ("before the migration", "before Linear"), left to the caller to place in time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}
_NUM = r"(\d{1,3}|a|an|one|two|three|four|five|six|ten)"

_LAST_N = re.compile(rf"\b(?:last|past|previous)\s+{_NUM}\s+(day|week|month|year)s?\b(?!\s+of\b)", re.I)
_N_AGO = re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.I)
_LAST_UNIT = re.compile(r"\b(last|this|past|previous)\s+(week|month|year)\b(?!\s+of\b)", re.I)
_DAY = re.compile(r"\b(today|yesterday|recently|lately)\b", re.I)
_MONTH_YEAR = re.compile(rf"\b(in|during|of|since|until|by)\s+({_MONTH})\.?(?:\s+(\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(in|during|of|since|until|by)\s+((?:19|20)\d{2})\b", re.I)
_ORDER = re.compile(r"\b(before|after|prior to)\s+(.+?)\s*(?:[?.!,;]|$)", re.I)


@dataclass(frozen=True)
class TimeFrame:
    """What the question says about time. `start`/`end` bound `valid_from` (either may be open);
    `anchor` is an event to place in time first ("before the migration": anchor "the migration",
    relation "before"), and `phrase` is the text that said it (for logs and tests)."""

    phrase: str
    start: datetime | None = None
    end: datetime | None = None
    anchor: str | None = None
    relation: str | None = None  # "before" | "after", with an anchor or a date

    def contains(self, when: datetime) -> bool:
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _next_month(d: datetime) -> datetime:
    return _month_start(d.year + (d.month == 12), d.month % 12 + 1)


def _day_start(d: datetime) -> datetime:
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_window(month: int, year: str | None, now: datetime) -> tuple[datetime, datetime]:
    """ "in May" without a year means the latest May that has begun (asked in March: last year's)."""
    y = int(year) if year else (now.year if month <= now.month else now.year - 1)
    start = _month_start(y, month)
    return start, _next_month(start)


def _date_phrase(text: str, now: datetime) -> tuple[datetime, datetime] | None:
    """A phrase that is itself a date ("June 2025", "May", "2024"), as a window; else None."""
    t = text.strip().lower().removeprefix("the ")
    m = re.fullmatch(rf"({_MONTH})\.?(?:\s+(\d{{4}}))?", t)
    if m:
        return _month_window(MONTHS[m.group(1)], m.group(2), now)
    m = re.fullmatch(r"((?:19|20)\d{2})", t)
    if m:
        y = int(m.group(1))
        return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
    if t in ("today", "yesterday"):
        d = _day_start(now) - timedelta(days=t == "yesterday")
        return d, d + timedelta(days=1)
    return None


def parse(query: str, now: datetime) -> TimeFrame | None:
    """The first time expression in the question, resolved against `now`; None when there is none."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    m = _ORDER.search(query)
    if m:
        relation = "after" if m.group(1).lower() == "after" else "before"
        target = m.group(2).strip()
        window = _date_phrase(target, now)
        if window:
            start, end = (None, window[0]) if relation == "before" else (window[1], None)
            return TimeFrame(m.group(0).strip(" ?.!,;"), start=start, end=end, relation=relation)
        # "before that", "before I deploy": no event to place; an anchor needs a content word.
        words = re.findall(r"[a-z0-9][\w.-]*", target.lower())
        if words and words[0] not in {"that", "this", "it", "i", "we", "you", "they", "merging", "deploying"}:
            return TimeFrame(m.group(0).strip(" ?.!,;"), anchor=target, relation=relation)
    m = _LAST_N.search(query)
    if m:
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        return TimeFrame(m.group(0), start=now - timedelta(days=days), end=now)
    m = _N_AGO.search(query)
    if m:
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        centre = now - timedelta(days=days)
        half = timedelta(days=max(1, days // 4))  # "three weeks ago" is roughly, not exactly, 21 days
        return TimeFrame(m.group(0), start=centre - half, end=centre + half)
    m = _LAST_UNIT.search(query)
    if m:
        which, unit = m.group(1).lower(), m.group(2).lower()
        today = _day_start(now)
        if unit == "week":
            this_start = today - timedelta(days=today.weekday())
            span = (this_start - timedelta(days=7), this_start)
        elif unit == "month":
            this_start = _month_start(now.year, now.month)
            prev = _month_start(now.year - (now.month == 1), (now.month - 2) % 12 + 1)
            span = (prev, this_start)
        else:
            this_start = datetime(now.year, 1, 1, tzinfo=UTC)
            span = (datetime(now.year - 1, 1, 1, tzinfo=UTC), this_start)
        if which == "this":
            return TimeFrame(m.group(0), start=this_start, end=now)
        if which == "past":
            return TimeFrame(m.group(0), start=now - timedelta(days=_UNIT_DAYS[unit]), end=now)
        return TimeFrame(m.group(0), start=span[0], end=span[1])
    m = _DAY.search(query)
    if m:
        word = m.group(1).lower()
        today = _day_start(now)
        if word == "today":
            return TimeFrame(m.group(0), start=today, end=now)
        if word == "yesterday":
            return TimeFrame(m.group(0), start=today - timedelta(days=1), end=today)
        return TimeFrame(m.group(0), start=now - timedelta(days=14), end=now)
    m = _MONTH_YEAR.search(query)
    if m:
        start, end = _month_window(MONTHS[m.group(2).lower()], m.group(3), now)
        return _with_preposition(m.group(0), m.group(1), start, end)
    m = _YEAR.search(query)
    if m:
        y = int(m.group(2))
        start, end = datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
        return _with_preposition(m.group(0), m.group(1), start, end)
    return None


def _with_preposition(phrase: str, word: str, start: datetime, end: datetime) -> TimeFrame:
    word = word.lower()
    if word == "since":
        return TimeFrame(phrase, start=start)
    if word in ("until", "by"):
        return TimeFrame(phrase, end=end)
    return TimeFrame(phrase, start=start, end=end)
