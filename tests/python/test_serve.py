"""`deeptree serve` used as a person uses it: the page in headless Chromium, driven by selenium through Debian's
chromium-driver, over a store grown by the real Stockfish (engine depth 8, software depth 2).

Usage: python3 tests/python/test_serve.py DEEPTREE_BINARY [--screenshots DIR]
The page loads; a click on a move walks into it (the board's FEN changes); an exclusion made in the page holds in
`deeptree show --json`; a task added in the page is in `deeptree task list`; the live view's numbers change, without a reload, while an `analyze` runs beside serve.
Prints one line per step and exits 1 on any failure. With --screenshots, PNGs of the page are saved in DIR.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BINARY = sys.argv[1]
SHOTS = sys.argv[sys.argv.index("--screenshots") + 1] if "--screenshots" in sys.argv else None
STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
START = time.monotonic()


def step(text):
    print(f"{time.monotonic() - START:5.1f}s  {text}", flush=True)


def deeptree(db, *args, **kwargs):
    env = {k: v for k, v in os.environ.items() if k not in ("DEEPTREE_DB", "DEEPTREE_CONFIG")}
    return subprocess.run([BINARY, "--db", db, *args], check=True, capture_output=True, text=True, env=env, **kwargs)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1500,860", f"--user-data-dir={tempfile.mkdtemp()}"]:
        options.add_argument(arg)
    # Debian's chromedriver: selenium downloads nothing.
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def fresh(action):
    """`action` done again while the page's periodic refresh replaces the elements it found."""
    for _ in range(50):
        try:
            return action()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return action()


def waiting(driver, seconds):
    return WebDriverWait(driver, seconds, ignored_exceptions=[StaleElementReferenceException])


