"""The reports in a real browser: headless Chromium opens the default (SIMULATED) and the
measured (MEASURED) report, each built by the real `cr2 run` on the test run's shared slices (conftest:
pipeline_slice, measured_slice), read here and never written.

For each page Chromium (Debian's `chromium` package; no downloaded browser) loads a copy of the report with
one appended script that, after the load event, records every image's naturalWidth, the label banner's box,
style and text, and fetches every link (--allow-file-access-from-files); --dump-dom returns that record.
Checked: every figure loads (naturalWidth > 0, one image per <figure>), the SIMULATED / MEASURED banner is
visible on the first screen and names the label source, every table link (tables/<key>.csv / .tex) resolves
to a non-empty file. A screenshot of each page (the report itself, unmodified) is kept at
<pytest tmp dir>/browser/<scenario>.png — the test prints its path.

Skipped, with the reason, when chromium is not installed (`make test` installs it on CI: the Makefile's
`chromium` target).
"""
from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cr2_warehouse.db import Warehouse

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = [pytest.mark.flow, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: `apt-get install -y "
                                 "chromium`; `make test` installs it when CI=true)")]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
         "--no-first-run", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
CHECK = """<script>
window.addEventListener('load', () => {
  const links = [...document.querySelectorAll('a[href]')].map(a => {
    let n = -1, ok = false;
    try { const x = new XMLHttpRequest(); x.open('GET', a.href, false); x.send(); n = x.responseText.length; ok = n > 0; }
    catch (e) { ok = false; }
    return {href: a.getAttribute('href'), ok: ok, bytes: n};
  });
  const images = [...document.images].map(i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
                                                 figure: i.closest('figure') ? i.closest('figure').id : null}));
  const b = document.querySelector('.sim, .measured');
  let banner = null;
  if (b) {
    const r = b.getBoundingClientRect(), s = getComputedStyle(b);
    banner = {cls: b.className, text: b.innerText, top: r.top, width: r.width, height: r.height, display: s.display,
              visibility: s.visibility, opacity: s.opacity, viewport_height: window.innerHeight};
  }
  const out = document.createElement('pre');
  out.id = 'cr2-browser-check';
  out.textContent = JSON.stringify({links: links, images: images, figures: document.querySelectorAll('figure').length,
                                    banner: banner});
  document.body.appendChild(out);
});
</script>"""


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # a fresh user-data dir per start
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=300)


def _browser_check(report: Path, tmp: Path) -> dict:
    """What Chromium sees on the report page (the record the appended script writes after the load event)."""
    copy = tmp / f"{report.parent.parent.name}-report"
    shutil.copytree(report.parent, copy)
    page = copy / "index.html"
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK + "</body>"), encoding="utf-8")
    res = _chromium(tmp, "--allow-file-access-from-files", "--window-size=1280,1024", "--virtual-time-budget=10000",
                    "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="cr2-browser-check">(.*?)</pre>', res.stdout, re.S)
    assert found, f"chromium returned no check record (exit {res.returncode}): {res.stderr[-1500:]}"
    import html

    return json.loads(html.unescape(found.group(1)))


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def reports(pipeline_slice, measured_slice) -> dict:
    """{scenario: (report index.html, label source)} for the default and the measured scenario on slices."""
    out = {}
    for scenario, home in (("default", pipeline_slice["home"]), ("measured", measured_slice["home"])):
        with Warehouse(home, read_only=True) as wh:
            source = wh.scalar("SELECT min(label_source) FROM eval_runs")
        out[scenario] = (home / "report" / "index.html", source)
    return out


@pytest.mark.parametrize("scenario, banner", [("default", "SIMULATED LABELS"), ("measured", "MEASURED LABELS")])
def test_report_in_headless_chromium(reports, scenario, banner, tmp_path_factory):
    report, source = reports[scenario]
    tmp = tmp_path_factory.mktemp(f"browser-{scenario}")
    seen = _browser_check(report, tmp)

    images = seen["images"]
    assert seen["figures"] > 0 and len(images) == seen["figures"], (seen["figures"], len(images))
    broken = [i for i in images if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"figures that did not load in chromium: {broken}"

    b = seen["banner"]
    assert b is not None, "no label banner on the page"
    assert b["text"].startswith(banner) and source in b["text"], b["text"]
    assert b["display"] != "none" and b["visibility"] == "visible" and float(b["opacity"]) > 0
    assert b["width"] > 0 and b["height"] > 0 and 0 <= b["top"] < b["viewport_height"], b  # on the first screen

    links = seen["links"]
    tables = {p.name for p in (report.parent / "tables").iterdir()}
    assert {Path(link["href"]).name for link in links if link["href"].startswith("tables/")} == tables
    unresolved = [link for link in links if not link["ok"]]
    assert not unresolved, f"links that do not resolve: {unresolved}"

    shot = tmp_path_factory.getbasetemp() / "browser" / f"{scenario}.png"
    shot.parent.mkdir(exist_ok=True)
    res = _chromium(tmp, "--window-size=1280,2400", f"--screenshot={shot}", report.as_uri())
    assert shot.is_file(), f"no screenshot (exit {res.returncode}): {res.stderr[-1500:]}"
    assert _png_size(shot) == (1280, 2400) and shot.stat().st_size > 20_000  # a rendered page, not a blank one
    print(f"screenshot of the {scenario} report: {shot}")
