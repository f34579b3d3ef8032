"""Cold and warm `cr2 ingest` on the default set in a fresh warehouse (wall clock, one process each).

Cold: empty warehouse and empty tokenizer cache. Warm: the same command again with nothing changed
— the ingest task must be a cache hit (the summary says `cached`), so the time is Prefect's
temporary-server start plus the cache-key computation (file hashes).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from _common import timed_cli, write_result

CR2 = str(Path(sys.executable).with_name("cr2"))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cr2-bench-") as tmp:
        env = {**os.environ, "CR2_HOME": f"{tmp}/home", "CR2_CACHE": f"{tmp}/cache", "PREFECT_HOME": f"{tmp}/prefect"}
        cold_s, out_cold = timed_cli([CR2, "ingest"], env)
        warm_s, out_warm = timed_cli([CR2, "ingest"], env)
    write_result("ingest", {
        "cold_s": round(cold_s, 2),
        "warm_s": round(warm_s, 2),
        "warm_was_cached": "cached" in out_warm,
        "cold_output": out_cold.strip().splitlines()[-12:],
    })


if __name__ == "__main__":
    main()
