"""Standalone exporters: programs that embed an embeval export and write the vectors file.

Each is run as its own process (`python exporters/bow_numpy.py --export DIR --out FILE`) and
none imports embeval. This file only lets pyproject.toml install the folder as `embeval.exporters`,
where `embeval quickstart` finds the programs in an installed (non-editable) embeval.
"""
