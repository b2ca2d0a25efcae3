"""Paper-ready reports from run directories: tables (Markdown, LaTeX, CSV), plotly figures
(interactive and static), `report.md`, a self-contained `report.html` and `report.tex`."""

from analysis.report.build import FORMATS, ReportError, ReportResult, build_report

__all__ = ["FORMATS", "ReportError", "ReportResult", "build_report"]
