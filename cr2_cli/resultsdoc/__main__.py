"""`python -m cr2_cli.resultsdoc [--home KEY=PATH …] [--out docs/results.md] [--check]` (= `make results-doc`)."""
from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

from cr2.core.files import atomic_write
from cr2_cli.resultsdoc import SECTIONS, default_homes, render_sections
from cr2_cli.resultsdoc.core import HOMES, Doc


def refresh_views(homes: dict[str, Path]) -> None:
    """Open every existing warehouse writable once: a warehouse made by older code gets this code's views (and its
    additive tables) before the page reads them, so the page is this code's reading of the stored runs."""
    from cr2_warehouse.db import Warehouse

    for home in homes.values():
        if (home / "cr2.duckdb").is_file():
            with Warehouse(home):
                pass


def main(argv: list[str] | None = None) -> int:
    repo = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(prog="python -m cr2_cli.resultsdoc", description=__doc__)
    ap.add_argument("--home", action="append", default=[], metavar="KEY=PATH",
                    help=f"a warehouse home for one of {', '.join(HOMES)} (default: the shipped var/ folders)")
    ap.add_argument("--out", type=Path, default=repo / "docs" / "results.md")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated section names, in page order")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if --out differs")
    a = ap.parse_args(argv)
    homes = default_homes(repo)
    for spec in a.home:
        key, sep, path = spec.partition("=")
        if not sep or key not in HOMES:
            ap.error(f"--home {spec!r}: expected KEY=PATH with KEY one of {', '.join(HOMES)}")
        homes[key] = Path(path).resolve()
    names = tuple(s for s in a.sections.split(",") if s)
    unknown = [s for s in names if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; the sections are {', '.join(SECTIONS)}")
    t0 = time.perf_counter()
    refresh_views(homes)
    page = render_sections(Doc(homes, repo), names)
    took = time.perf_counter() - t0
    if a.check:
        old = a.out.read_text(encoding="utf-8") if a.out.is_file() else ""
        if old != page:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), page.splitlines(True),
                                                       str(a.out), "generated"))
            print(f"{a.out} differs from the generated page ({took:.1f} s)", file=sys.stderr)
            return 1
        print(f"{a.out} is the generated page ({took:.1f} s)", file=sys.stderr)
        return 0
    atomic_write(a.out, page)  # a failed render never leaves a half-written page
    print(f"wrote {a.out} ({len(page.splitlines())} lines, {took:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
