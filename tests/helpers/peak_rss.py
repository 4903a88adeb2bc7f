"""Run a command; print its peak RSS in bytes (ru_maxrss of the waited child) as JSON: {"returncode", "peak_rss"}.

    python peak_rss.py COMMAND [ARG...]

Run this from the test, not the command itself: on Linux a child's ru_maxrss starts at its parent's
RSS (exec keeps the larger), so a command started by pytest would report at least pytest's size.
The command here is the child of this small process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys


def main() -> int:
    done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB
    print(json.dumps({"returncode": done.returncode, "peak_rss": peak, "stderr": done.stderr.decode(errors="replace")[-2000:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
