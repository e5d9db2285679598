"""The browser page in a real headless Chromium, against a real server with the shipped
models: a typed question, and a spoken one fed to the page's microphone by Chromium's
fake-capture flags from an espeak-made wav, each answered on the page.

Chromium and ChromeDriver are Debian's (``chromium``, ``chromium-driver``; installed by
.ci/run from README's apt line). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from quicksilver.assistant.config import Settings
from quicksilver.assistant.stages import UNSURE
from quicksilver.audio.wavfile import write_wav
from quicksilver.ui.server.config import ServerConfig
from quicksilver.ui.server.service import Models, Service
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

TURN_S = 120.0  # the slowest a whole turn may take on this machine's CPU
CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
)  # fmt: skip


class RunningService:
    """A :class:`Service` on its own event loop in a thread, for a blocking browser test."""

    def __init__(self, models: Models, log_path: Path) -> None:
        self.models, self.log_path = models, log_path
        self.started = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._serve(),))
        self.port = 0

    async def _serve(self) -> None:
        self.stop = asyncio.Event()
        settings = Settings(steps=8, log_path=self.log_path)
        async with Service(settings, ServerConfig(port=0, token="secret"), self.models) as service:
            self.port = service.port
            self.started.set()
            await self.stop.wait()

    def __enter__(self) -> RunningService:
        self.thread.start()
        if not self.started.wait(30):
            raise TimeoutError("the service did not start within 30 s")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(60)

    @property
    def page(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token=secret"


@pytest.fixture(scope="module")
def running(reasoner, transcriber, voice, tmp_path_factory) -> Iterator[RunningService]:
    log_path = tmp_path_factory.mktemp("page") / "log.jsonl"
    with RunningService(Models(reasoner, transcriber, voice), log_path) as service:
        yield service


def chromium(tmp_path: Path, microphone: Path | None = None) -> WebDriver:
    """Debian's headless Chromium; ``microphone``: a wav it plays once as the microphone."""
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    if microphone is not None:
        options.add_argument(f"--use-file-for-fake-audio-capture={microphone}%noloop")
    driver = webdriver.Chrome(options, DriverService(shutil.which("chromedriver")))
    driver.set_page_load_timeout(30)
    return driver


def wait_for(driver: WebDriver, condition, timeout: float, what: str):
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda _: condition(), message=f"{what} within {timeout:g} s"
    )


def finished_turns(driver: WebDriver) -> list[dict[str, str]]:
    """The page's conversation: each turn whose answer is done (its timings shown)."""
    turns = []
    for article in driver.find_elements(By.CSS_SELECTOR, "#conversation .turn"):
        user, answer, meta = (article.find_element(By.CLASS_NAME, part) for part in
                              ("user", "answer", "meta"))  # fmt: skip
        if meta.text:
            turns.append({"user": user.text, "answer": answer.text, "meta": meta.text})
    return turns


def counter(driver: WebDriver, name: str) -> int:
    return int(driver.find_element(By.TAG_NAME, "body").get_attribute(f"data-{name}") or 0)


def open_page(driver: WebDriver, service: RunningService) -> None:
    driver.get(service.page)
    body = driver.find_element(By.TAG_NAME, "body")
    wait_for(driver, lambda: body.get_attribute("data-state") == "ready", 30, "connected")


def test_the_page_and_its_files_are_served_with_a_strict_policy(running: RunningService):
    base = f"http://127.0.0.1:{running.port}"
    with urllib.request.urlopen(f"{base}/", timeout=10) as response:
        page = response.read().decode()
        policy = response.headers["Content-Security-Policy"]
    assert '<script type="module" src="app.js">' in page
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    for name in ("app.js", "capture.js", "style.css"):
        with urllib.request.urlopen(f"{base}/{name}", timeout=10) as response:
            assert response.status == 200 and response.read()
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/../pyproject.toml", timeout=10)
    assert missing.value.code == 404


