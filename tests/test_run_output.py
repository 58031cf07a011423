"""What `make run` prints: a line a step with how long it took, the install without setuptools'
deprecation banners, and the sample's deliberately invalid records introduced as such (the whole
run is tests/test_run.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devtools import install, run
from wire.send import Rejection

# As setuptools prints it while building an editable install of a pyproject with a license table.
BANNER = textwrap.dedent("""\
    /tmp/pip-build-env-x1/overlay/lib/python3.11/site-packages/setuptools/config/_apply_pyprojecttoml.py:82: SetuptoolsDeprecationWarning: `project.license` as a TOML table is deprecated
    !!

            ********************************************************************************
            Please use a simple string containing a SPDX expression for `project.license`. You can also use
            `project.license-files`. (Both options available on setuptools>=77.0.0).

            By 2026-Feb-18, you need to update your project and remove deprecated calls
            or your builds will no longer be supported.

            See https://packaging.python.org/en/latest/guides/writing-pyproject-toml/#license for details.
            ********************************************************************************

    !!
      corresp(dist, value, root_dir)
    """)  # noqa: E501
REAL = "ERROR: No matching distribution found for nosuchpackage==9"


# Newer setuptools names the same banner a build backend warning.
BACKEND_BANNER = BANNER.replace("SetuptoolsDeprecationWarning", "BuildBackendWarning")


@pytest.mark.parametrize("banner", [BANNER, BACKEND_BANNER], ids=["setuptools", "build-backend"])
def test_the_install_drops_setuptools_banners_and_keeps_everything_else(banner):
    lines = [*banner.splitlines(), REAL, *banner.splitlines(), "WARNING: a warning of pip's own"]
    assert list(install.harmless_filtered(lines)) == [REAL, "WARNING: a warning of pip's own"]


def test_an_install_step_is_one_line_with_its_time_and_what_matters(tmp_path, capsys):
    script = f"import sys; sys.stderr.write({BANNER!r}); print({REAL!r})"
    install.step("packages installed", [sys.executable, "-c", script], tmp_path / "install.log")
    shown = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\[install +\d+\.\d s\] packages installed", shown[0])
    assert shown[1:] == [f"    {REAL}"]
    assert "SetuptoolsDeprecationWarning" in (tmp_path / "install.log").read_text()  # kept, not shown


def test_a_failed_install_step_stops_with_its_status(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        install.step("pip upgraded", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "install.log")
    assert stopped.value.code == 3 and "pip upgraded FAILED" in capsys.readouterr().out


def test_the_makefile_installs_through_it():
    recipes = subprocess.run(["make", "-n", "-B", "install-base"], capture_output=True, text=True, check=True)
    assert "devtools/install.py .venv base" in recipes.stdout
    assert "pip install" not in recipes.stdout


def test_each_run_line_says_how_long_its_step_took(capsys):
    run.say("first")
    run.say("second")
    lines = capsys.readouterr().out.splitlines()
    assert all(re.fullmatch(r"\[run +\d+\.\d s\] (first|second)", line) for line in lines) and len(lines) == 2


def test_the_samples_deliberately_invalid_records_are_found():
    lines = Path(run.SAMPLE).read_text().splitlines()
    found = run.deliberate_lines(Path(run.SAMPLE))
    assert len(found) == 7  # docs/running.md: "7 invalid lines"
    assert all('"bad-' in lines[number - 1] for number in found)


def test_the_deliberate_refusals_are_introduced_as_such_and_any_other_stands_out(capsys):
    meant = run.deliberate_lines(Path(run.SAMPLE))
    first, *rest = sorted(meant)
    refused = [Rejection(n, f"bad-{n}", {"tokens": ["must be >= 0"]}) for n in rest]
    refused.append(Rejection(5, "r-5", {"model": ["unknown"]}))
    run.sample_report(refused, meant, "http://127.0.0.1:8000")
    out = capsys.readouterr().out
    assert "6 of them are the sample's deliberately invalid records" in out
    assert out.count("as meant: line ") == 6
    assert "refused, NOT one of the deliberate ones: line 5 (r-5)" in out
    assert f"the deliberately invalid lines {first} were ACCEPTED" in out
