"""An instance's images in the viewer, over HTTP: served by digest with their checked type,
``nosniff``, ``inline``, a CSP that runs nothing, cached for good (304 to a known ETag);
400 for what is no digest, 404 for one the run does not hold; the judgment and compare
pages show them (``<img>`` with width, height and alt text) under a CSP whose images come
from the viewer alone; the rating workspace shows a rater's item's images, and only its
own (docs/design/viewer.md, "Images")."""

from __future__ import annotations

import hashlib
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from flask_eval.app.rater_tokens import hash_token, new_token
from flask_eval.core.images import Image
from flask_eval.core.people import rater_judge
from flask_eval.storage import ratings
from flask_eval.storage.models import IMAGE, JUDGMENT
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.viewer import rate_server
from flask_eval.viewer.rate_security import RateOptions
from flask_eval.viewer.server import make_app
from tests.app.image_runs import create_image_run
from tests.viewer.rate_setup import serve
from tests.viewer.test_browser import Served

J = JUDGMENT.c


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()


def get(url: str, **headers: str) -> Answer:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return Answer(answer.status, dict(answer.headers), answer.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, dict(exc.headers), exc.read())


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, Store, RunInfo, list[Image]]]:
    folder = tmp_path_factory.mktemp("images")
    store = Store(f"sqlite:///{folder / 'store.db'}")
    run, images = create_image_run(store)
    create_image_run(store, "other")  # the same images, another run
    viewer = Served(make_app(store))
    try:
        yield viewer, store, run, images
    finally:
        viewer.close()


def first_judgment(store: Store, run: RunInfo, instance: str) -> int:
    with store.engine.connect() as conn:
        stmt = select(J.id).where(J.run_id == run.id, J.instance_id == instance).order_by(J.id)
        return int(conn.execute(stmt).scalars().first() or 0)


