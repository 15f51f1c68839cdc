"""MLflowTracker against a real sqlite tracking store."""

from __future__ import annotations

import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest
import yaml

from scheduler import Event
from scheduler.tracking import MLflowTracker, NullTracker, Tracker, TrackerStats, TrackingError

matplotlib.use("Agg")


def history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def read_artifact(client: Any, run_id: str, path: str, dst: Path) -> Path:
    return Path(client.download_artifacts(run_id, path, str(dst)))


def test_metrics_params_and_histories_arrive(sqlite_store: str, client: Any) -> None:
    tracker = MLflowTracker(sqlite_store, flush_interval_s=0.05, sink="thread")
    run_id = tracker.start(
        "histories",
        params={
            "store": {"url": "postgresql://sched:hunter2@db:5432/c", "password": "hunter2"},
            "policy": {"name": "learning_progress", "fast": 0.1},
            "seed": 3,
        },
        tags={"catalog_sha256": "abc"},
    )
    assert run_id is not None
    for step in range(120):
        tracker.log_metrics(
            {
                "weight/coding": step / 100,
                "probe/coding/unit tests": step % 7,
                "loss": 1 / (step + 1),
            },
            step,
        )
    assert tracker.flush(timeout=30)
    stats = tracker.close()
    assert stats.queued == stats.sent == 360 and stats.dropped == 0 and stats.pending == 0
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert history(client, run_id, "weight/coding") == [(s, s / 100) for s in range(120)]
    assert history(client, run_id, "probe/coding/unit tests") == [(s, s % 7) for s in range(120)]
    params = run.data.params
    assert params["policy.name"] == "learning_progress" and params["seed"] == "3"
    assert params["store.url"] == "postgresql://sched:***@db:5432/c"
    assert params["store.password"] == "***"
    assert not [k for k, v in params.items() if "hunter2" in v]
    assert params["versions.mlflow"][0].isdigit()
    assert run.data.tags["catalog_sha256"] == "abc"
    assert run.data.metrics["tracking/dropped"] == 0.0
    assert run.data.metrics["tracking/sent"] == 360.0


