"""Classification in SQL: a rule set compiled to the reason of each token component of a
stored record, deciding exactly as engine.Classifier.classify does, and the statements that
reclassify a day and compare two rule sets over the same records.

A query reads the records through `records_sql`: the records of a time range with, computed
once per record, a `duplicate` flag (the window below), a `reconciliation` flag and one flag
per move rule. The nine reason expressions of a rule set (engine.COMPONENTS order) read only
those flags and the record's status and finish reason, so they take no parameters, and
`classes_sql` sums the records per those before the reasons are evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from apps.classification.engine import (
    CACHE_PREFIX,
    COMPONENTS,
    DUPLICATE_WINDOW_SECONDS,
    EFF_CACHE_WRITE,
    EFF_INPUT,
    EFF_OUTPUT,
    EFF_REASONING,
    EFF_STRUCTURAL,
    SHADOW_RECOMPUTE,
    SHADOW_SPEC,
    SHADOW_UNATTRIBUTED,
    WASTE_BY_STATUS,
    WASTE_DUPLICATE,
    WASTE_PADDING,
    WASTE_TRUNCATED,
)
from apps.classification.models import HourlyClass
from apps.classification.rules import Node, compile_sql, parse_rule
from apps.classification.rules.storage import RECORD_FROM, choice_codes, record_columns
from apps.common.buckets import hour_floor_sql
from apps.common.composed import SQL, Composable, Identifier, Literal, col, commas, table
from apps.common.rollup import Rollup
from apps.ingest.contract import RECONCILIATION_DIM, RECONCILIATION_VALUE
from apps.ingest.models import FinishReason, Status

# The class rollup: written by ingest's statement (apps.classification.ingest) and replaced a day at
# a time by reclassification.
CLASS_ROLLUP = Rollup(
    table=HourlyClass._meta.db_table,
    key=("hour", "source_id", "model_id", "dims_id", "ruleset_id", "reason_id", "component"),
    measures=("tokens",),
)
Fragment = tuple[Composable, list[object]]

STATUS_CODES = choice_codes(Status.choices)
OK, LENGTH = STATUS_CODES["ok"], choice_codes(FinishReason.choices)["length"]
# An ok record with a prompt hash is a duplicate when an earlier ok record of the same source, prompt
# hash, model name and business line lies at most 300 s before it (an equal ts is not earlier). Over
# RECORD_FROM; exact to the microsecond, as timestamps are. services.duplicates_find decides the same.
# Only such records (candidates) can be duplicates or make one, so records_sql runs the window over
# the candidates alone, as rows `y` carrying the model name and business line (collation "C": the
# partitions are the same, as equality does not depend on a deterministic collation, and the sort
# compares bytes).
CANDIDATE = SQL("r.status = {} AND r.prompt_hash IS NOT NULL").format(Literal(OK))
DUPLICATE = SQL(
    "(count(*) OVER (PARTITION BY y.source_id, y.prompt_hash, y.model_name, y.business_line ORDER BY y.ts "
    "RANGE BETWEEN INTERVAL {} PRECEDING AND INTERVAL '1 microsecond' PRECEDING) > 0)"
).format(Literal(f"{DUPLICATE_WINDOW_SECONDS} seconds"))
WINDOW = timedelta(seconds=DUPLICATE_WINDOW_SECONDS)


def component_tokens_sql(row: str) -> tuple[Composable, ...]:
    """The tokens of each component (engine.component_tokens, in engine.COMPONENTS order) as
    SQL over a row with the record's token columns, aliased `row`."""

    def c(name: str) -> Composable:
        return col(row, name)

    def less(*names: str) -> Composable:
        return SQL(" - ").join(map(c, names))

    return (
        c("prompt_cached"),
        less("prompt", "prompt_cached", "prompt_cache_write"),
        c("structural"),
        less("completion", "structural", "reasoning"),
        c("padding"),
        less("draft", "draft_accepted"),
        c("recomputed"),
        c("reasoning"),
        c("prompt_cache_write"),
    )


COMPONENT_TOKENS = component_tokens_sql("x")  # over a records_sql row
_RECORD_FIELDS = (
    "ts source_id model_id status finish_reason prompt prompt_cached completion structural padding draft "
    "draft_accepted recomputed reasoning prompt_cache_write"
).split()


@dataclass(frozen=True)
class MoveRule:
    """A move rule of a rule set: its checked tree, its component indexes and its reason id."""

    tree: Node
    components: tuple[int, ...]
    reason_id: int


@dataclass(frozen=True)
class RuleSetSql:
    """A rule set in SQL. `flags`: named boolean expressions over RECORD_FROM, one per move,
    for records_sql; `reasons`: per component, the reason id over a row `x` of records_sql or
    classes_sql (status, finish_reason, duplicate, reconciliation and the flags)."""

    flags: tuple[tuple[str, Fragment], ...]
    reasons: tuple[Composable, ...]


@cache
def _reconciliation() -> Fragment:
    rule = f"dims[{json.dumps(RECONCILIATION_DIM)}] == {json.dumps(RECONCILIATION_VALUE)}"
    return compile_sql(parse_rule(rule), record_columns())


