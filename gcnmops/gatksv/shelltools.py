"""What the Unix tools inside GATK-SV's cn.MOPS scripts do to text, in the C locale: GNU ``sort -V`` and ``-n``
keys, awk's comparisons, ``grep -w -f`` over BRE patterns, bash's ``read``, bedtools' numbers, R's
``as.numeric``. Each function is the one rule the scripts' outputs depend on, nothing more.
"""
from __future__ import annotations

import functools
import math
import re

# --------------------------------------------------------------------------------------------
# GNU sort -V (gnulib filevercmp, coreutils 9.1)
# --------------------------------------------------------------------------------------------


def _isdigit(c: int) -> bool:
    return 48 <= c <= 57


def _isalpha(c: int) -> bool:
    return 65 <= c <= 90 or 97 <= c <= 122


def _prefix_length(s: bytes) -> int:
    """Length of ``s`` without its file suffix, the longest match of ``(\\.[A-Za-z~][A-Za-z0-9~]*)*$``."""
    n, i, prefix = len(s), 0, 0
    while i < n:
        i += 1
        prefix = i
        while i + 1 < n and s[i] == 46 and (_isalpha(s[i + 1]) or s[i + 1] == 126):
            i += 2
            while i < n and (_isalpha(s[i]) or _isdigit(s[i]) or s[i] == 126):
                i += 1
    return prefix


def _order(s: bytes, pos: int) -> int:
    if pos == len(s):
        return -1
    c = s[pos]
    if _isdigit(c):
        return 0
    if _isalpha(c):
        return c
    if c == 126:
        return -2
    return c + 256


def _verrevcmp(a: bytes, b: bytes) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not _isdigit(a[i])) or (j < len(b) and not _isdigit(b[j])):
            ca, cb = _order(a, i), _order(b, j)
            if ca != cb:
                return ca - cb
            i += 1
            j += 1
        while i < len(a) and a[i] == 48:
            i += 1
        while j < len(b) and b[j] == 48:
            j += 1
        while i < len(a) and j < len(b) and _isdigit(a[i]) and _isdigit(b[j]):
            if not first_diff:
                first_diff = a[i] - b[j]
            i += 1
            j += 1
        if i < len(a) and _isdigit(a[i]):
            return 1
        if j < len(b) and _isdigit(b[j]):
            return -1
        if first_diff:
            return first_diff
    return 0


def filevercmp(a: bytes, b: bytes) -> int:
    """GNU version order of two byte strings (negative, 0, positive), as ``sort -V`` compares keys."""
    if not a:
        return -1 if b else 0
    if not b:
        return 1
    if a[:1] == b".":
        if b[:1] != b".":
            return -1
        if a == b".":
            return -1 if b != b"." else 0
        if b == b".":
            return 1
        if a == b"..":
            return -1 if b != b".." else 0
        if b == b"..":
            return 1
    elif b[:1] == b".":
        return 1
    pa, pb = _prefix_length(a), _prefix_length(b)
    result = _verrevcmp(a[:pa], b[:pb])
    if result or (pa == len(a) and pb == len(b)):
        return result
    return _verrevcmp(a, b)


