"""The hostile files of ``hostile_files``, built once for the cases of test_hostile_*.py."""

from __future__ import annotations

import warnings

import pytest

from .hostile_files import build_files


@pytest.fixture(scope="session")
def hostile_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_files(root)
    return root
