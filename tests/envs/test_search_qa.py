"""SearchQA-v0: the frozen corpus, the FTS5 search tools, faults, tasks, controls and metrics."""

from __future__ import annotations

import gzip
import sqlite3

import pytest

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.envs.search_qa import (
    LEVELS,
    PROFILES,
    SearchQAEnv,
    corpus,
    make_env,
    resolve_faults,
    search_qa_tasks,
)
from proofgym.envs.search_qa.build_corpus import build, first_dependency
from proofgym.envs.search_qa.corpus import CORPUS_PATH, PAGE_SIZE, rank_of
from proofgym.envs.search_qa.tasks import aliases, generate
from proofgym.eval.validate import validate
from proofgym.rollout import ReferencePolicy, ScriptedPolicy, run_episode
from proofgym.tasks.splits import assign_split


@pytest.fixture(scope="module")
def docs():
    return corpus()


# ------------------------------------------------------------------ corpus and engine
def test_fts5_is_compiled_into_this_sqlite():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")  # raises "no such module: fts5" without it


def test_the_frozen_corpus_is_real_large_and_small_on_disk(docs):
    assert len(docs) >= 5000
    assert CORPUS_PATH.stat().st_size <= 10 * 2**20
    with gzip.open(CORPUS_PATH) as f:
        assert sum(1 for _ in f) == len(docs)
    assert docs.fields["python3"]["Section"] == "python"  # a real Debian fact
    assert sum("Depends" in f for f in docs.fields.values()) > len(docs) // 2


def test_the_corpus_build_is_a_pure_function_of_its_input():
    text = ("Package: b\nVersion: 1\nDepends: a (>= 1) | c, d\nDescription: the b tool\nMD5sum: x\n\n"
            "Package: a\nVersion: 2:3.0-1\nDescription: the a library\n continued here\n")
    assert build(text) == build(text)
    assert first_dependency("a (>= 1) | c, d") == "a"
    assert first_dependency("") is None
    for record in build(text):
        assert "MD5sum" not in record


def test_search_is_ranked_paginated_and_has_snippets(docs):
    first, second = docs.search("python library", 1), docs.search("python library", 2)
    assert first.total == second.total > 2 * PAGE_SIZE
    assert [h.rank for h in first.hits] == list(range(1, PAGE_SIZE + 1))
    assert [h.rank for h in second.hits] == list(range(PAGE_SIZE + 1, 2 * PAGE_SIZE + 1))
    assert not {h.doc_id for h in first.hits} & {h.doc_id for h in second.hits}
    assert all("[" in h.snippet for h in first.hits)  # the matched terms are marked
    assert docs.search("python3").hits[0].doc_id == "python3"  # an exact name comes first
    assert len(docs.linear_search("python library")) == first.total  # same set as a scan


def test_fts_operators_in_a_query_are_plain_words(docs):
    assert docs.search('python OR "NEAR(x' + "'", 1).total >= 0  # no sqlite3.OperationalError


def test_open_windows_cover_the_document_exactly(docs):
    env = make_env(faults="none", n_per_level=2)
    env.reset(seed=0)
    parts, offset = [], 0
    while True:
        obs, *_ = env.step(ToolCallAction("open", {"doc_id": "0ad", "offset": offset}))
        body = obs["observation"].split("\n", 1)[1]
        if body.endswith("[end of document]"):
            parts.append(body.removesuffix("[end of document]"))
            break
        text, _, tail = body.rpartition("[more: ")
        parts.append(text)
        offset = int(tail.split("offset=")[1].rstrip(")]"))
    assert len(parts) >= 2 and "".join(parts) == docs.text["0ad"]


def test_find_in_document_gives_the_offsets_open_takes(docs):
    env = make_env(faults="none", n_per_level=2)
    env.reset(seed=0)
    obs, *_ = env.step(ToolCallAction("find_in_document", {"doc_id": "0ad", "pattern": "installed-size"}))
    offset = int(obs["observation"].split("offset ")[1].split(":")[0])
    assert docs.text["0ad"][offset:].startswith("Installed-Size: ")
    obs, *_ = env.step(ToolCallAction("find_in_document", {"doc_id": "0ad", "pattern": "zzzq"}))
    assert "does not occur" in obs["observation"]


