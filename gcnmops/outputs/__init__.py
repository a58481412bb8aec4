"""Writing results: the files of a run (``write_result``: the call tables, the per-region matrices, BED, VCF,
SEG, .rds, all renamed together), reading a written folder back (``read_result``), the result store of a
streamed run, and results to and from R objects.

The names below are imported from their modules on first use: importing a light module of this package (e.g.
``outputs.formats`` for the command line's help) does not load the writers and pandas.
"""
from typing import TYPE_CHECKING

from ..compat import lazy_exports

_EXPORTS = {
    "write_result": ".writers",
    "read_result": ".results",
    "FORMATS": ".formats",
    "DEFAULT_FORMATS": ".formats",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:
    from .formats import DEFAULT_FORMATS, FORMATS
    from .results import read_result
    from .writers import write_result
