"""End to end in a real browser: ``dmh serve``'s page driven by headless Chromium (Selenium with
Debian's ``chromium`` and ``chromium-driver``, installed by ``.ci/run``).

On a collection of generated shape photos (always) and on real product photos with their titles
(``../shared/data/fashion``, when present): type a query, check that the result thumbnails appear
in the order of the API's answer and load, upload a photo (file chooser and drop zone), and follow "More like this".
On the shapes: the search lives in the page's address (reload, Back, a shared link) and unknown
words are named on the page.
With ``DMH_WRITE_SCREENSHOT=1`` the fashion run writes ``docs/images/search_page.png``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA, import_or_skip, skip_unless

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FASHION = SHARED_DATA / "fashion"
REPO = Path(__file__).resolve().parents[2]

import_or_skip("selenium", "test")
import_or_skip("starlette", "serve")
pytestmark = skip_unless(
    Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), "chromium",
    f"headless Chromium not installed ({CHROMIUM}, {CHROMEDRIVER}): apt-get install chromium chromium-driver",
)

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _post_image(url, path: Path):
    req = urllib.request.Request(url, data=path.read_bytes(), method="POST",
                                 headers={"Content-Type": "image/" + path.suffix.lstrip(".").replace("jpg", "jpeg")})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _wait_done(driver, timeout=60):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.state") in ("done", "error")
    )
    assert driver.execute_script("return document.body.dataset.state") == "done", \
        driver.find_element("id", "status").text


def _shown(driver):
    """(ids of the result cards in page order, whether each thumbnail has loaded)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('#results img')].every(i => i.complete)"))
    cards = driver.execute_script(
        "return [...document.querySelectorAll('#results .hit')].map(f => {"
        " const i = f.querySelector('img');"
        " return [Number(f.dataset.id), i ? i.getAttribute('src') : null, i ? i.naturalWidth : -1]; })")
    return cards


def _check_matches(cards, answer):
    assert [c[0] for c in cards] == [r["id"] for r in answer["results"]]
    assert [c[1] for c in cards] == [r["thumbnail"] for r in answer["results"]]
    for c in cards:
        assert c[1] is None or c[2] > 0, f"thumbnail {c[1]} did not load"