@pytest.mark.parametrize("action, kind", [
    (ToolCallAction("search", {"query": "x", "page": 0}), "invalid_arguments"),
    (ToolCallAction("search", {"query": "!!!"}), "invalid_arguments"),
    (ToolCallAction("open", {"doc_id": "no-such-package"}), "not_found"),
    (ToolCallAction("open", {"doc_id": "0ad", "offset": 10**6}), "invalid_arguments"),
    (ToolCallAction("wait", {"seconds": 3600}), "invalid_arguments"),
    (ToolCallAction("find_in_document", {"doc_id": "0ad", "pattern": ""}), "invalid_arguments"),
])
def test_bad_calls_are_typed_errors_that_say_what_to_do(action, kind):
    env = make_env(faults="none", n_per_level=2)
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step(action)
    assert obs["type"] == "tool_error" and info["error_kind"] == kind and not terminated
    assert len(obs["observation"]) > 20


# ------------------------------------------------------------------ faults
def test_fault_profiles_resolve_and_bad_ones_are_clear_errors():
    assert resolve_faults("none") == PROFILES["none"]
    assert resolve_faults({"timeout": 0.5}).timeout == 0.5
    with pytest.raises(ValueError, match="unknown fault profile 'flaky'"):
        resolve_faults("flaky")
    with pytest.raises(ValueError, match=r"unknown fault settings \['timeouts'\]"):
        make_env(faults={"timeouts": 0.1}, n_per_level=2)
    with pytest.raises(ValueError, match="add up to more than 1"):
        resolve_faults({"timeout": 0.6, "server_error": 0.6})


def _play(env: SearchQAEnv, task, seed: int):
    return run_episode(env, ReferencePolicy(), task=task, seed=seed, verify=True)


def test_the_same_seed_meets_the_same_faults_and_another_seed_others():
    env = make_env(faults="harsh", n_per_level=4)
    tasks = list(env.tasks)
    runs = {seed: [[(s.observation["observation"], s.info.get("error_kind"))
                    for s in _play(env, t, seed).steps] for t in tasks] for seed in (3, 4)}
    again = [[(s.observation["observation"], s.info.get("error_kind"))
              for s in _play(env, t, 3).steps] for t in tasks]
    assert again == runs[3]
    assert runs[3] != runs[4]
    assert any(kind for episode in runs[3] for _, kind in episode)


def test_every_fault_kind_is_visible_and_the_reference_recovers():
    env = make_env(faults="harsh", n_per_level=6)
    kinds, truncated_pages = set(), 0
    for i, task in enumerate(env.tasks):
        traj = _play(env, task, i)
        assert traj.verdict.reward == 1.0, task.id
        kinds |= {s.info["error_kind"] for s in traj.steps if "error_kind" in s.info}
        truncated_pages += sum("[truncated response" in s.observation["observation"] for s in traj.steps)
        m = traj.verdict.metrics
        assert m["faults_recovered"] == m["faults_met"]
    assert kinds == {"timeout", "rate_limited", "server_error", "not_found"}
    assert truncated_pages > 0


def test_a_rate_limit_holds_until_its_retry_after_has_passed():
    env = make_env(faults={"rate_limited": 1.0, "retry_after_s": 5.0, "max_consecutive": 1},
                   n_per_level=2)
    env.reset(seed=0)
    search = ToolCallAction("search", {"query": "python3"})
    obs, _, _, _, info = env.step(search)
    assert info["error_kind"] == "rate_limited" and "retry after 5 s" in obs["observation"]
    _, _, _, _, info = env.step(search)  # 0.5 s later: still limited
    assert info["error_kind"] == "rate_limited"
    env.step(ToolCallAction("wait", {"seconds": 5}))
    obs, _, _, _, info = env.step(search)
    assert "error_kind" not in info and "[python3]" in obs["observation"]


def test_a_stale_entry_stays_stale_until_a_new_search():
    env = make_env(faults={"stale": 1.0, "max_consecutive": 1}, n_per_level=2)
    env.reset(seed=0)
    _, _, _, _, info = env.step(ToolCallAction("open", {"doc_id": "0ad"}))
    assert info["error_kind"] == "not_found"
    _, _, _, _, info = env.step(ToolCallAction("open", {"doc_id": "0ad"}))  # no draw, still stale
    assert info["error_kind"] == "not_found"
    assert env.runtime.state["stale_doc"] == "0ad"
    _, _, _, _, info = env.step(ToolCallAction("search", {"query": "0ad"}))
    assert "error_kind" not in info and env.runtime.state["stale_doc"] is None  # refreshed


