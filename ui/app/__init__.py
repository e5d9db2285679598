"""The Textual terminal app: ``quicksilver`` on a terminal."""

from quicksilver.ui.app.app import QuicksilverApp, run_app

__all__ = ["QuicksilverApp", "run_app"]