def _case(branches: Sequence[tuple[Composable, Composable]], default: Composable) -> Composable:
    if not branches:
        return default
    arms = SQL(" ").join(SQL("WHEN {} THEN {}").format(when, then) for when, then in branches)
    return SQL("CASE {} ELSE {} END").format(arms, default)


def _builtin_reasons(disabled: frozenset[str]) -> list[Composable]:
    """engine.builtin_reasons over a row `x` of records_sql or classes_sql."""
    failed = SQL("CASE x.status {} END").format(
        SQL(" ").join(
            SQL("WHEN {} THEN {}").format(Literal(code), Literal(WASTE_BY_STATUS[label]))
            for label, code in STATUS_CODES.items()
            if code != OK
        )
    )
    ok = Literal(OK)
    chain: list[tuple[Composable, tuple[Composable, ...]]] = []
    if "failed" not in disabled:
        chain.append((SQL("x.status <> {}").format(ok), (failed,) * 5))
    if "duplicate" not in disabled:
        chain.append((SQL("x.duplicate AND x.status = {}").format(ok), (Literal(WASTE_DUPLICATE),) * 5))
    if "truncated" not in disabled:
        truncated = (EFF_INPUT, WASTE_TRUNCATED, WASTE_TRUNCATED, WASTE_TRUNCATED, EFF_CACHE_WRITE)
        chain.append((SQL("x.finish_reason = {} AND x.status = {}").format(Literal(LENGTH), ok), _literals(truncated)))
    # The prompt, structural, output, reasoning and cache-write reasons of each link of the chain.
    default = _literals((EFF_INPUT, EFF_STRUCTURAL, EFF_OUTPUT, EFF_REASONING, EFF_CACHE_WRITE))
    prompt, structural, output, reasoning, cache_write = (
        _case([(when, then[i]) for when, then in chain], default[i]) for i in range(len(default))
    )
    reasons = [
        Literal(CACHE_PREFIX) if "prefix_cache" not in disabled else prompt,
        prompt,
        structural,
        output,
        Literal(WASTE_PADDING) if "padding" not in disabled else prompt,
        Literal(SHADOW_SPEC) if "spec_rejected" not in disabled else output,
        Literal(SHADOW_RECOMPUTE) if "recompute" not in disabled else prompt,
        reasoning,
        cache_write,
    ]
    if "unattributed" not in disabled:
        unattributed = SQL("CASE WHEN x.reconciliation THEN {} ELSE {} END")
        reasons = [unattributed.format(Literal(SHADOW_UNATTRIBUTED), r) for r in reasons]
    return reasons


def _literals(values: Iterable[int]) -> tuple[Composable, ...]:
    return tuple(Literal(v) for v in values)


def ruleset_sql(*, disabled: frozenset[str], moves: Sequence[MoveRule], prefix: str = "") -> RuleSetSql:
    """The reason expressions of a rule set: the built-ins not disabled, then the moves in order,
    a later move overriding an earlier one. `prefix` names its flags apart from another set's."""
    columns = record_columns()
    flags = tuple((f"{prefix}move_{i}", compile_sql(move.tree, columns)) for i, move in enumerate(moves))
    reasons = []
    for component, builtin in enumerate(_builtin_reasons(disabled)):
        # The last matching move wins: CASE takes the first WHEN that holds, so test them last first.
        branches: list[tuple[Composable, Composable]] = [
            (col("x", name), Literal(move.reason_id))
            for (name, _), move in reversed(list(zip(flags, moves, strict=True)))
            if component in move.components
        ]
        reasons.append(_case(branches, builtin))
    assert len(reasons) == len(COMPONENTS)
    return RuleSetSql(flags=flags, reasons=tuple(reasons))


def records_sql(*, start: datetime, end: datetime, flags: Sequence[tuple[str, Fragment]]) -> Fragment:
    """The records with ts in [start, end) and their flags, as a subquery (rows `x`). The window
    reads from 300 s before `start`, so the caller keeps only rows with `x.ts >= start`: a filter
    on a window query's output is not pushed beneath the window.

    Two branches: the candidates (ok, with a prompt hash) through the duplicate window, sorted by
    its partition, and the other records (never duplicates) read without sorting, from `start`."""
    computed = (("reconciliation", _reconciliation()), *flags)

    def select(extra: Sequence[Composable]) -> tuple[Composable, list[object]]:
        columns = [
            *(col("r", name) for name in _RECORD_FIELDS),
            SQL("COALESCE(d.rollup_id, d.id) AS rollup_dims_id"),
            *extra,
        ]
        params: list[object] = []
        for name, (condition, flag_params) in computed:
            columns.append(SQL("{} AS {}").format(condition, Identifier(name)))
            params += flag_params
        return commas(columns), params

    # OFFSET 0 keeps the candidates' columns computed before the sort: the window then sorts
    # narrow rows (no dims JSON), and only the candidates.
    columns, candidate_params = select(
        [SQL('r.prompt_hash, m.name COLLATE "C" AS model_name, d.business_line COLLATE "C" AS business_line')]
    )
    outer = [
        *(col("y", name) for name in [*_RECORD_FIELDS, "rollup_dims_id"]),
        SQL("{} AS duplicate").format(DUPLICATE),
        *(col("y", name) for name, _ in computed),
    ]
    others, other_params = select([SQL("false AS duplicate")])
    statement = SQL(
        "SELECT {outer} FROM (SELECT {columns} FROM {records} WHERE r.ts >= %s AND r.ts < %s AND {candidate} "
        "OFFSET 0) y UNION ALL SELECT {others} FROM {records} WHERE r.ts >= %s AND r.ts < %s AND NOT ({candidate})"
    ).format(outer=commas(outer), columns=columns, records=RECORD_FROM, candidate=CANDIDATE, others=others)
    return statement, [*candidate_params, start - WINDOW, end, *other_params, start, end]


