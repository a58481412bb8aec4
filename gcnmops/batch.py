"""``gcnmops.batch``, the name users import the batch runner by: the module is ``gcnmops.pipeline.batch``."""
from .pipeline.batch import *  # noqa: F401,F403
from .pipeline.batch import __all__  # noqa: F401
