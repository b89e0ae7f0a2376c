"""An integration imported without its extra says which extra to install."""

from __future__ import annotations

import pytest

from fermix_memory import FermixError
from fermix_memory.entrypoints.extras import MissingExtra, require


def test_a_missing_extra_is_one_clear_error_naming_it() -> None:
    with pytest.raises(MissingExtra) as caught:
        require("mcp", "a_module_that_is_not_installed_anywhere")
    assert "pip install 'fermix-memory[mcp]'" in str(caught.value)
    assert isinstance(caught.value, FermixError) and isinstance(caught.value, ImportError)


def test_an_installed_module_is_returned() -> None:
    assert require("dev", "json").dumps([1]) == "[1]"
