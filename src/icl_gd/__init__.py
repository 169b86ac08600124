"""Does in-context learning behave like gradient descent? The workflow's package.

Its subpackages follow the workflow's stages, and import one way, down this list:

* ``common``      -- what every stage uses: atomic writes, provenance, a job's runtime, the warm
  worker, display names, frame I/O, file checksums, and the config's vocabulary (``specs``).
* ``data``        -- the tasks: presets, synthetic twins, real corpora, splits, prompts.
* ``config``      -- a config resolved into task and run specs, and validated.
* ``models``      -- loading from the hub, local folders and GGUF; variants; the built-in model.
* ``activations`` -- recording hooks, finetuning, one extraction job, the activation cache.
* ``planning``    -- before a run: its plan, what its caches and jobs will take, the jobs' requests.
* ``metrics``     -- the papers' metrics (pure numpy), resampling, inference, scores, claims' tests.
* ``report``      -- tables, figures, the claims' wording, the first page, the published numbers.

Each subpackage's ``__init__`` imports nothing, so that a job imports only what it runs: a metric
job loads no model code (``tests/unit/test_layering.py``).
"""
