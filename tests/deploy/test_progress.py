"""The progress lines of a party (vfl.deploy.progress): on a terminal only, unless forced."""

import io

from vfl.deploy.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal_unless_forced():
    piped, terminal, forced = io.StringIO(), _Terminal(), io.StringIO()
    for stream, enabled in ((piped, None), (terminal, None), (forced, True)):
        shown = Progress("bank", enabled, stream)
        shown.waiting(["C", "telco"])
        shown.model(3)
        shown.epoch(0, 0.5)
        shown.epoch(1, 0.25)
        shown.close()
    assert piped.getvalue() == ""
    for stream in (terminal, forced):
        text = stream.getvalue()
        assert text.startswith("party bank: waiting for C, telco…\n")
        assert "2/3" in text and "loss=0.250000" in text
    assert Progress("bank", False, _Terminal()).enabled is False
