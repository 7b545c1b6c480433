"""The library patches (patches/): each module says which versions of the libraries it
reaches into it was written for, and the installed ones must be among them. An upgrade
past a range fails here, by name, before it can break a private override silently."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import patches

MODULES = sorted(f"patches.{info.name}" for info in pkgutil.iter_modules(patches.__path__))


def test_every_library_patch_is_in_the_folder():
    assert MODULES == [
        "patches.asgiref",
        "patches.channels",
        "patches.channels_redis",
        "patches.daphne",
        "patches.django",
    ]


@pytest.mark.parametrize("name", MODULES)
def test_each_patch_names_its_version_range_and_its_gain(name):
    module = importlib.import_module(name)
    written_for = getattr(module, "WRITTEN_FOR", None)
    assert written_for, f"{name} has no WRITTEN_FOR: name the versions it was written for"
    for library, (lowest, beyond) in written_for.items():
        assert patches.release(lowest) < patches.release(beyond), (name, library)
    # The measured gain, in numbers, is what justifies reaching into internals.
    assert re.search(r"\d", module.__doc__ or ""), f"{name}'s docstring has no measured gain"


@pytest.mark.parametrize("name", MODULES)
def test_the_installed_libraries_are_the_versions_each_patch_was_written_for(name):
    module = importlib.import_module(name)
    problems = patches.out_of_range(name, module.WRITTEN_FOR)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_a_version_outside_the_range_is_named_with_what_to_do():
    written_for = {"daphne": ("4.1", "4.3")}

    assert patches.out_of_range("patches.daphne", written_for, {"daphne": "4.2.3"}) == []
    assert patches.out_of_range("patches.daphne", written_for, {"daphne": "4.1"}) == []
    (too_new,) = patches.out_of_range("patches.daphne", written_for, {"daphne": "4.3.0"})
    assert too_new.startswith(
        "daphne 4.3.0 is installed, but patches.daphne was written for daphne >=4.1,<4.3"
    )
    assert "widen WRITTEN_FOR" in too_new
    assert patches.out_of_range("patches.daphne", written_for, {"daphne": "4.0.9"})
    assert patches.out_of_range("patches.daphne", written_for, {"daphne": "10.0"})


def test_a_pre_release_counts_as_its_release():
    assert patches.release("5.2rc1") == (5, 2)
    assert patches.release("26.10.0") == (26, 10, 0)
