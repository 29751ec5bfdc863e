"""``vfl board`` in a real headless browser (Debian's Chromium and chromedriver, driven by Selenium).

Three ``vfl party`` processes train while a board per party runs as its own process:
the coordinator's board follows the run live (its progress advances and its loss curve
grows while the run is under way) and then shows the loss curve with one point per
epoch; the label party's shows its metrics and curves; the feature party's shows none of the label party's
values or the coordinator's losses, and its "what this party learned" table is its
transcript (the messages B's and C's transcripts say they sent it).  No page logs a console error.  With ``VFL_BOARD_SCREENSHOTS=DIR`` the
test saves the screenshots docs/board.md shows.
"""

import os
import re
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from vfl_net_helpers import (Party, _free_ports, federation_certs, finish_all, kill_all,  # noqa: F401
                                   start_parties, write_federation_file, write_party_data)

pytestmark = pytest.mark.slow

EPOCHS = 40


def _need(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests need {what} (.ci/run installs Debian's chromium and chromium-driver)")
    pytest.skip(f"needs {what}: apt-get install chromium chromium-driver; pip install selenium")


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _need("selenium")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        _need("chromium and chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1500", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)   # no download
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _console_errors(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _shot(driver, name: str) -> None:
    folder = os.environ.get("VFL_BOARD_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.execute_script("window.scrollTo(0, 0)")
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1280, min(max(900, height + 40), 4000))
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))
        driver.set_window_size(1280, 1500)


def _board(workdir: Path, folder: Path) -> tuple[Party, str]:
    port = _free_ports(1)[0]
    board = Party(["board", "--workdir", workdir, "--port", port], folder)
    board.wait_for_line("vfl board:", timeout=60)
    return board, f"http://127.0.0.1:{port}"


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_three_boards_follow_a_federation_and_show_each_party_only_its_own(tmp_path, federation_certs, browser):
    from selenium.webdriver.common.by import By

    ours, _ = federation_certs
    data = write_party_data(tmp_path, n_rows=300)
    config = write_federation_file(tmp_path / "federation.toml", ours, _free_ports(3),
                                   # every epoch runs (tol 0): a run that converged early could end before the
                                   # boards are up, and this test follows one while it is under way
                                   training={"iterations": EPOCHS, "batch_size": 0, "learning_rate": 0.5, "tol": 0})
    work = tmp_path / "work"
    parties = start_parties("party", config, data, work)
    boards = {}
    try:
        for role in ("B", "A", "C"):
            _wait(lambda role=role: (work / role / "runs").is_dir(), 60, f"{role}'s run record")
        for role in ("B", "A", "C"):
            boards[role] = _board(work / role, tmp_path / "boards")

        # -- the label party's runs, then the coordinator's board followed live: its loss curve grows ------
        browser.get(boards["B"][1])
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, "#runs a"), 30, "the run in the list")
        assert "running" in browser.find_element(By.ID, "runs").text
        _shot(browser, "runs")
        browser.get(boards["C"][1])
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, "#runs a"), 30, "the run in the list")[0].click()
        seen, curve = set(), set()

        def progress():
            try:
                status = browser.find_element(By.ID, "run-status").text
                if status == "running":
                    seen.update(e.text for e in browser.find_elements(By.CSS_SELECTOR, "#live .progress"))
                    curve.update(int(e.get_attribute("data-points")) for e in
                                 browser.find_elements(By.CSS_SELECTOR, "#loss-live-0 polyline.series"))
                    if len(curve) == 3:
                        _shot(browser, "run-live")
                return status != "running"
            except Exception:      # the panel is being replaced: read it again
                return False

        _wait(progress, 300, "the run's end")
        assert len(seen) >= 2, f"the live panel did not advance while the run was under way: {seen}"
        assert len(curve) >= 2 and max(curve) <= EPOCHS, f"the loss curve did not grow: {curve}"
        results = finish_all(parties, 120)
        assert all(code == 0 for code, _, _ in results.values()), results
        browser.get(boards["B"][1])
        browser.find_element(By.CSS_SELECTOR, "#runs a").click()
        _wait(lambda: browser.find_elements(By.ID, "roc-training"), 30, "the ROC curve")
        roc = browser.find_element(By.CSS_SELECTOR, "#roc-training polyline.series")
        assert int(roc.get_attribute("data-points")) >= 3
        assert browser.find_elements(By.ID, "ks-training") and browser.find_elements(By.ID, "lift-training")
        assert browser.find_elements(By.ID, "confusion")
        auc = re.search(r"AUC \((\d\.\d{4})\)|AUC (\d\.\d{4})", browser.page_source)
        assert auc, "no AUC on the label party's board"
        auc_text = auc.group(1) or auc.group(2)
        assert "public_key" in browser.find_element(By.ID, "received").text
        assert _console_errors(browser) == []
        _shot(browser, "run-label")

        # -- the coordinator's board: one loss point per epoch ---------------------------------------
        browser.get(boards["C"][1])
        browser.find_element(By.CSS_SELECTOR, "#runs a").click()
        final = browser.find_element(By.CSS_SELECTOR, "#loss-final polyline.series")
        assert int(final.get_attribute("data-points")) == EPOCHS
        losses = [float(x) for x in re.findall(r"final loss (\d+\.\d+)", results["C"][1])]
        assert _console_errors(browser) == []
        _shot(browser, "run-coordinator")

        # -- the feature party's board: none of the others' values; its transcript ---------------------
        browser.get(boards["A"][1])
        browser.find_element(By.CSS_SELECTOR, "#runs a").click()
        page = browser.page_source
        assert auc_text not in page and "roc-training" not in page and "AUC" not in page
        assert losses and all(f"{loss:.4f}" not in page for loss in losses)
        assert not browser.find_elements(By.CSS_SELECTOR, "[id^=loss-]")
        sent = pd.concat([pd.read_csv(work / role / "transcript_train.csv") for role in ("B", "C")])
        mine = sent[sent["receiver"] == "A"].groupby("name").size().to_dict()   # what B and C sent A
        shown: dict = {}
        for row in browser.find_elements(By.CSS_SELECTOR, "#received tbody tr"):
            cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
            shown[cells[1]] = shown.get(cells[1], 0) + int(cells[4].replace(",", ""))
        assert shown == mine
        assert _console_errors(browser) == []
        _shot(browser, "run-feature")
    finally:
        kill_all(parties)
        for board, _ in boards.values():
            board.kill()


