"""GL411 library-path-replaced: the cases the fixtures in fixtures/rules/GL411/ do not show."""

from __future__ import annotations

from helpers import dockerfile, run, where

FROM = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04"


def test_quiet_when_a_later_setting_lists_the_driver_dirs_again() -> None:
    # a replacement, then a value that puts the host driver's directories back: the path ends whole
    text = dockerfile(
        FROM,
        "ENV LD_LIBRARY_PATH=/opt/app/lib",
        "ENV LD_LIBRARY_PATH=/usr/local/nvidia/lib64:$LD_LIBRARY_PATH",
    )
    assert run(text, "GL411") == []


def test_quiet_on_an_unknown_base() -> None:
    # FROM ${BASE}: what the base sets is not known, so nothing is said of replacing it
    text = dockerfile("ARG BASE", "FROM ${BASE}", "ENV LD_LIBRARY_PATH=/opt/app/lib")
    assert run(text, "GL411") == []


def test_reports_the_setting_that_replaced_it() -> None:
    # the first of two replacements is not the one in effect; the last one is reported
    text = dockerfile(FROM, "ENV LD_LIBRARY_PATH=/opt/a/lib", "ENV LD_LIBRARY_PATH=/opt/b/lib")
    assert where(run(text, "GL411")) == [("GL411", 3, 1)]


def test_ngc_base() -> None:
    text = dockerfile("FROM nvcr.io/nvidia/pytorch:24.08-py3", 'ENV LD_LIBRARY_PATH="/workspace/lib"')
    assert where(run(text, "GL411")) == [("GL411", 2, 1)]
