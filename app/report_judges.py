"""What a report says of a run's judges, from its stored configuration and the ledger:
each judge's paid calls and their cost, how each was sampled, and the protocol each was
asked in (``app.report``)."""

from __future__ import annotations

from dataclasses import replace

from flask_eval.app.progress import cost_unknown
from flask_eval.app.score_tables import judge_of
from flask_eval.core.models import model_info
from flask_eval.core.people import is_person
from flask_eval.core.redact import redact
from flask_eval.core.stored import StoredConfig
from flask_eval.report.document import JudgeCost, JudgeSettings
from flask_eval.storage import queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.judge import PROVIDERS, judge_class

__all__ = ["judge_costs", "judge_protocols", "judge_settings"]


def judge_costs(store: Store, run: RunInfo) -> list[JudgeCost]:
    """Each judge's paid calls, a judge's samples summed into it."""
    costs: dict[str, JudgeCost] = {}
    unknown = cost_unknown(run.config)
    for c in queries.judge_costs(store, run.id):
        judge = judge_of(str(c["judge"]), run.config)
        had = costs.get(judge, JudgeCost(judge, unpriced=unknown.get(judge, "")))
        costs[judge] = replace(had, **{k: getattr(had, k) + c[k] for k in list(c)[1:]})
    return list(costs.values())


def _takes_temperature(spec: str) -> bool:
    provider = spec.split("/", 1)[0].strip()
    return provider not in PROVIDERS or judge_class(provider).takes_temperature


def judge_settings(config: StoredConfig) -> list[JudgeSettings]:
    """How each judge of a run was sampled, from its config (bare names in older runs:
    the defaults); unset values are the defaults a call uses, Anthropic specs have the
    provider's default temperature; text is redacted."""
    settings = []
    for judge in config.every_judge():
        if judge.sample or is_person(judge.name):  # a later sample: its judge is listed once
            continue
        name = judge_of(judge.name, config)
        spec = judge.spec or name
        max_tokens, temperature = judge.max_tokens, judge.temperature
        model = model_info(spec.partition("@")[0])  # the defaults its calls were sent
        if not _takes_temperature(spec):
            temperature = None  # the provider's default applies
        else:
            given = None if temperature is None else float(temperature)
            temperature = model.sampling_temperature(given)  # None: the model's own
        settings.append(
            JudgeSettings(
                name=redact(name),
                spec=redact(spec),
                max_tokens=model.budget(None if max_tokens is None else int(max_tokens)),
                temperature=temperature,
            )
        )
    return settings


def judge_protocols(config: StoredConfig) -> dict[str, str | None]:
    """Judge name -> the protocol its config names (None: the default one)."""
    return {j.name: j.protocol for j in config.every_judge()}