def shot(driver, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        driver.save_screenshot(os.path.join(SHOTS, name))


def main():
    work = tempfile.mkdtemp(prefix="deeptree-serve-")
    db = os.path.join(work, "tree")
    serve = analyze = driver = None
    try:
        deeptree(db, "analyze", "--engine-depth", "8", "--max-depth", "2", "--engine", STOCKFISH)
        step("store grown by Stockfish: engine depth 8, software depth 2")
        serve = subprocess.Popen([BINARY, "--db", db, "serve", "--port", "0"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        url = serve.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url, url
        step(f"serve prints {url.split('?')[0]}?token=...")

        driver = browser()
        wait = waiting(driver, 10)
        driver.get(url)
        rows = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#moves tbody tr"))
        board = driver.find_element(By.ID, "board")
        start_fen = board.get_attribute("data-fen")
        assert start_fen.startswith("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w"), start_fen
        assert driver.find_elements(By.CSS_SELECTOR, "#board cg-board piece"), "the board has pieces"
        depth = fresh(lambda: driver.find_element(By.ID, "depth").text)
        assert depth.startswith("2"), depth
        assert fresh(lambda: driver.find_element(By.ID, "main-line").find_elements(By.TAG_NAME, "a")), "a main line"
        wait.until(lambda d: d.find_element(By.ID, "live-positions").text not in ("", "–"))
        step(f"the page loads: {len(rows)} moves, settled depth 2, "
             f"{driver.find_element(By.ID, 'live-positions').text} positions")
        shot(driver, "position.png")

        # A click on a move walks into it.
        def click_best():
            row = driver.find_element(By.CSS_SELECTOR, "#moves tbody tr")
            uci = row.get_attribute("data-uci")
            row.click()
            return uci

        best = fresh(click_best)
        wait.until(lambda d: d.find_element(By.ID, "board").get_attribute("data-fen") != start_fen)
        walked = driver.find_element(By.ID, "board").get_attribute("data-fen")
        assert " b " in walked, walked
        crumb = fresh(lambda: driver.find_elements(By.CSS_SELECTOR, f"#breadcrumb a[data-uci='{best}']"))
        assert crumb, "the move is in the line"
        shown = json.loads(deeptree(db, "show", "--json", "--moves", best, "--depth", "1").stdout)
        assert shown["fen"] == walked, (shown["fen"], walked)
        step(f"a click on {best} walks into it: {walked}")
        time.sleep(0.4 if SHOTS else 0)  # the board's animation
        shot(driver, "walked.png")

        # Back to the root, and a move excluded from the page.
        driver.find_element(By.ID, "back").click()
        wait.until(lambda d: d.find_element(By.ID, "board").get_attribute("data-fen") == start_fen)
        def exclude_second():
            row = driver.find_elements(By.CSS_SELECTOR, "#moves tbody tr")[1]
            uci = row.get_attribute("data-uci")
            row.find_element(By.CSS_SELECTOR, "button.mark-exclude").click()
            return uci

        target = fresh(exclude_second)
        wait.until(lambda d: "excluded" in (d.find_element(By.CSS_SELECTOR, f"#moves tr[data-uci='{target}']")
                                           .get_attribute("class") or "")
                   or "cannot" in d.find_element(By.ID, "message").text)
        message = driver.find_element(By.ID, "message").text
        assert "cannot" not in message, f"the page says: {message}"
        tree = json.loads(deeptree(db, "show", "--json", "--depth", "1").stdout)
        assert all(m["uci"] != target for m in tree["moves"]), "an excluded move is no move of the tree"
        marks = [m for m in tree.get("marks", []) if m["move"] == target]
        assert marks and marks[0]["kind"] == "exclude" and marks[0]["source"] == "serve", tree.get("marks")
        step(f"{target} excluded in the page; `show --json` leaves it out of the moves and lists its mark")
        time.sleep(0.4 if SHOTS else 0)  # the board's animation
        shot(driver, "excluded.png")

        # The move table stays inside its card, its buttons too, down to the narrowest window of three columns.
        for width in (1500, 1400, 1391):
            driver.set_window_size(width, 860)
            sticking_out = driver.execute_script("""
                const card = document.querySelector('.position-column .panel').getBoundingClientRect();
                return [...document.querySelectorAll('#moves button')]
                    .map((b) => b.getBoundingClientRect())
                    .filter((r) => r.left < card.left || r.right > card.right).length;""")
            assert sticking_out == 0, f"{sticking_out} buttons stick out of the Position card at {width} px"
        driver.set_window_size(1500, 860)
        step("the move table's buttons stay inside the Position card at 1500, 1400 and 1391 px")

        # A task for this position, added from the page.
        driver.find_element(By.ID, "add-task").click()
        wait.until(lambda d: "added" in d.find_element(By.ID, "task-message").text
                   or "cannot" in d.find_element(By.ID, "task-message").text)
        assert "task 1 added" in driver.find_element(By.ID, "task-message").text, \
            driver.find_element(By.ID, "task-message").text
        tasks = json.loads(deeptree(db, "task", "list", "--json").stdout)
        assert len(tasks) == 1 and tasks[0]["budget_seconds"] == 600, tasks
        step("a task added from the page is in `task list`")

        # The live view, while an analysis grows the tree beside serve.
        before = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-positions"))
        analyze = subprocess.Popen([BINARY, "--db", db, "analyze", "--engine-depth", "8", "--max-depth", "12",
                                    "--time", "20", "--engine", STOCKFISH],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        waiting(driver, 15).until(
            lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-positions")) > before)
        after = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-positions"))
        step(f"the live view updates while analyze runs: {before} -> {after} positions, no reload")
        if SHOTS:  # a picture with the searches running listed, when one is caught
            for _ in range(30):
                if driver.find_element(By.ID, "live-running").text not in ("0", "–") and \
                        driver.find_elements(By.CSS_SELECTOR, "#searching li"):
                    break
                time.sleep(0.1)
            time.sleep(0.5)
            shot(driver, "live.png")
        assert driver.execute_script("return performance.getEntriesByType('navigation').length") == 1
        elapsed = time.monotonic() - START
        assert elapsed < 30, f"{elapsed:.1f}s"
        step(f"passed in {elapsed:.1f}s")
    finally:
        if driver:
            driver.quit()
        for process in (analyze, serve):
            if process and process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line for the test's output, then the trace
        print(f"FAILED: {type(e).__name__}: {e}", flush=True)
        raise
