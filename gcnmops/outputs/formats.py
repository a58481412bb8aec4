"""The output formats a run writes, by name, and the check of the names a user gives (the writers themselves are
outputs.writers's): importable without pandas, so that the command line's help and option checks stay light."""
from __future__ import annotations

from ..errors import InputError

#: every output format (outputs.writers's docstring says what each writes)
FORMATS = ("parquet", "tsv", "tsv.gz", "bed", "vcf", "seg", "rds", "tracks")
#: written when no formats are named
DEFAULT_FORMATS = ("parquet", "bed", "vcf", "seg")


def check_formats(formats) -> tuple[str, ...]:
    """The formats to write (``DEFAULT_FORMATS`` for None), validated: an InputError names unknown ones."""
    if formats is None:
        return DEFAULT_FORMATS
    formats = tuple(dict.fromkeys(str(f).strip().lower() for f in formats if str(f).strip()))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        import difflib

        hints = [f"'{u}' (did you mean '{m[0]}'?)" if (m := difflib.get_close_matches(u, FORMATS, n=1)) else f"'{u}'"
                 for u in unknown]
        raise InputError(f"Unknown output format {', '.join(hints)}; choose from {', '.join(FORMATS)}.")
    if not formats:
        raise InputError(f"No output format named; choose from {', '.join(FORMATS)}.")
    return formats
