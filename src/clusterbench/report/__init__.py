"""Reports: what a stored run looks like outside clusterbench (export formats; soon HTML)."""