def test_a_saved_fit_s_trees_and_a_service_s_growing_charts(tmp_path, browser):
    """An estimator's record (save_run) opened with vfl board --run: the trees page; a serving record whose
    service answers /metrics (a real Metrics over HTTP, fed requests as the page watches): its charts grow."""
    import threading

    from selenium.webdriver.common.by import By

    from test_board import _two_parties, serve_metrics
    from vfl import VerticalGradientBoostingClassifier
    from vfl.deploy.record import RunRecord
    from vfl.serving.metrics import Metrics

    data = _two_parties()
    trees = VerticalGradientBoostingClassifier(max_iter=3, max_depth=3, key_bits=1024, insecure=True,
                                               random_state=0).fit(data)
    folder = trees.save_run(tmp_path / "fit", data)
    metrics = Metrics()
    server = serve_metrics(metrics)
    service = RunRecord(tmp_path / "fit", "serve", "serving", "B", "label", {"A": "feature", "B": "label"}, {})
    service.update(http=f"http://127.0.0.1:{server.server_address[1]}")
    stop = threading.Event()

    def traffic():
        k = 0
        while not stop.wait(0.02):
            k += 1
            error = {"code": "missing_row", "party": "A", "message": ""} if k % 50 == 0 else None
            metrics.answered(200, 0.004 + 0.002 * (k % 7), [{"id": str(k), **({"error": error} if error else {})}])

    threading.Thread(target=traffic, daemon=True).start()
    board, url = _board(tmp_path / "fit", tmp_path / "boards")
    try:
        browser.get(f"{url}/runs/{folder.name}?tree=2")
        assert browser.find_elements(By.ID, "tree") and browser.find_elements(By.ID, "importances")
        assert browser.find_elements(By.CSS_SELECTOR, "#tree g.node.own")
        assert _console_errors(browser) == []
        _shot(browser, "run-trees")
        browser.get(f"{url}/runs/{service.id}")

        def points():
            try:
                return int(browser.find_element(By.CSS_SELECTOR, "#serving-rate polyline.series")
                           .get_attribute("data-points"))
            except Exception:
                return 0

        first = _wait(points, 30, "the requests-per-second chart")
        _wait(lambda: points() >= first + 3, 30, "the chart to grow")
        assert browser.find_elements(By.ID, "serving-latency")
        assert "missing_row" in browser.find_element(By.ID, "errors").text
        assert _console_errors(browser) == []
        _shot(browser, "serving")
    finally:
        stop.set()
        server.shutdown()
        board.kill()