def test_events_artifacts_dict_and_figure(sqlite_store: str, client: Any, tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    tracker = MLflowTracker(sqlite_store, flush_interval_s=0.05, sink="thread")
    run_id = tracker.start("artifacts", params={})
    assert run_id is not None
    events = [
        Event(
            3, "tier_promoted", "fam_a", "coding", {"from": 0, "to": 1, "score": np.float64(0.8)}
        ),
        Event(3, "tier_promoted", "fam_b", "coding", {"from": 1, "to": 2}),
        Event(9, "regression", "fam_a", "coding", {"drop": 0.2}),
    ]
    tracker.log_events(events[:2])
    tracker.log_events(events[2:])
    manifest = tmp_path / "coding.yaml"
    manifest.write_text("domains: []\n")
    tracker.log_artifact(manifest, "manifests")
    manifest.write_text("changed after logging\n")  # the snapshot was taken at the call
    tracker.log_dict({"tiers": [0, 1], "arr": np.arange(3)}, "state/summary.json")
    tracker.log_dict({"a": {"b": 1}}, "settings.yaml")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    tracker.log_figure(fig, "figures/weights.png")
    ax.plot([0, 1], [0, 1])
    tracker.log_figure(fig, "figures/weights.png")  # a refresh of the same figure
    plt.close(fig)
    stats = tracker.close()
    assert stats.artifacts_sent + stats.artifacts_dropped == 5 and stats.dropped == 0

    lines = read_artifact(client, run_id, "events.jsonl", tmp_path / "dl").read_text().splitlines()
    got = [json.loads(line) for line in lines]
    assert [(e["step"], e["kind"], e["family"]) for e in got] == [
        (3, "tier_promoted", "fam_a"),
        (3, "tier_promoted", "fam_b"),
        (9, "regression", "fam_a"),
    ]
    assert got[0]["payload"] == {"from": 0, "to": 1, "score": 0.8}
    assert history(client, run_id, "events/tier_promoted") == [(3, 2.0)]
    assert history(client, run_id, "events/regression") == [(9, 1.0)]
    copy = read_artifact(client, run_id, "manifests/coding.yaml", tmp_path / "dl")
    assert copy.read_text() == "domains: []\n"
    summary = read_artifact(client, run_id, "state/summary.json", tmp_path / "dl")
    assert json.loads(summary.read_text()) == {"tiers": [0, 1], "arr": [0, 1, 2]}
    settings = read_artifact(client, run_id, "settings.yaml", tmp_path / "dl")
    assert yaml.safe_load(settings.read_text()) == {"a": {"b": 1}}
    png = read_artifact(client, run_id, "figures/weights.png", tmp_path / "dl")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resume_continues_the_same_run(sqlite_store: str, client: Any, tmp_path: Path) -> None:
    first = MLflowTracker(sqlite_store, flush_interval_s=0.05, sink="thread")
    run_id = first.start("resumable", params={"seed": 1})
    assert run_id is not None
    first.log_metrics({"loss": 1.0}, 0)
    first.log_events([Event(0, "plateau", "f")])
    first.close()
    second = MLflowTracker(sqlite_store, flush_interval_s=0.05, sink="thread")
    assert second.start("resumable", params={"seed": 2}, resume_run_id=run_id) == run_id
    second.log_metrics({"loss": 0.5}, 1)
    second.log_events([Event(1, "plateau", "g")])
    second.close()
    assert history(client, run_id, "loss") == [(0, 1.0), (1, 0.5)]
    assert history(client, run_id, "events/plateau") == [(0, 1.0), (1, 2.0)]
    assert client.get_run(run_id).data.params["seed"] == "1"  # params of a run are immutable
    lines = read_artifact(client, run_id, "events.jsonl", tmp_path).read_text().splitlines()
    assert [json.loads(x)["family"] for x in lines] == ["f", "g"]


def test_unknown_resume_id_and_bad_values_are_clear_errors(sqlite_store: str) -> None:
    tracker = MLflowTracker(sqlite_store)
    with pytest.raises(TrackingError, match="resume_run_id"):
        tracker.start("x", params={}, resume_run_id="0" * 32)
    with pytest.raises(TrackingError, match=r"step=4\): weight/a: must be a number"):
        tracker.log_metrics({"ok": 1.0, "weight/a": "high"}, 4)  # type: ignore[dict-item]
    with pytest.raises(TrackingError, match="batch_size"):
        MLflowTracker(sqlite_store, batch_size=5000)
    tracker.close()


def test_backlog_beyond_max_queue_is_thinned_and_counted(
    sqlite_store: str, client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing drains before start(): the worker is stalled while 60 steps x 10 keys arrive.
    tracker = MLflowTracker(sqlite_store, max_queue=100, flush_interval_s=0.05, sink="thread")
    for step in range(60):
        tracker.log_metrics({f"detail/f{i}": float(step) for i in range(10)}, step)
        assert tracker.stats.pending <= 100
    before = tracker.stats
    assert before.dropped > 0 and before.queued == 600
    run_id = tracker.start("thinned", params={})
    assert run_id is not None
    stats = tracker.close()
    assert stats.sent + stats.dropped + stats.coalesced == stats.queued == 600
    assert stats.dropped == before.dropped and stats.pending == 0
    arrived = sum(len(client.get_metric_history(run_id, f"detail/f{i}")) for i in range(10))
    assert arrived == stats.sent
    steps = [s for s, _ in history(client, run_id, "detail/f0")]
    assert steps[0] == 0 and steps[-1] == 59  # first and newest points survive thinning
    assert client.get_run(run_id).data.metrics["tracking/dropped"] == stats.dropped


@pytest.mark.parametrize("sink", ["process", "thread"])
def test_caller_never_waits_on_mlflow(
    sqlite_store: str, sink: str, caplog: pytest.LogCaptureFixture
) -> None:
    """300 families x 5 values per step while the worker sends to sqlite."""
    tracker = MLflowTracker(sqlite_store, flush_interval_s=0.05, sink=sink)
    tracker.start("nonblocking", params={})
    keys = [f"{kind}/domain_{f % 30}/family_{f}" for f in range(300) for kind in "abcde"]
    times = []
    for step in range(200):
        metrics = dict.fromkeys(keys, float(step))
        t0 = time.perf_counter()
        tracker.log_metrics(metrics, step)
        times.append(time.perf_counter() - t0)
    with caplog.at_level(logging.WARNING, logger="scheduler.tracking._mlflow"):
        stats = tracker.close(timeout=1.0)  # far too short for 300,000 values: the rest is lost
    assert statistics.median(times) < 5e-3, statistics.median(times)
    assert stats.queued == 300_000
    assert stats.sent + stats.dropped + stats.coalesced == stats.queued
    assert stats.dropped > 0 and stats.pending == 0
    assert f"lost {stats.dropped} metric values" in caplog.text


def test_null_tracker_has_the_same_interface() -> None:
    null = NullTracker()
    assert isinstance(null, Tracker) and isinstance(MLflowTracker(), Tracker)
    assert null.start("x", params={"a": 1}) is None
    null.log_metrics({"a": 1.0}, 0)
    null.log_events([Event(0, "plateau")])
    null.log_dict({}, "x.json")
    assert null.flush() is True
    assert null.close() == TrackerStats() == null.stats


@pytest.mark.slow
def test_process_sink_delivers_and_survives_its_helper_dying(
    sqlite_store: str, client: Any, tmp_path: Path
) -> None:
    """The default sink: MLflow calls in a helper process, restarted if it dies."""
    tracker = MLflowTracker(sqlite_store, flush_interval_s=0.05, retry_backoff_s=0.05)
    run_id = tracker.start("process-sink", params={})
    assert run_id is not None
    tracker.log_metrics({"a": 0.0}, 0)
    assert tracker.flush(timeout=60)
    sink = tracker._sink
    assert sink is not None and sink._proc is not None  # type: ignore[attr-defined]
    sink._proc.kill()  # type: ignore[attr-defined]
    sink._proc.wait()  # type: ignore[attr-defined]
    for step in range(1, 30):
        tracker.log_metrics({"a": float(step)}, step)
    (tmp_path / "notes.txt").write_text("hello")
    tracker.log_artifact(tmp_path / "notes.txt")
    stats = tracker.close()
    assert stats.sent == stats.queued == 30 and stats.dropped == 0
    assert history(client, run_id, "a") == [(s, float(s)) for s in range(30)]
    assert [a.path for a in client.list_artifacts(run_id)] == ["notes.txt"]


def test_file_store_uri_works(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    uri = f"file:{tmp_path}/mlruns"
    tracker = MLflowTracker(uri, flush_interval_s=0.05, sink="thread")
    run_id = tracker.start("file-store", params={"a": 1})
    assert run_id is not None
    for step in range(5):
        tracker.log_metrics({"x/y": float(step)}, step)
    assert tracker.close().sent == 5
    got = MlflowClient(tracking_uri=uri).get_metric_history(run_id, "x/y")
    assert sorted((m.step, m.value) for m in got) == [(s, float(s)) for s in range(5)]
