"""A worker reads an image's bytes from the ledger once, not once per message: the
cache keeps them by (run, digest) within its byte budget, least recently used out."""

from __future__ import annotations

from pathlib import Path

from flask_eval.storage.store import Store
from flask_eval.workers.image_cache import ImageCache
from tests.app.image_runs import create_image_run


def test_an_image_is_read_once_and_the_budget_holds(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        run, images = create_image_run(store)
        png, jpeg, webp = images
        cache = ImageCache(store)
        first = cache.images(run.id, [png.ref.sha256, jpeg.ref.sha256])
        again = cache.images(run.id, [png.ref.sha256, jpeg.ref.sha256])
        assert first == again == {png.ref.sha256: png, jpeg.ref.sha256: jpeg}
        assert cache.reads == 1  # the second message's images came from the cache
        assert cache.images(run.id, ["0" * 64]) == {} and cache.reads == 2  # not the run's
        assert cache.images(run.id + 1, [png.ref.sha256]) == {}  # another run's: none
        assert len(png.data) <= len(jpeg.data)  # so the budget holds png + webp, then webp + jpeg
        small = ImageCache(store, budget=len(webp.data) + len(jpeg.data))
        small.images(run.id, [png.ref.sha256])
        small.images(run.id, [webp.ref.sha256])
        small.images(run.id, [jpeg.ref.sha256])  # over budget: the png, least recent, out
        reads = small.reads
        assert small.images(run.id, [jpeg.ref.sha256]) == {jpeg.ref.sha256: jpeg}
        assert small.reads == reads
        assert small.images(run.id, [png.ref.sha256]) == {png.ref.sha256: png}
        assert small.reads == reads + 1
    finally:
        store.close()
