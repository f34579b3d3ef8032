"""Packaging that pyproject.toml cannot say: the packages found in the tree plus the repository's configs/ and data/
folders, installed as the packages cr2_configs and cr2_data (cr2/config/shipped.py finds them there outside a checkout)."""
from setuptools import find_namespace_packages, setup

SHIPPED = {"cr2_configs": "configs", "cr2_data": "data"}  # package → repository folder (cr2.config.shipped.PACKAGES)

setup(packages=[*find_namespace_packages(include=["cr2*", "tasks*", "flows*", "warehouse*", "cr2_cli*"]), *SHIPPED],
      package_dir=SHIPPED)
