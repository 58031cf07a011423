"""Send an NDJSON file of token records v1 to the ingest API, in batches.

    python -m collectors.send FILE --url URL --key KEY [--batch N] [--ts-end TIME] [--gzip]

The sending itself (batches, retries, the timestamp shift) is wire.send's; see its docstring.
"""

from __future__ import annotations

import argparse
import sys

from wire.send import DEFAULT_BATCH, SendError, Summary, parse_time, send_file, sender_arguments, sender_options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.send",
        description="Send an NDJSON file of token records v1 to the ingest API, in batches.",
        epilog="Exit status: 0 when every batch was delivered (records refused one by one do not "
        "change that; see --strict), 1 when a batch was not, 2 on bad arguments.",
    )
    parser.add_argument("file", help='NDJSON file, one record per line ("-" for stdin)')
    sender_arguments(parser, batch=DEFAULT_BATCH)
    parser.add_argument("--ts-end", metavar="TIME", help='shift timestamps so the latest is TIME (RFC 3339 or "now")')
    parser.add_argument("--strict", action="store_true", help="exit 3 when any record was refused")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, key = sender_options(parser, argv)
    try:
        ts_end = parse_time(args.ts_end) if args.ts_end else None
    except ValueError as exc:
        parser.error(f"--ts-end: {exc}")

    def progress(summary: Summary) -> None:
        if not args.quiet:
            print(f"  batch {summary.batches}: {summary}", file=sys.stderr, flush=True)

    try:
        summary = send_file(args.file, url=args.url, key=key, batch=args.batch, ts_end=ts_end, compress=args.gzip,
                            progress=progress)  # fmt: skip
    except (SendError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"sent {summary}")
    for rejection in summary.rejections[:20]:
        print(f"  refused {rejection}")
    if summary.rejected > 20:
        print(f"  … and {summary.rejected - 20} more (GET /api/v1/rejections lists them all)")
    return 3 if args.strict and summary.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