def test_no_faults_under_the_none_profile():
    env = make_env(faults="none", n_per_level=4)
    for task in env.tasks:
        traj = _play(env, task, 1)
        assert traj.verdict.reward == 1.0
        assert traj.verdict.metrics["faults_met"] == 0
        assert not any("error_kind" in s.info for s in traj.steps)


# ------------------------------------------------------------------ tasks, grading, controls
def test_tasks_are_many_graded_deterministic_and_split():
    tasks = search_qa_tasks()
    assert len(tasks) >= 500
    assert {t.level for t in tasks} == set(LEVELS)
    assert len(set(tasks.ids)) == len(tasks)
    again = generate(corpus(), 120)
    assert [(t.id, t.answer, t.question) for t in again] == [(t.id, t.answer, t.question) for t in tasks]
    multi_hop = [t for t in tasks if t.level in (4, 5)]
    assert multi_hop and all(len(t.gold_docs) == 2 and t.gold_docs[0] != t.gold_docs[1] for t in multi_hop)
    counts = tasks.manifest.counts()
    assert sum(counts.values()) == len(tasks) and all(counts[s] > 0 for s in ("train", "dev", "heldout"))
    assert tasks.split_of(tasks[0].id) == assign_split(tasks[0].id)  # the stable, id-hashed splitter


def test_answers_accept_their_aliases_and_nothing_else():
    assert aliases("Installed-Size", "44") == ("44", "44 KiB", "44 kB", "44 KB")
    assert aliases("Version", "1:2.3-1") == ("1:2.3-1", "2.3-1")
    assert aliases("Maintainer", "Jo Doe <jo@d.org>") == ("Jo Doe <jo@d.org>", "Jo Doe", "jo@d.org")
    task = next(t for t in search_qa_tasks() if t.answer.count("<") == 1)  # a maintainer
    env = make_env(faults="none", tasks=search_qa_tasks())
    for reply, reward in [(f"Answer: {task.accepted[1]}", 1.0), (f"Answer: {task.accepted[2].upper()}", 1.0),
                          (f"Answer: {task.accepted[1]} Jr", 0.0), (task.accepted[0], 1.0)]:
        traj = run_episode(env, ScriptedPolicy([TurnCompleteAction(reply)]), task=task, seed=0, verify=True)
        assert traj.verdict.reward == reward, reply


def test_some_answers_are_only_past_the_first_page(docs):
    deep = [t for t in search_qa_tasks() if t.level in (2, 3, 5)
            and rank_of(docs, t.plan.query, t.gold_docs[0], 50) > PAGE_SIZE]
    assert len(deep) >= 50
    env = make_env(faults="none", tasks=search_qa_tasks())
    traj = _play(env, deep[0], 0)
    assert traj.verdict.reward == 1.0 and traj.verdict.metrics["answer_page"] >= 2
    assert traj.verdict.metrics["found_after_first_page"] == 1.0
    assert "first_snippet" in dict(deep[0].wrong_answers)


@pytest.mark.parametrize("faults", ["none", "realistic", "harsh"])
def test_validate_reference_one_controls_zero_under_every_profile(faults):
    ids = [t.id for level in LEVELS for t in search_qa_tasks(levels=(level,))[:3]]
    ids += [t.id for t in search_qa_tasks() if "first_snippet" in dict(t.wrong_answers)][:3]
    report = validate("proofgym/SearchQA-v0", task_ids=ids, env_kwargs={"faults": faults})
    assert report.ok, [c.to_dict() for c in report.checks if not c.ok]
    names = {c.name for c in report.checks}
    assert {"control:guess", "control:neighbour", "control:hedge", "control:first_snippet"} <= names


def test_metrics_count_searches_pages_windows_and_faults():
    env = make_env(faults="realistic")
    task = next(t for t in env.tasks if t.level == 5)
    m = _play(env, task, 0).verdict.metrics
    assert m["searches"] >= 1 and m["pages_read"] >= 1 and m["windows_read"] >= 2
    assert m["answer_page"] >= 1
    assert m["faults_met"] == sum(m[f"fault_{k}"] for k in
                                  ("timeout", "rate_limited", "server_error", "truncated", "stale"))
