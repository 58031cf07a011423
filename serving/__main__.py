"""Start vLLM's OpenAI-compatible server with the costplatform instrumentation.

    python -m serving --model PATH --costplatform-url URL --collector-key KEY [vLLM arguments]

Every argument this launcher does not know goes to vLLM unchanged. It adds the vLLM flags
the instrumentation needs (per-request cached-token counts, request-id headers, the
middleware) and passes its own options down as COSTPLATFORM_* environment variables
(see serving/config.py), then replaces itself with the vLLM server process.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from serving import config as cfg
from wire import attribution, budgets, genai_metrics, keys

MIDDLEWARE = "serving.middleware.CostplatformMiddleware"
VLLM_SERVER = "vllm.entrypoints.openai.api_server"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m serving",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Any other argument is passed to vLLM (python -m vllm.entrypoints.openai.api_server --help).",
    )
    p.add_argument("--model", required=True, help="model path or name, as vLLM takes it")
    p.add_argument("--costplatform-url", required=True, help="base URL of the costplatform (ingest API)")
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--collector-key", help="a collector key (manage.py create_collector_key)")
    key.add_argument("--collector-key-file", help="a file holding the collector key")
    p.add_argument("--spool", help="durable spool directory (default ~/.cache/costplatform/spool)")
    p.add_argument("--source", help="name of this server in reconciliation records (default: host name)")
    p.add_argument("--dims", default="", help="default dims for every record: business_line=search,env=prod")
    p.add_argument(
        "--attribution-map",
        help="TOML file mapping callers' API keys to their dims and what they may claim (re-read when it "
        "changes; README: Writing an attribution map). Without it business_line and team come from --dims only.",
    )
    p.add_argument("--model-version", help="model_version of every record, e.g. awq-int4")
    p.add_argument("--hash-key-file", help="key of the prompt hash; share it between servers (default: per spool)")
    p.add_argument(
        "--cache-salt-dim",
        help="isolate the prefix cache by this dim (e.g. business_line): requests with different values never "
        "share cached blocks. Off by default: it lowers the cache hit rate across the dim's values.",
    )
    p.add_argument(
        "--budget-poll",
        type=float,
        help="hold hard budgets: read the platform's budget state every this many seconds and refuse new "
        "requests of a line (or a team or caller of it) whose hard budget is spent with a 429 (docs/budgets.md). "
        "Default: off",
    )
    p.add_argument(
        "--budget-fail",
        choices=budgets.FAIL_MODES,
        help="when the budget state is unknown (platform unreachable): open serves (default), closed refuses (503)",
    )
    p.add_argument(
        "--budget-stale",
        type=float,
        help="seconds a budget state stays usable without a fresh answer (default: 4 polls, at least 30)",
    )
    budgets.add_reserve_arguments(
        p,
        max_tokens_default=f"--max-model-len when given, vLLM's cap on any answer, else {budgets.DEFAULT_MAX_TOKENS}",
    )
    p.add_argument(
        "--otlp-metrics-endpoint",
        help="push the OpenTelemetry GenAI token-usage metrics of every record over OTLP/HTTP to this URL, "
        "e.g. http://collector:4318/v1/metrics (docs/serving.md). Default: off",
    )
    p.add_argument("--no-segments", action="store_true", help="do not tokenize messages for system/tool counts")
    p.add_argument(
        "--no-middleware",
        action="store_true",
        help="records from the stat logger only: no dims from requests, aborted requests unrecorded "
        "(the /metrics reconciliation then finds them)",
    )
    return p


def vllm_command(args: argparse.Namespace, rest: list[str]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env[cfg.ENV_URL] = args.costplatform_url
    if args.collector_key:
        env[cfg.ENV_KEY] = args.collector_key
    else:
        env[f"{cfg.ENV_KEY}_FILE"] = args.collector_key_file
        env.pop(cfg.ENV_KEY, None)
    cfg.parse_dims(args.dims)  # refuse a malformed --dims here, not in the server
    if args.attribution_map:
        # A broken map is refused here with its reason, not as a failed middleware deep in vLLM.
        path = Path(args.attribution_map).resolve()
        attribution.parse(path.read_text())
        env[cfg.ENV_ATTRIBUTION_MAP] = str(path)
    for name, value in (
        (cfg.ENV_SPOOL, args.spool),
        (cfg.ENV_SOURCE, args.source),
        (cfg.ENV_DIMS, args.dims),
        (cfg.ENV_MODEL_VERSION, args.model_version),
        (f"{keys.ENV_HASH_KEY}_FILE", args.hash_key_file),
        (cfg.ENV_CACHE_SALT, args.cache_salt_dim),
        (genai_metrics.ENV_ENDPOINT, args.otlp_metrics_endpoint),
        (budgets.ENV_POLL, None if args.budget_poll is None else str(args.budget_poll)),
        (budgets.ENV_FAIL, args.budget_fail),
        (budgets.ENV_STALE, None if args.budget_stale is None else str(args.budget_stale)),
        (budgets.ENV_RESERVE, args.budget_reserve),
        (budgets.ENV_MAX_TOKENS, _text(args.budget_max_tokens) or _context(rest)),
        (budgets.ENV_HOLD, _text(args.budget_hold)),
        (budgets.ENV_TTL, _text(args.budget_reserve_ttl)),
    ):
        if value:
            env[name] = value
    tokenizer = _option(rest, "--tokenizer") or args.model
    env[cfg.ENV_TOKENIZER] = tokenizer
    env[cfg.ENV_SEGMENTS] = "0" if args.no_segments else "1"
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    command = [sys.executable, "-m", VLLM_SERVER, "--model", args.model]
    for flag in ("--enable-prompt-tokens-details", "--enable-request-id-headers"):
        if flag not in rest:
            command.append(flag)
    speculative = any(a.startswith(("--speculative-config", "--speculative_config")) for a in rest)
    if speculative and not any(a.startswith("--per-request-spec-decode-metrics") for a in rest):
        command += ["--per-request-spec-decode-metrics", "summary"]  # draft/accepted per request
    if not args.no_middleware:
        command += ["--middleware", MIDDLEWARE]
    return command + rest, env


def _text(value: float | None) -> str | None:
    return None if value is None else str(value)


def _context(rest: list[str]) -> str | None:
    """vLLM's --max-model-len when given as a number of tokens: no answer is longer."""
    value = _option(rest, "--max-model-len") or ""
    return value if value.isdigit() else None


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str] | None = None) -> None:
    args, rest = parser().parse_known_args(argv)
    if args.otlp_metrics_endpoint and (missing := genai_metrics.missing_packages()):
        parser().error(f"--otlp-metrics-endpoint needs {' and '.join(missing)} (pip install {' '.join(missing)})")
    try:
        command, env = vllm_command(args, rest)
    except (attribution.MapError, OSError) as exc:
        parser().error(f"--attribution-map {args.attribution_map}: {exc}")
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