def test_a_typed_question_is_answered_on_the_page_draft_by_draft(
    running: RunningService, tmp_path: Path
):
    driver = chromium(tmp_path)
    try:
        open_page(driver, running)
        assert "steps" in driver.find_element(By.ID, "status").text
        driver.find_element(By.ID, "question").send_keys("what is 17 times 3")
        driver.find_element(By.CSS_SELECTOR, "#ask button").click()
        wait_for(driver, lambda: finished_turns(driver), TURN_S, "an answered turn")
        [turn] = finished_turns(driver)
        assert turn["user"] == "what is 17 times 3"
        assert "51" in turn["answer"], turn
        assert "engine" in turn["meta"] and "confidence 0." in turn["meta"]
        assert not driver.find_element(By.CSS_SELECTOR, ".turn .withheld").is_displayed()
        assert counter(driver, "drafts") == 8  # every step of the 8 reached the page
        assert 1 <= counter(driver, "drawn") <= 8  # drawn at most once a frame
        wait_for(driver, lambda: counter(driver, "audio-samples") > 0, 10, "answer audio")
        canvas = driver.find_element(By.ID, "canvas")
        assert "░" not in canvas.text  # the last draft is whole
        assert float(canvas.value_of_css_property("opacity")) == 1  # and said: not dimmed
    finally:
        driver.quit()


def test_an_answer_too_unsure_to_say_is_shown_dim_as_not_said(
    running: RunningService, tmp_path: Path
):
    driver = chromium(tmp_path)
    try:
        open_page(driver, running)
        # every answer withheld on this connection's session, through the protocol
        driver.execute_script(
            "booth.send({type: 'session.update', session: {unsure_below: 1}})"
        )  # fmt: skip
        driver.find_element(By.ID, "question").send_keys("what is 17 times 3")
        driver.find_element(By.CSS_SELECTOR, "#ask button").click()
        wait_for(driver, lambda: finished_turns(driver), TURN_S, "an answered turn")
        [turn] = finished_turns(driver)
        answer = driver.find_element(By.CSS_SELECTOR, ".turn .answer")
        withheld = driver.find_element(By.CSS_SELECTOR, ".turn .withheld")
        assert turn["answer"] == UNSURE
        assert withheld.is_displayed() and withheld.text.startswith("not said, confidence 0.")
        assert withheld.text.endswith("17 times 3 is 51."), withheld.text
        confidence = withheld.text.split(":")[0].removeprefix("not said, ")
        assert turn["meta"].endswith(f" · {confidence}"), turn
        assert withheld.value_of_css_property("font-style") == "italic"
        assert withheld.value_of_css_property("color") != answer.value_of_css_property("color")
        canvas = driver.find_element(By.ID, "canvas")  # the draft of what was not said: dim
        assert float(canvas.value_of_css_property("opacity")) < 1
    finally:
        driver.quit()


def test_a_spoken_question_from_the_microphone_is_answered_on_the_page(
    running: RunningService, tmp_path: Path, espeak
):
    silence = np.zeros(16000, np.float32)
    # the file plays once from when the fake device opens, which can be well before the
    # page listens on a busy machine: a long lead keeps the question's start
    lead = np.zeros(16000 * 3, np.float32)
    question = np.concatenate([lead, espeak("what is 17 times 3"), silence, silence])
    wav = tmp_path / "question.wav"
    write_wav(wav, question, 16000)
    driver = chromium(tmp_path, microphone=wav)
    try:
        open_page(driver, running)
        driver.find_element(By.ID, "hands-free").click()
        wait_for(driver, lambda: finished_turns(driver), TURN_S, "a spoken turn answered")
        [turn] = finished_turns(driver)
        assert "17" in turn["user"] or "seventeen" in turn["user"].lower()
        assert "51" in turn["answer"], turn
        assert "voice to voice" in turn["meta"]
        assert counter(driver, "drafts") == 8
    finally:
        driver.quit()


def test_push_to_talk_sends_the_held_speech_and_commits_on_release(
    running: RunningService, tmp_path: Path, espeak
):
    silence = np.zeros(8000, np.float32)
    # the file plays once from when the fake device opens, which can be before the page
    # records the held speech: a long lead keeps the question's start
    lead = np.zeros(16000 * 3, np.float32)
    question = np.concatenate([lead, espeak("what is 17 times 3"), silence])
    opening_s = 2.5
    wav = tmp_path / "question.wav"
    write_wav(wav, question, 16000)
    driver = chromium(tmp_path, microphone=wav)
    try:
        open_page(driver, running)
        talk = driver.find_element(By.ID, "talk")
        held_s = len(question) / 16000 + opening_s  # the microphone may take a while to open
        ActionChains(driver).click_and_hold(talk).pause(held_s).perform()
        assert "active" in talk.get_attribute("class")
        ActionChains(driver).release(talk).perform()
        wait_for(driver, lambda: finished_turns(driver), TURN_S, "a held question answered")
        [turn] = finished_turns(driver)
        assert "17" in turn["user"] or "seventeen" in turn["user"].lower()
        assert "51" in turn["answer"], turn
        assert "active" not in talk.get_attribute("class")
    finally:
        driver.quit()