def _drive(driver, url, query, upload: Path, k=12):
    """The user's path through the page; each step checked against the API's own answer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")
    driver.find_element(By.ID, "k").clear()
    driver.find_element(By.ID, "k").send_keys(str(k))

    # 1. a text query
    driver.find_element(By.ID, "q").send_keys(query)
    driver.find_element(By.ID, "go").click()
    _wait_done(driver)
    cards = _shown(driver)
    answer = _get(f"{url}/api/search?q={urllib.parse.quote(query)}&k={k}&target=images")
    assert len(answer["results"]) == k
    _check_matches(cards, answer)
    assert str(answer["results"][0]["distance"]) in driver.find_element(By.CSS_SELECTOR, ".hit .distance").text

    # 2. an uploaded photo
    driver.execute_script("document.body.dataset.state = ''")
    driver.find_element(By.ID, "file").send_keys(str(upload))
    _wait_done(driver)
    assert upload.name in driver.find_element(By.ID, "status").text
    cards = _shown(driver)
    _check_matches(cards, _post_image(f"{url}/api/search/image?k={k}&target=images", upload))

    # 2b. the same photo dropped on the drop zone (a real drop event carrying a File)
    driver.execute_script("document.body.dataset.state = ''")
    driver.execute_async_script("""
        const [url, done] = arguments;
        fetch(url).then(r => r.blob()).then(blob => {
          const dt = new DataTransfer();
          dt.items.add(new File([blob], "dropped" + url.slice(url.lastIndexOf(".")), {type: blob.type}));
          const zone = document.getElementById("drop");
          zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true}));
          zone.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true}));
          done();
        });""", "/photos/" + str(cards[0][0]))
    _wait_done(driver)
    assert "dropped" in driver.find_element(By.ID, "status").text
    first = cards[0][0]
    cards = _shown(driver)
    with urllib.request.urlopen(f"{url}/photos/{first}", timeout=30) as r:
        photo = r.read()
    tmp = upload.with_name("dropped" + upload.suffix)
    tmp.write_bytes(photo)
    _check_matches(cards, _post_image(f"{url}/api/search/image?k={k}&target=images", tmp))

    # 3. "More like this" on the second result
    second = cards[1][0]
    driver.execute_script("document.body.dataset.state = ''")
    driver.find_elements(By.CSS_SELECTOR, ".hit .more")[1].click()
    _wait_done(driver)
    cards = _shown(driver)
    answer = _get(f"{url}/api/similar/{second}?k={k}&target=images")
    _check_matches(cards, answer)
    assert second not in [c[0] for c in cards]

    # 4. a bad request shows the API's message, not a broken page
    driver.execute_script("document.body.dataset.state = ''")
    driver.find_element(By.ID, "k").clear()
    driver.find_element(By.ID, "k").send_keys("5000")
    driver.find_element(By.ID, "go").click()
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.state") == "error")
    assert "k must be between 1 and" in driver.find_element(By.ID, "status").text


def test_page_on_generated_shapes(browser, shapes_collection):
    from dmh.app.server import BackgroundServer, create_app

    with BackgroundServer(create_app(shapes_collection)) as srv:
        _drive(browser, srv.url, "a red circle", Path(shapes_collection).parent / "query.png", k=12)


def test_address_keeps_the_search_and_unknown_words_are_named(browser, shapes_collection):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from dmh.app.server import BackgroundServer, create_app

    def ids():
        _wait_done(browser)
        return [c[0] for c in _shown(browser)]

    def run(action):
        browser.execute_script("document.body.dataset.state = ''")
        action()
        return ids()

    with BackgroundServer(create_app(shapes_collection)) as srv:
        answer = [r["id"] for r in _get(f"{srv.url}/api/search?q=a+blue+cross&k=7&target=texts")["results"]]
        # a shared link runs its search
        assert run(lambda: browser.get(f"{srv.url}/?q=a+blue+cross&target=texts&k=7")) == answer
        assert browser.find_element(By.ID, "q").get_attribute("value") == "a blue cross"
        # a typed search goes into the address; "More like this" too; Back and reload return to them
        browser.find_element(By.ID, "q").clear()
        red = [r["id"] for r in _get(f"{srv.url}/api/search?q=a+red+circle+zzzz&k=7&target=texts")["results"]]
        assert run(lambda: browser.find_element(By.ID, "q").send_keys("a red circle zzzz\n")) == red
        assert "q=a+red+circle+zzzz" in browser.current_url and "target=texts" in browser.current_url
        assert "zzzz" in browser.find_element(By.ID, "notice").text  # named, left out
        like = run(lambda: browser.find_elements(By.CSS_SELECTOR, ".hit .more")[0].click())
        assert "like=" in browser.current_url and not browser.find_element(By.ID, "notice").is_displayed()
        assert like != red and run(browser.back) == red
        assert browser.find_element(By.ID, "q").get_attribute("value") == "a red circle zzzz"
        assert run(browser.back) == answer
        assert run(browser.forward) == red and run(browser.forward) == like and run(browser.refresh) == like
        # no known word: no ranking, and the page says why
        browser.find_element(By.ID, "q").clear()
        assert run(lambda: browser.find_element(By.ID, "q").send_keys("zzzz qqqq\n")) == []
        WebDriverWait(browser, 5).until(lambda d: "vocabulary" in d.find_element(By.ID, "status").text)


@skip_unless((FASHION / "texts.jsonl").is_file(), "shared-data", f"real data absent: {FASHION}")
def test_page_on_fashion_photos(browser, tmp_path):
    """237 real product photos (every 11th of the 2600, all 26 product types), titles kept for 4
    in 5 of them (semi-paired); a small DMH fit (1 round) keeps the build to about a minute."""
    import_or_skip("efficientnet_lite_pytorch", "images")
    from dmh.app.collection import build_collection
    from dmh.app.server import BackgroundServer, create_app

    rows = [json.loads(line) for line in (FASHION / "texts.jsonl").read_text().splitlines()][::11]
    photos = tmp_path / "photos"
    photos.mkdir()
    with open(tmp_path / "captions.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "caption"])
        for i, r in enumerate(rows):
            name = f"{r['row']:05d}.jpg"
            (photos / name).symlink_to(FASHION / "thumbs" / name)
            w.writerow([name, r["text"] if i % 5 else ""])
    col = build_collection(
        photos, tmp_path / "captions.csv", tmp_path / "col", method="dmh", n_bits=32,
        params={"n_rounds": 1, "hidden_size": 512, "d": 128, "dam_epochs": 10}, progress=False, log=lambda m: None,
    )
    query_photo = FASHION / "thumbs" / f"{rows[7]['row'] + 1:05d}.jpg"  # a photo not in the collection
    upload = tmp_path / "query.jpg"
    shutil.copy(query_photo, upload)
    with BackgroundServer(create_app(col)) as srv:
        _drive(browser, srv.url, "black watch", upload, k=12)
        if os.environ.get("DMH_WRITE_SCREENSHOT") == "1":
            from selenium.webdriver.common.by import By

            browser.set_window_size(1280, 860)
            browser.get(srv.url + "/")
            from selenium.webdriver.support.ui import WebDriverWait

            WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")
            browser.find_element(By.ID, "q").send_keys("women blue jeans")
            browser.find_element(By.ID, "go").click()
            _wait_done(browser)
            _shown(browser)
            out = REPO / "docs" / "images" / "search_page.png"
            out.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(out))
