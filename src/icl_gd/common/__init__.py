"""What every stage uses: atomic writes, provenance, a job's runtime (logging, a GPU slot), the
warm worker, display names, frame I/O, file checksums, and the config's vocabulary (``specs``).

May import: nothing else of the package.
"""
