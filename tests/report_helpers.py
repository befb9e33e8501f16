"""The rule for the report's optional parts (the mteb client, matplotlib, a Chromium browser):
skipped with a reason on a developer machine that lacks them, and FAIL when EMBEVAL_REQUIRE_REPORT=1,
which .ci/run sets after installing all of them."""

import os

import pytest


def need(what, reason):
    message = f"{what} is not available: {reason}"
    if os.environ.get("EMBEVAL_REQUIRE_REPORT") == "1":
        pytest.fail(f"{message} (EMBEVAL_REQUIRE_REPORT=1)")
    pytest.skip(message)
