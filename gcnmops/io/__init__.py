"""Reading the inputs: read-count matrices, count stores, R objects (results are
written by ``gcnmops.outputs``).

``read_counts(path_or_obj)`` accepts a file (``.tsv``/``.txt``/``.csv``, optionally compressed,
``.parquet``, ``.npz``/``.npy``, ``.rds``), a numpy array, a pandas DataFrame, an rpy2 R object or a
``CountData`` and returns a validated :class:`gcnmops.data.CountData`.

The names below are imported from their modules on first use: importing a light module of this package (e.g.
``io.atomic``, which the writers use) does not load the readers and pandas.
"""
from typing import TYPE_CHECKING

from ..compat import lazy_exports

_EXPORTS = {
    "read_counts": ".readers",
    "SUPPORTED_EXTENSIONS": ".readers",
    "count_data_from_array": ".columns",
    "count_data_from_frame": ".columns",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:
    from .columns import count_data_from_array, count_data_from_frame
    from .readers import SUPPORTED_EXTENSIONS, read_counts