@functools.total_ordering
class VersionKey:
    """A sort key comparing as ``sort -V`` compares its key text."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text.encode("utf-8", "surrogateescape")

    def __eq__(self, other) -> bool:
        return filevercmp(self.text, other.text) == 0

    def __lt__(self, other) -> bool:
        return filevercmp(self.text, other.text) < 0


def version_sorted(names) -> list[str]:
    """``names`` in ``sort -V`` order (ties by bytes, sort's last resort)."""
    return sorted(names, key=lambda s: (VersionKey(s), s.encode("utf-8", "surrogateescape")))


def line_key(line: str) -> bytes:
    """sort's last-resort comparison of whole lines in the C locale: their bytes."""
    return line.encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------------------------
# awk
# --------------------------------------------------------------------------------------------
_AWK_NUMBER = re.compile(r"[ \t\n]*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[ \t\n]*")


def awk_equal(field: str, value: str) -> bool:
    """awk's ``$k == v`` for a field and a ``-v`` variable: as numbers when both look numeric, else as strings."""
    if _AWK_NUMBER.fullmatch(field) and _AWK_NUMBER.fullmatch(value):
        return float(field) == float(value)
    return field == value


def awk_key(text: str) -> tuple:
    """A key under which two texts are equal exactly when ``awk_equal`` says so (a number where it looks like one:
    a strnum equals a string only when both are the same text, and then both are strnums)."""
    return ("n", float(text)) if _AWK_NUMBER.fullmatch(text) else ("s", text)


def awk_looks_numeric(text: str) -> bool:
    """Whether awk takes a field for a number (a "strnum") in comparisons."""
    return bool(_AWK_NUMBER.fullmatch(text))


def awk_number(text: str) -> float:
    """awk's numeric value of a field (its longest numeric prefix after blanks; 0 if none)."""
    m = re.match(r"[ \t\n]*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", text)
    return float(m.group(1)) if m else 0.0


# --------------------------------------------------------------------------------------------
# grep -w -f IDS (BRE patterns)
# --------------------------------------------------------------------------------------------
_POSIX_CLASSES = {"alpha": "A-Za-z", "digit": "0-9", "alnum": "A-Za-z0-9", "upper": "A-Z", "lower": "a-z",
                  "space": r" \t\n\r\f\v", "blank": r" \t", "punct": r"!-/:-@\[-`{-~", "xdigit": "0-9A-Fa-f"}


def _bracket(p: str, i: int) -> tuple[str, int]:
    """The bracket expression of BRE ``p`` opening at ``p[i] == '['`` as a Python class, and the index after it."""
    j = i + 1
    out = "["
    if j < len(p) and p[j] == "^":
        out += "^"
        j += 1
    first = True
    while j < len(p):
        c = p[j]
        if c == "]" and not first:
            return out + "]", j + 1
        if c == "[" and p[j + 1:j + 2] == ":":
            end = p.find(":]", j + 2)
            if end > 0 and p[j + 2:end] in _POSIX_CLASSES:
                out += _POSIX_CLASSES[p[j + 2:end]]
                j = end + 2
                first = False
                continue
        out += "\\" + c if c in "\\[]^" and not (c == "^" and not first) else c
        j += 1
        first = False
    return re.escape(p[i:]), len(p)  # no closing bracket: grep would fail; taken literally


def bre_to_python(p: str) -> str:
    """A POSIX basic regular expression (GNU grep's) as a Python one."""
    out, i = [], 0
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            d = p[i + 1]
            out.append(d if d in "(){}|+?" else "\\" + d if d.isdigit() else re.escape(d))
            i += 2
        elif c == "[":
            cls, i = _bracket(p, i)
            out.append(cls)
        elif c == "*":
            out.append("*" if out and out[-1] not in ("(", "|") else re.escape(c))
            i += 1
        elif c == "^":
            out.append("^" if i == 0 else re.escape(c))
            i += 1
        elif c == "$":
            out.append("$" if i == len(p) - 1 else re.escape(c))
            i += 1
        elif c == ".":
            out.append(".")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def grep_words(lines: list[str], patterns: list[str]) -> list[int]:
    """Indices of the ``lines`` that ``grep -w -f PATTERNS`` prints (an empty pattern matches every line)."""
    if any(p == "" for p in patterns):
        return list(range(len(lines)))
    if not patterns:
        return []
    word = r"[A-Za-z0-9_]"
    rx = re.compile("|".join(f"(?<!{word})(?:{bre_to_python(p)})(?!{word})" for p in patterns))
    return [k for k, line in enumerate(lines) if rx.search(line)]


# --------------------------------------------------------------------------------------------
# bash
# --------------------------------------------------------------------------------------------


def bash_read(line: str) -> str:
    """What ``read VAR`` (no -r, default IFS) stores of one line: blanks trimmed, backslashes removed."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            out.append(line[i + 1])
            i += 2
        elif line[i] == "\\":
            i += 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out).strip(" \t\n")


# --------------------------------------------------------------------------------------------
# numbers: bedtools 2.30 (map -o sum) and R (as.numeric)
# --------------------------------------------------------------------------------------------
_BEDTOOLS_CHARS = set("0123456789.-+eE")
_STRTOD_PREFIX = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def bedtools_number(text: str) -> float:
    """A cell's value to ``bedtools map -o sum``: NaN when bedtools calls it non-numeric (empty, a single
    non-digit, a character outside ``0-9.-+eE``), else C's atof of it (its longest numeric prefix, 0 if none)."""
    if not text or any(c not in _BEDTOOLS_CHARS for c in text) or (len(text) == 1 and not text.isdigit()):
        return math.nan
    m = _STRTOD_PREFIX.match(text)
    return float(m.group(0)) if m else 0.0


def bedtools_sum_text(value: float) -> str:
    """A sum as ``bedtools map -o sum`` prints it (C++ stream, precision 10); "." for a non-numeric window."""
    if math.isnan(value):
        return "."
    text = f"{value:.10g}"
    return "0" if text == "-0" else text


_R_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_R_HEX = re.compile(r"([-+]?)0[xX]([0-9A-Fa-f]+)")


def r_number(text: str) -> float:
    """R's ``as.numeric`` of one string (NaN for NA: not a number, or "NA")."""
    t = text.strip(" \t\n\r\f\v")
    if _R_DECIMAL.fullmatch(t):
        return float(t)
    m = _R_HEX.fullmatch(t)
    if m:
        return float(int(m.group(2), 16)) * (-1.0 if m.group(1) == "-" else 1.0)
    low = t.lstrip("+-").lower()
    if low in ("inf", "infinity"):
        return -math.inf if t.startswith("-") else math.inf
    return math.nan


__all__ = ["filevercmp", "VersionKey", "version_sorted", "line_key", "awk_equal", "awk_key", "awk_looks_numeric", "awk_number", "bre_to_python",
           "grep_words", "bash_read", "bedtools_number", "bedtools_sum_text", "r_number"]
