"""``gcnmops.plots``, the name users import the plots by: the module is ``gcnmops.report.plots``."""
from .report.plots import *  # noqa: F401,F403
from .report.plots import __all__  # noqa: F401
