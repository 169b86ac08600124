"""What a job executes of the config's vocabulary: a task's spec, the names of the settings, the
config error.

The jobs that make data, models and caches execute what their parameters say (the resolved task
spec, the run spec of ``plan.run_spec``), which Snakemake's params trigger compares; the code that
resolved those parameters from the config (``config/resolve.py``, ``plan.py``) is no part of a job's code
checksum, so that an edit of the planning that leaves every spec as it was reruns nothing
(``workflow/rules/common.smk``). This module holds what those jobs do execute of it, and
``config/resolve.py`` re-exports it. It imports nothing else of the package.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field

# Settings that evaluate the model as it is; every other setting names a training method.
# ``icl_switched`` is ICL on label-switched demonstrations (paper 002), the counterpart of a
# method with ``demo_labels: switched``. ``icl_permuted`` (:data:`PERMUTED_SETTING`) is ICL on
# demonstrations whose labels are permuted consistently (``data.splits.permute_labels``): no
# method's counterpart, but the claims' premise's test that the model follows its demonstrations'
# labels (``metrics.premise``).
PERMUTED_SETTING = "icl_permuted"
# ``icl_novel`` (:data:`NOVEL_SETTING`): ICL with label words the protocol never uses, drawn from the
# tokenizer's held-out pool (``data.label_pools``), the query read among them: whether the model
# follows label words it never saw as labels (Wei et al. 2023); read beside the premise.
NOVEL_SETTING = "icl_novel"
# the premise's ICL settings on other labels, which run wherever it reads a task and seed
LABEL_TESTS = (PERMUTED_SETTING, NOVEL_SETTING)
BASE_SETTINGS = ("zsl", "icl", "icl_switched", *LABEL_TESTS)
# ICL with a method's own number of demonstrations (``methods.<name>.k``): icl_k8, icl_switched_k8.
ICL_SETTING_PATTERN = r"icl(_switched|_permuted|_novel)?(_k[0-9]+)?"
BASE_SETTING_PATTERN = r"zsl|" + ICL_SETTING_PATTERN


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names a prompt template reads, in order of first use."""
    names = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None and name not in names:
            if not name.isidentifier():
                raise ConfigError(f"template {template!r} has a field {{{name}}} that is not a plain column name")
            names.append(name)
    return names


@dataclass(frozen=True)
class TaskSpec:
    name: str
    source: str
    template: str
    label_words: tuple[str, ...]
    seeds: tuple[int, ...]
    lr: float
    splits: dict = field(default_factory=dict)
    hub_id: str | None = None
    hub_config: str | None = None
    path: str | None = None
    corpus: str | None = None  # source package: a corpus of icl_gd.data.corpora
    label_rule: str | None = None  # source package: the corpus's label rule (default: the task's name)

    @property
    def text_fields(self) -> list[str]:
        return template_fields(self.template)

    @property
    def n_labels(self) -> int:
        return len(self.label_words)

    def to_params(self) -> dict:
        """The spec as plain data (a rule parameter, compared by Snakemake's params trigger)."""
        return {
            "name": self.name,
            "source": self.source,
            "template": self.template,
            "label_words": list(self.label_words),
            "seeds": list(self.seeds),
            "lr": self.lr,
            "splits": dict(self.splits),
            "hub_id": self.hub_id,
            "hub_config": self.hub_config,
            "path": self.path,
            # only where set: a task of another source keeps the parameters (and the data) it had
            **{key: value for key in ("corpus", "label_rule") if (value := getattr(self, key)) is not None},
        }

    @classmethod
    def from_params(cls, params: dict) -> TaskSpec:
        """The spec back from :meth:`to_params`; seeds and lr may be left out (a data job's)."""
        return cls(
            **{
                **params,
                "label_words": tuple(params["label_words"]),
                "seeds": tuple(params.get("seeds", ())),
                "lr": float(params.get("lr", 0.0)),
            }
        )


def is_base_setting(setting: str) -> bool:
    """ZSL or an ICL setting: the model evaluated as it is, no training."""
    return re.fullmatch(BASE_SETTING_PATTERN, setting) is not None


def is_icl_setting(setting: str) -> bool:
    return re.fullmatch(ICL_SETTING_PATTERN, setting) is not None
