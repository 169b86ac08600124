"""Entry points send everything a job prints, from Python or from C, to the rule's log."""

import subprocess
import sys


def test_log_to_captures_logging_print_and_c_level_output(tmp_path):
    log = tmp_path / "logs" / "job.log"
    code = (
        "import logging, os, sys\n"
        "from icl_gd.runtime import log_to\n"
        f"log_to({str(log)!r}, threads=1)\n"
        "print('from print')\n"
        "logging.getLogger('x').info('from logging')\n"
        "os.write(2, b'from fd 2\\n')\n"
        "assert os.environ['OMP_NUM_THREADS'] == '1'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert "from print" in text and "from logging" in text and "from fd 2" in text
    assert proc.stdout == "" and proc.stderr == ""
