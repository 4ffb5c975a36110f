"""The estimates as the table `--dry-run` prints (:func:`format_estimates`), sampled
figures with their 95% margins. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from math import floor, inf, log10

from flask_eval.producer.estimate import Estimate
from flask_eval.producer.prefix import below_minimum


def _usd(e: Estimate, value: float, total: bool) -> str:
    if not e.unknown:
        return f"{value:.4f}"
    # the priced part, at least: "unknown" alone when nothing is priced
    return f">={value:.4f}" if total and value else "unknown"


def _share(margin: float, value: float) -> str:
    """``margin`` as a percentage of ``value``, to two significant digits."""
    share = 100 * margin / value if value else 0.0
    if not share or share == inf:
        return f"{share:.0f}%"
    return f"{share:.{max(0, 1 - floor(log10(share)))}f}%"


def _sampled(e: Estimate) -> str:
    """The line of a sampled estimate: its figures with their 95% margins."""
    margin = _share(e.prompt_margin, e.prompt_tokens)
    line = (
        f"{e.judge}: ~{e.prompt_tokens:,} prompt tokens (+-{margin}, 95%, from "
        f"{e.rendered:,} of {e.calls:,} calls rendered)"
    )
    if not e.unknown:
        line += f", ~{e.cost:.4f} USD live (+-{_share(e.cost_margin, e.cost)})"
    if e.cached_margin:
        line += f", ~{e.cached:,} calls from the answer cache (+-{e.cached_margin:,.0f})"
    return line


def format_estimates(estimates: Sequence[Estimate], worker: str = "judge") -> str:
    """The table `--dry-run` prints, one row per judge and a total: the cost of its calls
    made live, through the providers' batch APIs, and batched with their shared prompt
    prefix cached; with a note naming the judges without a price (their cost is unknown,
    not 0) and the calls the answer cache answers. ``worker``: who does the work, in the
    run's kind's words (``rubrics.kind.Words.worker``: a judge, a model, a critic)."""
    header = (
        f"{worker:<40} {'jobs':>8} {'calls':>8} {'ans.cache':>9} {'prompt tok':>12} "
        f"{'cache rd tok':>12} {'compl. tok':>11} {'live USD':>10} {'batch USD':>10} "
        f"{'+cache USD':>10}"
    )
    total = Estimate(
        "total",
        jobs=sum(e.jobs for e in estimates),
        calls=sum(e.calls for e in estimates),
        prompt_tokens=sum(e.prompt_tokens for e in estimates),
        image_tokens=sum(e.image_tokens for e in estimates),
        completion_tokens=sum(e.completion_tokens for e in estimates),
        cost=sum(e.cost for e in estimates),
        cached=sum(e.cached for e in estimates),
        priced=not any(e.unknown for e in estimates),
        batch_cost=sum(e.batch_cost for e in estimates),
        cache_cost=sum(e.cache_cost for e in estimates),
        cache_read_tokens=sum(e.cache_read_tokens for e in estimates),
        rendered=sum(e.rendered if e.rendered is not None else e.calls for e in estimates)
        if any(e.rendered is not None for e in estimates)
        else None,
        prompt_margin=sum(e.prompt_margin**2 for e in estimates) ** 0.5,
        cost_margin=sum(e.cost_margin**2 for e in estimates) ** 0.5,
        cached_margin=sum(e.cached_margin**2 for e in estimates) ** 0.5,
    )
    lines = [header, "-" * len(header)]
    for e in [*estimates, total]:
        live, batch, cached = (_usd(e, v, e is total) for v in (e.cost, e.batch_cost, e.cache_cost))
        lines.append(
            f"{e.judge[:40]:<40} {e.jobs:>8} {e.calls:>8} {e.cached:>9} {e.prompt_tokens:>12} "
            f"{e.cache_read_tokens:>12} {e.completion_tokens:>11} {live:>10} {batch:>10} "
            f"{cached:>10}"
        )
    if total.rendered is not None:
        lines += [_sampled(e) for e in [*estimates, total] if e.rendered is not None]
        lines.append(
            "~: estimated from a uniform sample of the calls of each judge and criteria "
            "(docs/design/estimates.md), within +- the 95% margin; the +cache USD from the "
            "prefix the sample shares"
        )
    if total.image_tokens:
        lines += [
            f"{e.judge}: {e.image_tokens:,} prompt tokens are images' (its provider's "
            "image-token rule, docs/design/images.md)"
            for e in estimates
            if e.image_tokens
        ]
        lines.append(f"total: {total.image_tokens:,} prompt tokens are images'")
    unpriced = [e.judge for e in estimates if e.unknown]
    if unpriced:
        their = "their calls is" if len(unpriced) > 1 else "its calls is"
        lines.append(
            f"no price for {', '.join(unpriced)}: the cost of {their} unknown (not 0); give "
            f"a {worker} `price: {{input: USD, output: USD}}` per million tokens in a "
            f"--{worker}s file (0 for a free local {worker})"
        )
    if total.cached:
        lines.append(
            f"{total.cached} of {total.calls} calls are answered from the answer cache (paid "
            "before, by this or another run): no tokens or cost counted for them"
        )
    if total.batch_cost != total.cost or total.cache_cost != total.batch_cost:
        lines.append(
            "live: each call on its own, at full price; batch: through the providers' batch "
            "APIs (each judge's batch price); +cache: batched, the prompt prefix the calls of "
            "a judge and criteria share written to the provider's cache once and read by the "
            "others (cache rd tok; a prefix under the model's minimum, 1,024 tokens for "
            "most, is not cached)"
        )
    lines += [
        below_minimum(e.judge, e.short_prefix, e.cache_minimum) for e in estimates if e.short_prefix
    ]
    lines += [
        f"{e.judge}: a reasoning model also thinks before it answers, billed as "
        f"completion tokens (answer and thinking up to {e.thinking_budget:,} a call): "
        "compl. tok and USD count the answers only"
        for e in estimates
        if e.thinking_budget and e.calls > e.cached
    ]
    return "\n".join(lines)