def classes_sql(
    *, start: datetime, end: datetime, flags: Sequence[tuple[str, Fragment]], keys: Sequence[Composable]
) -> Fragment:
    """The records with ts in [start, end) summed per `keys` (SQL over a records_sql row `x`, as
    k0, k1, ...) and per everything a rule set's reasons read (status, finish reason, flags), as a
    subquery (rows `x`, with the tokens of each component as tokens_0 .. tokens_7). Classifying
    these groups instead of the records evaluates the reason expressions far fewer times."""
    records, params = records_sql(start=start, end=end, flags=flags)
    decisive = ["status", "finish_reason", "duplicate", "reconciliation", *(name for name, _ in flags)]
    groups = [
        *(SQL("{} AS {}").format(key, Identifier(f"k{i}")) for i, key in enumerate(keys)),
        *(SQL("{} AS {}").format(col("x", name), Identifier(name)) for name in decisive),
    ]
    # Each record's component counted only when positive, as ingest does (the contract makes it so).
    sums = [
        SQL("sum(GREATEST({}, 0)) AS {}").format(tokens, Identifier(f"tokens_{i}"))
        for i, tokens in enumerate(COMPONENT_TOKENS)
    ]
    statement = SQL("SELECT {} FROM ({}) x WHERE x.ts >= %s GROUP BY {}").format(
        commas([*groups, *sums]), records, commas(Literal(i + 1) for i in range(len(groups)))
    )
    return statement, [*params, start]


def _component_values(*reason_lists: Sequence[Composable]) -> Composable:
    """Per component of a classes_sql row: (component, its reason under each rule set, tokens),
    as a set-returning unnest of arrays (cheaper per row than a VALUES list)."""
    n = len(COMPONENTS)
    arrays = [
        _literals(range(n)),
        *(tuple(reasons[i] for i in range(n)) for reasons in reason_lists),
        tuple(col("x", f"tokens_{i}") for i in range(n)),
    ]
    return SQL("unnest({})").format(commas(SQL("ARRAY[{}]").format(commas(array)) for array in arrays))


def _rollup_key() -> tuple[Composable, ...]:
    """Ingest's rollup key: the hour bucket (of the accounting zone), source, model, rollup dims."""
    return (SQL(hour_floor_sql("x.ts")), SQL("x.source_id"), SQL("x.model_id"), SQL("x.rollup_dims_id"))


def reclassify_insert_sql(*, compiled: RuleSetSql, ruleset_id: int, start: datetime, end: datetime) -> Fragment:
    """INSERT the class rollup rows of the records in [start, end), whole hours, under a rule set."""
    classes, params = classes_sql(start=start, end=end, flags=compiled.flags, keys=_rollup_key())
    statement = SQL(
        "INSERT INTO {} (hour, source_id, model_id, dims_id, ruleset_id, reason_id, component, tokens) "
        "SELECT x.k0, x.k1, x.k2, x.k3, %s, c.reason_id, c.component, sum(c.tokens) "
        "FROM ({}) x CROSS JOIN LATERAL {} AS c(component, reason_id, tokens) "
        "WHERE c.tokens > 0 GROUP BY 1, 2, 3, 4, 5, 6, 7"
    ).format(table(HourlyClass), classes, _component_values(compiled.reasons))
    return statement, [ruleset_id, *params]


def moves_sql(*, before: RuleSetSql, after: RuleSetSql, start: datetime, end: datetime) -> Fragment:
    """(component, reason before, reason after, tokens) of the records in [start, end) whose
    components two rule sets put in different reasons. Their flags need different prefixes."""
    classes, params = classes_sql(start=start, end=end, flags=[*before.flags, *after.flags], keys=())
    statement = SQL(
        "SELECT c.component, c.before, c.after, sum(c.tokens)::bigint "
        "FROM ({}) x CROSS JOIN LATERAL {} AS c(component, before, after, tokens) "
        "WHERE c.tokens > 0 AND c.before <> c.after GROUP BY 1, 2, 3"
    ).format(classes, _component_values(before.reasons, after.reasons))
    return statement, params
