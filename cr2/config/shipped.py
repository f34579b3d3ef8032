"""Where the shipped configs and data are: the repository's configs/ and data/, or the packages a wheel installs.

In a checkout (a source tree or an editable install: pyproject.toml and configs/ beside the cr2 package) every
path is the repository's, as it always was. An installed wheel carries configs/ as the package `cr2_configs` and
data/ as `cr2_data` (setup.py maps the folders), found through importlib.resources, so `cr2 config validate` and
`cr2 run` work from any folder. A repository-relative path ('configs/states/far-rician.yaml', 'data') is looked
up in the current folder first and then in the installed package of its top folder (`shipped_path`).
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # cr2/config/shipped.py → the repository
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "configs").is_dir()
# repository folder → the package an installed wheel carries it as
PACKAGES: dict[str, str] = {"configs": "cr2_configs", "data": "cr2_data"}


def shipped_dir(folder: str) -> Path:
    """The shipped `folder` ('configs' or 'data'): under the checkout, else the installed package's folder."""
    if IN_CHECKOUT:
        return REPO_ROOT / folder
    try:
        root = importlib.resources.files(PACKAGES[folder])
    except ModuleNotFoundError:  # neither a checkout nor a wheel: every lookup below reports the missing file
        return REPO_ROOT / folder
    if isinstance(root, Path):
        return root
    # configs/ and data/ hold no __init__.py, so each installs as a namespace package, whose files() multiplexes
    # its folders; a wheel installs one, unzipped, and any child's path names it
    return Path(str(root.joinpath("_"))).parent


CONFIG_DIR = shipped_dir("configs")
DATA_DIR = shipped_dir("data")


def shipped_path(rel: str | Path) -> Path:
    """A repository-relative path → the file or folder it names: under the checkout; installed, the path itself if
    it exists in the current folder, else the same path inside the installed configs/ or data/ package."""
    p = Path(rel)
    if IN_CHECKOUT or p.is_absolute():
        return REPO_ROOT / p
    if p.exists() or not p.parts or p.parts[0] not in PACKAGES:
        return p.resolve()
    return shipped_dir(p.parts[0]).joinpath(*p.parts[1:])


def default_home() -> Path:
    """The warehouse folder when neither --home nor $CR2_HOME names one: var/ under the checkout, else ./var."""
    return REPO_ROOT / "var" if IN_CHECKOUT else Path.cwd() / "var"
