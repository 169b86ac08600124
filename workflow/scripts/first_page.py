"""Write the report's first page (Markdown and reStructuredText) from the run's own files."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.report import outputs

params = {key: value for key, value in snakemake.params.items() if key not in ("code", "published")}
outputs.write_first_page(dict(snakemake.input.items()), snakemake.output.md, snakemake.output.rst, **params)
