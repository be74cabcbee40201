"""Values given as text (``--param``, ``--grid``): Python literals, JSON's words, else strings."""

import pytest

from dmh._literal import literal_value
from dmh.cli._options import split_param
from dmh.selection import parse_grid


@pytest.mark.parametrize(("text", "value"), [
    ("3", 3), ("0.5", 0.5), ("'float32'", "float32"), ("float32", "float32"), ("[1, 2]", [1, 2]),
    ("True", True), ("true", True), ("false", False), ("False", False), ("null", None), ("None", None),
    (" true ", True), ("yes", "yes"),
])
def test_literal_values(text, value):
    assert literal_value(text) == value and type(literal_value(text)) is type(value)


def test_param_and_grid_read_json_booleans():
    assert split_param("dmh.use_unpaired=false") == ("dmh.use_unpaired", False)
    grid = parse_grid("dmh.use_unpaired=true,false", "dmh")
    assert [g["use_unpaired"] for g in grid] == [True, False]
