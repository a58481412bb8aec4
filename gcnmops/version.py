"""The package's version: the one place it is written (pyproject.toml reads it for the package's metadata;
``gcnmops.__version__``, ``gcnmops --version``, params.json and the VCF header read it from here)."""

__version__ = "0.1.0"
