"""The Textual terminal app: a face of the session core, drawn from its events.

The screen paints at once; the session is built in a worker thread while a start-up
panel shows each part loading. Then the session runs on the app's own asyncio loop, so
its events reach the widgets directly (every subscriber call is cheap: a widget
update), and keys become session commands. The app never touches the engine or the
audio devices itself.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from quicksilver.assistant.commands import (
    CancelTurn,
    Command,
    Mute,
    PushToTalkDown,
    PushToTalkUp,
    ResetConversation,
    SubmitText,
    Unmute,
)
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    AudioLevel,
    ConversationReset,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    Listening,
    Muted,
    PartialTranscript,
    SpeakingFinished,
    SpeakingStarted,
    SpeechStarted,
    TurnMetrics,
)
from quicksilver.assistant.wiring import Progress, Wiring
from quicksilver.ui.app.widgets import Conversation, DenoiseCanvas, StartupPanel, StatusBar
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

EXAMPLES = (
    "what is 17 times 3",
    "how do you spell apple",
    "which is bigger, 74 or 47",
    "how many centimeters are in 2 meters",
    "what day is it today",
    "what can you do",
)
HINT_EVERY_S = 5.0


class HelpScreen(ModalScreen[None]):
    """The keys, and what a person can say; any key closes it."""

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        lines = [f"  {key:<8} {description}" for key, description in self.keys]
        text = "\n".join(
            [
                "Quicksilver: ask out loud, or type after /.",
                "",
                *lines,
                "",
                "It answers arithmetic, spelling and letters, comparisons, unit",
                "conversions, the date and small talk. Any key closes this.",
            ]
        )
        yield Static(text, id="help")

    def on_key(self) -> None:
        self.dismiss()


class QuicksilverApp(App[int]):
    """``quicksilver``'s screen: the conversation, the answer forming, the status."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "Quicksilver"
    AUTO_FOCUS = None  # the keys work from the start; / goes to the question box
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_input", "type", key_display="/"),
        Binding("space", "talk", "talk"),
        Binding("m", "mute", "mute"),
        Binding("r", "reasoning", "reasoning"),
        Binding("escape", "cancel", "cancel", key_display="esc"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "stop", "quit", show=False, priority=True),
    ]
    BOOTH_HIDDEN: ClassVar[frozenset[str]] = frozenset({"mute", "reasoning", "quit"})

    def __init__(
        self,
        settings: Settings,
        wiring: Wiring | None = None,
        *,
        booth: bool = False,
        build: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.wiring = wiring or Wiring()
        self.booth = booth
        self._build = build
        self.session = None
        self.talking = False
        self.last_activity = time.monotonic()
        self._hint = 0

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield StatusBar(self._parts(self.wiring), self.wiring.microphone, id="status")
        with Vertical(id="main"):
            yield StartupPanel(id="startup")
            yield Conversation(id="conversation")
            yield DenoiseCanvas(id="canvas")
        yield Input(placeholder=self._placeholder(), id="question")
        yield Footer()

    def on_mount(self) -> None:
        if self.booth:
            self.add_class("booth")
            self.set_interval(HINT_EVERY_S, self._rotate_hint)
            self.set_interval(1.0, self._reset_when_idle)
        self.query_one(StatusBar).set_state("starting")
        self.start_session(self.wiring)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Booth mode has no settings keys (and no quit key; Ctrl-C still quits)."""
        return not (self.booth and action in self.BOOTH_HIDDEN)

    def _parts(self, wiring: Wiring) -> str:
        """The model, the voice and the devices in use, for the status bar."""
        settings = self.settings
        parts = [settings.model]
        if wiring.output != "none":
            parts += [settings.voice, f"speaker {settings.output_device or 'default'}"]
        if wiring.microphone:
            parts.append(f"mic {settings.input_device or 'default'}")
        return " · ".join(parts)

    def _placeholder(self) -> str:
        example = EXAMPLES[self._hint % len(EXAMPLES)]
        return f'press / and type a question, e.g. "{example}"'

    # ------------------------------------------------------------------ the session

    @work(thread=True, exclusive=True, group="startup")
    def start_session(self, wiring: Wiring) -> None:
        """Build the session off the screen's loop; each part's progress is drawn."""
        from quicksilver.assistant import StartupError, build_session

        build = self._build or build_session
        panel, status = self.query_one(StartupPanel), self.query_one(StatusBar)

        def progress(update: Progress) -> None:
            self._from_thread(panel.show, update)
            if update.state == "fallback":  # said in the conversation too: it stays
                self._from_thread(self._note, update.detail.capitalize(), "error")

        try:
            session = build(self.settings, wiring, progress=progress)
        except StartupError as error:
            if error.component == "microphone" and wiring.microphone:
                note = f"No microphone ({error}); type your questions after /."
                self._from_thread(self._note, note, "error")
                self.start_session(dataclasses.replace(wiring, microphone=False, speech=False))
                return
            self._from_thread(self._note, f"Quicksilver cannot start: {error}", "error")
            self._from_thread(status.set_state, "stopped")
            return
        if not self._from_thread(self._session_ready, session, wiring):
            session.close()  # the user quit while it was loading

    def _from_thread(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run ``callback`` on the screen's loop; False when the app has already gone."""
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app is no longer running
            return False
        return True

    def _session_ready(self, session, wiring: Wiring) -> None:
        self.session = session
        self.wiring = dataclasses.replace(
            wiring, output="none" if session.speak is None else wiring.output
        )
        self.add_class("ready")
        self.query_one(StatusBar).set_parts(self._parts(self.wiring), wiring.microphone)
        session.subscribe(self.show_event)
        self.run_worker(self._converse(session), exclusive=True, group="session")

    async def _converse(self, session) -> None:
        from quicksilver.audio.devices import AudioDeviceError

        try:
            await session.run()
        except AudioDeviceError:
            # the Error event has said what happened; carry on with typed questions
            session.close()
            typed = dataclasses.replace(self.wiring, microphone=False, speech=False)
            self.start_session(typed)

    def send(self, command: Command) -> None:
        self.last_activity = time.monotonic()
        if self.session is not None:
            self.session.send(command)

    # ------------------------------------------------------------------ events

    def show_event(self, event: Event) -> None:
        """Draw one event of the session (called on this loop, for every event)."""
        status, conversation = self.query_one(StatusBar), self.query_one(Conversation)
        canvas = self.query_one(DenoiseCanvas)
        if not isinstance(event, AudioLevel | Listening):
            self.last_activity = time.monotonic()
        if isinstance(event, AudioLevel):
            status.set_level(event)
        elif isinstance(event, Listening):
            status.set_state("muted" if self.session.muted else "listening")
        elif isinstance(event, SpeechStarted):
            status.set_state("hearing you")
        elif isinstance(event, PartialTranscript):
            conversation.partial(event.text)
        elif isinstance(event, FinalTranscript):
            conversation.question(event.text)
            status.set_state("thinking")
        elif isinstance(event, Denoise):
            canvas.add_step(event)
        elif isinstance(event, AnswerReady):
            canvas.add_answer(event)
            status.set_confidence(event)
        elif isinstance(event, SpeakingStarted):
            status.set_state("speaking")
        elif isinstance(event, SpeakingFinished):
            status.set_state("listening")
        elif isinstance(event, Interrupted):
            canvas.clear()
            conversation.interrupted(event.turn, event.spoken)
        elif isinstance(event, TurnMetrics):
            status.set_latency(event)
        elif isinstance(event, Muted):
            status.set_state("muted" if event.muted else "listening")
        elif isinstance(event, ConversationReset):
            canvas.clear()
            conversation.reset()
        elif isinstance(event, Error):
            hint = f" ({event.hint})" if event.hint else ""
            self._note(f"{event.stage}: {event.message}{hint}", "error")

    def on_denoise_canvas_settled(self, message: DenoiseCanvas.Settled) -> None:
        answer = message.answer
        self.query_one(Conversation).answer(
            answer.turn, answer.text, answer.thinking, answer.withheld, answer.confidence
        )

    def _note(self, text: str, kind: str = "note") -> None:
        self.query_one(Conversation).note(text, kind)

    # ------------------------------------------------------------------ keys

    def on_input_submitted(self, message: Input.Submitted) -> None:
        question = message.value.strip()
        message.input.clear()
        if question:
            self.send(SubmitText(question))

    def action_focus_input(self) -> None:
        self.query_one(Input).focus()

    def action_talk(self) -> None:
        """Push-to-talk, as a toggle (terminals report no key release)."""
        if self.session is None or not self.wiring.microphone:
            self._note("There is no microphone: type your question after /.")
            return
        self.talking = not self.talking
        self.send(PushToTalkDown() if self.talking else PushToTalkUp())
        state = "hearing you (space ends)" if self.talking else "thinking"
        self.query_one(StatusBar).set_state(state)

    def action_mute(self) -> None:
        if self.session is not None:
            self.send(Unmute() if self.session.muted else Mute())

    def action_reasoning(self) -> None:
        self.query_one(DenoiseCanvas).toggle_thinking()

    def action_cancel(self) -> None:
        self.query_one(Input).blur()
        self.query_one(DenoiseCanvas).clear()
        self.send(CancelTurn())

    def action_help(self) -> None:
        keys = [
            (binding.key_display or binding.key, binding.description)
            for binding in self.BINDINGS
            if isinstance(binding, Binding)
            and binding.show
            and self.check_action(binding.action, ())
        ]
        self.push_screen(HelpScreen(keys))

    async def action_stop(self) -> None:
        """Ctrl-C: quit, in booth mode too."""
        await self.action_quit()

    async def action_quit(self) -> None:
        """Stop the session (its log complete) and leave."""
        if self.session is not None:
            self.session.stop()
            await self.workers.wait_for_complete()
            self.session.close()
        self.exit(0)

    # ------------------------------------------------------------------ booth

    def _rotate_hint(self) -> None:
        self._hint += 1
        self.query_one(Input).placeholder = self._placeholder()

    def _reset_when_idle(self) -> None:
        idle = time.monotonic() - self.last_activity
        if idle >= self.settings.booth_reset_s and self.query_one(Conversation).children:
            self.send(ResetConversation())


def run_app(settings: Settings, wiring: Wiring, booth: bool = False) -> int:
    """Run the app until the user quits; its exit status."""
    return QuicksilverApp(settings, wiring, booth=booth).run() or 0
