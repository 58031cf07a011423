"""The secrets every edge program reads the same way: the collector key (from --key, --key-file
or $COSTPLATFORM_COLLECTOR_KEY), NAME or NAME_FILE settings, and the prompt-hash key shared by
the servers whose repeats should be recognised as duplicates of each other."""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

ENV_COLLECTOR_KEY = "COSTPLATFORM_COLLECTOR_KEY"
ENV_HASH_KEY = "COSTPLATFORM_HASH_KEY"
HASH_KEY_FILE = "prompt-hash.key"


def secret(name: str) -> str | None:
    """NAME, or the contents of the file named by NAME_FILE."""
    value = os.environ.get(name)
    if value:
        return value.strip()
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return None


def collector_key_arguments(parser: argparse.ArgumentParser) -> None:
    """--key and --key-file, the options collector_key reads."""
    parser.add_argument("--key", help=f"collector key (default: ${ENV_COLLECTOR_KEY})")
    parser.add_argument("--key-file", type=Path, help="read the collector key from this file")


def collector_key(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The collector key of a command line with --key and --key-file (a parser error if none)."""
    key = args.key or os.environ.get(ENV_COLLECTOR_KEY)
    if args.key_file:
        try:
            key = args.key_file.read_text().strip()
        except OSError as exc:
            parser.error(f"--key-file: {exc}")
    if not key:
        parser.error(f"a collector key is needed: --key, --key-file or {ENV_COLLECTOR_KEY}")
    return str(key)


def hash_key(spool: Path) -> bytes:
    """The prompt-hash key: COSTPLATFORM_HASH_KEY(_FILE), else one generated once and kept
    beside the spool. Servers whose repeats should be recognised as duplicates of each other
    must share one key."""
    configured = secret(ENV_HASH_KEY)
    if configured:
        return configured.encode()
    path = spool / HASH_KEY_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        spool.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key
