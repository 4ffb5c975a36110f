"""The images of a run (schema version 14): each once, by SHA-256 (``core.images``)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select

from flask_eval.core.images import Image, ImageRef
from flask_eval.storage.leasing import WorkerLedger
from flask_eval.storage.models import IMAGE

IM = IMAGE.c


def run_images(store: WorkerLedger, run_id: int, digests: Collection[str]) -> dict[str, Image]:
    """The images of run ``run_id`` among ``digests``, by digest (bytes included); a
    digest the run does not hold is absent."""
    if not digests:
        return {}
    stmt = select(IM.sha256, IM.media_type, IM.width, IM.height, IM.size, IM.data).where(
        IM.run_id == run_id, IM.sha256.in_(sorted(set(digests)))
    )
    with store.engine.connect() as conn:
        return {
            row[0]: Image(ImageRef(row[0], row[1], row[2], row[3], row[4]), bytes(row[5]))
            for row in conn.execute(stmt)
        }
