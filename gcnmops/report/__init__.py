"""What people look at: the plots of a result (``plots``: cn.mops's plot, segplot, a genome overview) and the
one-page HTML report (``page``: ``run --report``). Above the pipeline: it reads results and their files."""
from .page import report_html, write_report

__all__ = ["write_report", "report_html"]
