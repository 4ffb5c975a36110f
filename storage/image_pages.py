"""The images the viewer shows (``viewer.server``): an instance's, by the digests its row
names, and one image of a run with its bytes (``storage.images.run_images``)."""

from __future__ import annotations

from sqlalchemy import select

from flask_eval.core.images import ImageRef
from flask_eval.storage.models import INSTANCE
from flask_eval.storage.records import images_of
from flask_eval.storage.store import Store

INS = INSTANCE.c


def instance_images(store: Store, run_id: int, instance_id: str) -> tuple[ImageRef, ...]:
    """The images instance ``instance_id`` of run ``run_id`` names, in its order (none for
    an instance without images, or one the run does not hold)."""
    stmt = select(INS.images).where(INS.run_id == run_id, INS.instance_id == instance_id)
    with store.engine.connect() as conn:
        return images_of(conn.execute(stmt).scalar_one_or_none())
