"""Case mode: a reference cohort fitted once and stored (``build_reference``, ``Reference.save``,
``load_reference``), new samples called against it (``call_samples``, frozen or refit), and sex chromosomes
modelled per sex (``sex_aware=True``). Sits above the pipeline: it reuses cn_mops's stages and the EM's E-step."""
from .api import build_reference, call_samples, sex_aware_cn_mops
from .reference import FORMAT_VERSION, Reference, load_reference

__all__ = ["build_reference", "call_samples", "sex_aware_cn_mops", "load_reference", "Reference", "FORMAT_VERSION"]
