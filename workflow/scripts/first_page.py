"""Write the report's first page (Markdown and reStructuredText) from the run's own files."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/warm.py)
from icl_gd.runtime import log_to

log_to(snakemake.log[0])
from icl_gd import report

params = {key: value for key, value in snakemake.params.items() if key not in ("code", "published")}
report.write_first_page(dict(snakemake.input.items()), snakemake.output.md, snakemake.output.rst, **params)
