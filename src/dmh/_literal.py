"""A value given as text on the command line (``--param``, ``--grid``): a Python literal where it
is one, JSON's ``true``/``false``/``null`` too, else the plain string."""

from __future__ import annotations

import ast

_JSON_WORDS = {"true": True, "false": False, "null": None}


def literal_value(text: str):
    """``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"'float32'"`` -> "float32", ``"[1, 2]"`` -> [1, 2],
    ``"True"``/``"true"`` -> True, ``"null"``/``"None"`` -> None; anything else the string itself."""
    word = text.strip()
    if word in _JSON_WORDS:
        return _JSON_WORDS[word]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a plain string
