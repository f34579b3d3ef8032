"""Every verdict word that changed between two versions of docs/results.md, as a markdown table (the closing note
of a change that regenerates the page gives it).

    python scripts/results_word_diff.py OLD.md NEW.md      # e.g. OLD.md from `git show HEAD:docs/results.md`

A word is keyed by where it is printed: for a table cell (the last two headings above the table, the row's first
cell, the column's header); words inside double quotes are labels, not verdicts, and are skipped. Prints the
counts (cells with a word before and after, keys found only before or only after), one row per key whose
words changed, and per section the words of the keys found on one side only.
"""
from __future__ import annotations

import re
import sys

import pandas as pd

from cr2.report.markdown import markdown_table
from cr2_cli.resultsdoc.core import CLOSE, OPEN, VERDICT_WORDS

WORD = re.compile("|".join(re.escape(w) for w in sorted(VERDICT_WORDS, key=len, reverse=True)))


def cells(path: str) -> dict[tuple[str, str, str], str]:
    """(heading path, row label, column) → the verdict words of that cell, in order."""
    out, heads, header = {}, [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n").replace(OPEN, "").replace(CLOSE, "")
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            heads, header = heads[:level - 1] + [line.strip("# ").strip()], None
            continue
        if not line.startswith("|"):
            header = None
            continue
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = parts
            continue
        if set("".join(parts)) <= set("-: "):
            continue
        for column, cell in zip(header[1:], parts[1:]):
            words = WORD.findall(re.sub(r'"[^"]*"', "", cell))
            if words:
                out[(" › ".join(heads[-2:]), parts[0], column)] = ", ".join(words)
    return out


def main(old_path: str, new_path: str) -> None:
    old, new = cells(old_path), cells(new_path)
    changed = [(k, old[k], new[k]) for k in old if k in new and old[k] != new[k]]
    print(f"cells with a word: before {len(old)}, after {len(new)}; changed: {len(changed)}; only before: "
          f"{sum(k not in new for k in old)}, only after: {sum(k not in old for k in new)}\n")
    print(markdown_table(pd.DataFrame([{"section": s, "row": r, "column": c, "before": b, "after": a}
                                       for (s, r, c), b, a in changed],
                                      columns=["section", "row", "column", "before", "after"])))
    print("\nCells keyed only before or only after (a table restructured, a row or column renamed, added or "
          "removed), by section: how many, and how often each word appears in them.\n")
    rows = []
    for side, mine, other in (("only before", old, new), ("only after", new, old)):
        tally: dict[str, dict[str, int]] = {}
        for (section, _, _), words in ((k, v) for k, v in mine.items() if k not in other):
            for w in words.split(", "):
                tally.setdefault(section, {}).setdefault(w, 0)
                tally[section][w] += 1
        rows += [{"side": side, "section": section, "words": "; ".join(f"{w} ×{n}" for w, n in sorted(t.items()))}
                 for section, t in sorted(tally.items())]
    print(markdown_table(pd.DataFrame(rows, columns=["side", "section", "words"])))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