def test_an_image_is_served_with_its_checked_type_and_strict_headers(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, _, run, images = served
    for image in images:
        answer = get(f"{viewer.url}/runs/{run.name}/images/{image.ref.sha256}")
        assert answer.status == 200 and answer.body == image.data
        h = answer.headers
        assert h["Content-Type"] == image.ref.media_type
        assert h["X-Content-Type-Options"] == "nosniff"
        assert h["Content-Disposition"].startswith("inline; filename=")
        assert "default-src 'none'" in h["Content-Security-Policy"]
        assert "sandbox" in h["Content-Security-Policy"]
        assert "immutable" in h["Cache-Control"] and "max-age=31536000" in h["Cache-Control"]
        assert h["ETag"] == f'"{image.ref.sha256}"'
        assert h["Cross-Origin-Resource-Policy"] == "same-origin"
        assert hashlib.sha256(answer.body).hexdigest() == image.ref.sha256
        again = get(
            f"{viewer.url}/runs/{run.name}/images/{image.ref.sha256}",
            **{"If-None-Match": h["ETag"]},
        )
        assert again.status == 304 and again.body == b""


def test_an_unknown_or_malformed_digest_is_refused(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, _, run, images = served
    base = f"{viewer.url}/runs/{run.name}/images"
    unknown = get(f"{base}/{'0' * 64}")
    assert unknown.status == 404 and "holds no image" in unknown.text
    assert unknown.headers["Content-Type"].startswith("text/html")
    for bad in ("abc", "g" * 64, images[0].ref.sha256.upper(), images[0].ref.sha256 + "0"):
        answer = get(f"{base}/{bad}")
        assert answer.status == 400 and "64 lowercase hex digits" in answer.text, bad
    assert get(f"{viewer.url}/runs/nosuchrun/images/{images[0].ref.sha256}").status == 404
    posted = urllib.request.Request(f"{base}/{images[0].ref.sha256}", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(posted, timeout=10)
    assert caught.value.code == 405


def test_a_run_serves_only_its_own_images(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, store, run, images = served
    other = store.find_run("other")
    assert other is not None
    with store.engine.begin() as conn:  # run "other" loses one of its images
        conn.execute(
            IMAGE.delete().where(IMAGE.c.run_id == other.id, IMAGE.c.sha256 == images[2].ref.sha256)
        )
    digest = images[2].ref.sha256
    assert get(f"{viewer.url}/runs/other/images/{digest}").status == 404
    assert get(f"{viewer.url}/runs/{run.name}/images/{digest}").status == 200


def test_the_judgment_page_shows_the_instances_images_beside_the_judgment(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, store, run, images = served
    judgment = first_judgment(store, run, "q0")
    answer = get(f"{viewer.url}/runs/{run.name}/judgments/{judgment}")
    assert answer.status == 200
    csp = answer.headers["Content-Security-Policy"]
    assert "img-src 'self';" in csp and "data:" not in csp
    page = answer.text
    beside = page[page.index('<div class="beside">') :]
    shown = re.findall(r"<img [^>]*>", beside)
    assert len(shown) == 2  # the PNG and the JPEG, in the instance's order
    for tag, image in zip(shown, images[:2], strict=True):
        ref = image.ref
        assert f'src="/runs/{run.name}/images/{ref.sha256}"' in tag
        assert f'width="{ref.width}"' in tag and f'height="{ref.height}"' in tag
        assert f"of instance q0 ({ref.media_type}, {ref.width} x {ref.height} pixels)" in tag
    none = get(f"{viewer.url}/runs/{run.name}/judgments/{first_judgment(store, run, 'q2')}")
    assert none.status == 200 and "<img " not in none.text and 'id="images"' not in none.text


def test_the_compare_page_shows_the_instances_images(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, _, run, images = served
    answer = get(f"{viewer.url}/runs/{run.name}/compare?instance=q1&a=alpha&b=beta")
    assert answer.status == 200
    assert f'src="/runs/{run.name}/images/{images[2].ref.sha256}"' in answer.text


def test_no_viewer_page_allows_data_images(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    viewer, _, run, _ = served
    for path in ("/", f"/runs/{run.name}/judgments", "/nowhere"):
        answer = get(viewer.url + path)
        assert "data:" not in answer.headers["Content-Security-Policy"], path
        assert 'href="data:' not in answer.text
    assert get(f"{viewer.url}/static/favicon.svg").status == 200


def test_images_a_done_judgment_shows(
    served: tuple[Served, Store, RunInfo, list[Image]],
) -> None:
    """A judged row shows its score and rationale with the images beside."""
    viewer, store, run, images = served
    judgment = first_judgment(store, run, "q1")
    with store.engine.begin() as conn:
        conn.execute(
            update(JUDGMENT)
            .where(J.id == judgment)
            .values(status="done", score=4, rationale="The four bars are read right.")
        )
    page = get(f"{viewer.url}/runs/{run.name}/judgments/{judgment}").text
    judged, aside = page.index('id="rationale"'), page.index('id="images"')
    assert judged < aside and images[2].ref.sha256 in page[aside:]


def test_the_rating_workspace_serves_an_items_images_only(tmp_path: Path) -> None:
    """A rater sees the images of their item's instruction (by item, blind: no run name);
    an image of the run that the item's instruction does not carry is 404, and so is
    every image to one not signed in."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    run, images = create_image_run(store)
    criteria = store.instances(run.id, ["q0"])["q0"].skills
    planned = ratings.PlannedRating(
        judge=rater_judge("alice"),
        model="alpha",
        model_b="",
        instance_id="q0",
        criteria=tuple(criteria),
        rank=1.0,
        swapped=False,
    )
    assert ratings.plan_ratings(store, run.id, [planned]) == 1
    token = new_token()
    ratings.add_rater(store, "alice", hash_token(token), None, False)
    served = serve(rate_server.make_app(store, RateOptions()))
    client = next(served)
    try:
        item = client.get("/rate/next")  # claims alice's one item
        assert item.status == 403 or "/rate/signin" in item.url
        client.signin(token)
        item = client.get("/rate/next")
        assert item.status == 200 and "/rate/item/" in item.url, item.text
        assert run.name not in item.text
        assert "data:" not in item.headers["Content-Security-Policy"]
        shown = re.findall(
            r'<img src="([^"]+)" width="(\d+)" height="(\d+)" alt="([^"]+)"', item.text
        )
        assert [u.rsplit("/", 1)[1] for u, *_ in shown] == [i.ref.sha256 for i in images[:2]]
        assert all(a.startswith("Image ") and "of the instruction" in a for *_, a in shown)

        async def fetch(path: str) -> tuple[int, dict[str, str], bytes]:
            async with client.client.get(path) as resp:
                return resp.status, dict(resp.headers), await resp.read()

        status, headers, body = client.loop.run_until_complete(fetch(shown[0][0]))
        assert status == 200 and body == images[0].data
        assert headers["Content-Type"] == "image/png"
        assert headers["X-Content-Type-Options"] == "nosniff"
        item_path = shown[0][0].rsplit("/images/", 1)[0]
        other = client.loop.run_until_complete(fetch(f"{item_path}/images/{images[2].ref.sha256}"))
        assert other[0] == 404  # the run's, not this item's
        assert client.loop.run_until_complete(fetch(f"{item_path}/images/xyz"))[0] == 400
        csrf = re.findall(r'name="csrf" value="([^"]+)"', item.text)[0]
        client.post("/rate/signout", {"csrf": csrf})
        assert client.loop.run_until_complete(fetch(shown[0][0]))[0] == 403
    finally:
        served.close()
