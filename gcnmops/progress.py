"""A stage-level progress bar (tqdm) for long runs."""
from __future__ import annotations

from tqdm import tqdm


class Progress:
    """Context manager showing named pipeline stages as they finish (on stderr)."""

    def __init__(self, stages: list[str], disable: bool = False) -> None:
        self._bar = tqdm(total=len(stages), desc="gcnmops", unit="stage", disable=disable, leave=False)

    def advance(self, stage: str) -> None:
        self._bar.set_postfix_str(f"{stage} done")
        self._bar.update(1)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self._bar.close()
