"""The run configuration of a score or a sweep: embeval.settings declares and validates it (RunConfig,
ClassifierSettings); `build` turns a command's options into one. This module keeps the import path
of the Python API (`from embeval.run.config import build`)."""

from embeval.settings import PRESETS, ClassifierSettings, RunConfig, as_config, build

__all__ = ["PRESETS", "ClassifierSettings", "RunConfig", "as_config", "build"]
