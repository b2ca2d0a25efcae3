"""`replay.resume.Resume`: the one type for where a request resumed and why it fell short,
handed from the cache to the engine model and into the request record."""

from __future__ import annotations

from replay import records
from replay.records import RECORD_FIELDS, RequestRecord
from replay.resume import RESUME_COLUMNS, Resume
from replay.sim.cache import requests
from replay.sim.cache.requests import ResumeInfo
from replay.sim.engine import sequence as engine_seq


def _record() -> RequestRecord:
    return RequestRecord("e", 0, "t", "main", 0, 0.0)


def test_one_type_from_the_cache_to_the_record() -> None:
    assert requests.Resume is Resume and engine_seq.Resume is Resume and records.Resume is Resume
    assert set(RESUME_COLUMNS) <= set(RECORD_FIELDS)
    assert set(Resume(0).columns()) == set(RESUME_COLUMNS)


def test_a_lookup_leaves_the_cache_as_a_resume_with_equation_5() -> None:
    info = ResumeInfo(
        prompt_len=900, ideal_pos=800, checkpoint_pos=640, resident_pos=512, resume_pos=256,
        kv_pos=700,
    )  # fmt: skip
    r = info.resume()
    assert (r.cached, r.ideal, r.checkpoint_pos, r.resident_pos) == (256, 800, 640, 512)
    assert (r.placement_miss, r.capacity_miss, r.dependency_miss) == (160, 128, 256)
    rec = _record()
    rec.set_resume(r)
    assert (rec.cached_tokens, rec.ideal_cached_tokens, rec.resume_pos) == (256, 800, 256)
    assert (rec.placement_miss, rec.capacity_miss, rec.dependency_miss) == (160, 128, 256)
    assert (rec.checkpoint_pos, rec.resident_pos) == (640, 512)
    capped = r.capped(200)
    assert capped.cached == 200 and capped.columns()["ideal_cached_tokens"] == 800


def test_a_plain_kv_cache_says_only_where_it_resumed() -> None:
    rec = _record()
    rec.set_resume(Resume(128))
    assert (rec.cached_tokens, rec.ideal_cached_tokens, rec.resume_pos) == (128, 128, 128)
    assert rec.placement_miss is None and rec.checkpoint_pos is None
