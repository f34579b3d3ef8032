"""The page shell every cr2 HTML page shares: one stylesheet, the SIMULATED / MEASURED banner, the facts table,
embedded figures and tables. Pages (evaluation, premise, simcheck) fill it with their own body.

Pure: strings and PNG bytes in, HTML strings out. Figures are embedded as base64 PNG, so a page is self-contained
and opens offline.
"""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass

import pandas as pd

CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
.sim{background:#fdecea;border:2px solid #c0392b;padding:.8em 1em;margin:1em 0;font-size:1.05em}
.measured{background:#eaf4fd;border:2px solid #2c6fad;padding:.8em 1em;margin:1em 0;font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}figure{margin:1.5em 0}img{max-width:100%}figcaption,.cap{color:#555;font-size:.9em}
code{background:#f4f4f4;padding:0 3px}"""


@dataclass
class Figure:
    """One figure of a page: a title, the view it comes from, a caption and the PNG."""

    key: str
    title: str
    view: str
    caption: str
    png: bytes


@dataclass
class TableBlock:
    """One table of a page: the frame shown, the view it comes from and a caption."""

    key: str
    title: str
    view: str
    caption: str
    frame: pd.DataFrame


def page(title: str, body: str) -> str:
    """A self-contained HTML page: the shared head and stylesheet around `body`."""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>\n'
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>")


def banner(kind: str, headline: str, text: str) -> str:
    """The label banner at the top of a page; kind 'sim' (red) or 'measured' (blue). `text` is HTML."""
    return f'<div class="{kind}"><b>{headline}</b> {text}</div>'


def facts_table(facts: dict) -> str:
    """A two-column table of a run's facts (key, value), escaped."""
    esc = html.escape
    return "<table>" + "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(str(v))}</td></tr>" for k, v in facts.items()) \
        + "</table>"


def img(png: bytes, alt: str = "") -> str:
    """An <img> with the PNG embedded as base64."""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def figure_html(f: Figure) -> str:
    """A figure with its title, the image and a caption naming its view."""
    esc = html.escape
    return (f'<figure id="{f.key}"><h3>{esc(f.title)}</h3>{img(f.png)}<figcaption>{esc(f.caption)} '
            f"View: <code>{f.view}</code>.</figcaption></figure>")


def table_html(frame: pd.DataFrame, float_format=None) -> str:
    """A frame as an HTML table (no index, '–' for missing values, escaped)."""
    return frame.to_html(index=False, border=0, na_rep="–", float_format=float_format, escape=True)
