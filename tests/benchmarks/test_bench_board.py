"""``python -m benchmarks.board`` runs, against a real ``vfl board`` process, and reports every figure."""

import json

import pytest

pytestmark = pytest.mark.slow        # it starts a vfl board process


def test_the_board_benchmark_reports_its_figures(tmp_path):
    from benchmarks.board import main

    out = tmp_path / "board.json"
    assert main(["--runs", "120", "--messages", "300", "--repeats", "2", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    for key in ("runs_page_ms", "middle_page_ms", "long_run_page_ms", "live_panel_100_new_events_ms",
                "event_to_panel_ms"):
        assert figures[key] > 0, key
    assert figures["runs"] == 120 and figures["machine"]["cores"] >= 1
