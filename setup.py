"""Packaging that pyproject.toml cannot say. Every installed import name is cr2-prefixed: the repository's folders
keep their names (cr2/, cr2_cli/, flows/, tasks/, warehouse/, configs/, data/) and install as the packages below
(cr2_tasks.common.package_folder reads it back from the installed packages)."""
from setuptools import find_namespace_packages, setup

FOLDERS = {"cr2": "cr2", "cr2_cli": "cr2_cli", "cr2_flows": "flows", "cr2_tasks": "tasks", "cr2_warehouse": "warehouse",
           "cr2_configs": "configs", "cr2_data": "data"}  # import name → repository folder
CODE = ("cr2", "cr2_cli", "cr2_flows", "cr2_tasks", "cr2_warehouse")


def packages(name: str, folder: str) -> list[str]:
    """`name` and its sub-packages, found under `folder`."""
    return [name] + [f"{name}.{sub}" for sub in find_namespace_packages(where=folder, exclude=["__pycache__*"])]


setup(packages=[p for n in CODE for p in packages(n, FOLDERS[n])] + ["cr2_configs", "cr2_data"],
      package_dir={n: f for n, f in FOLDERS.items() if n != f})
