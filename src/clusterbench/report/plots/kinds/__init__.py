"""The plot kinds of the report, one file each (loaded by :mod:`clusterbench.report.plots`, in any
order: a kind's ``order`` places it in the page)."""
