"""Reading read-count matrices (and, elsewhere in this package, writing results).

``read_counts(path_or_obj)`` accepts a file (``.tsv``/``.txt``/``.csv``, optionally compressed,
``.parquet``, ``.npz``/``.npy``, ``.rds``), a numpy array, a pandas DataFrame, an rpy2 R object or a
``CountData`` and returns a validated :class:`gcnmops.data.CountData`.
"""
from .columns import count_data_from_array, count_data_from_frame
from .readers import SUPPORTED_EXTENSIONS, read_counts

__all__ = ["read_counts", "count_data_from_array", "count_data_from_frame", "SUPPORTED_EXTENSIONS"]
