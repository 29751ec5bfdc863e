"""Helpers for the serving tests: ``vfl serve`` party processes, and waiting for the label party's API."""

import time

import httpx

from vfl_net_helpers import Party


class Services:
    """The ``vfl serve`` processes of one federation, by party name; the label party's HTTP address."""

    def __init__(self, config, folder, url):
        self.config, self.folder, self.url = config, folder, url
        self.parties: dict[str, Party] = {}

    def start(self, name, *extra):
        self.parties[name] = Party(["serve", "--config", self.config, "--role", name,
                                    "--workdir", self.folder / name, *extra], self.folder / "output")
        return self.parties[name]

    def kill(self, name):
        self.parties.pop(name).kill()

    def stop_all(self):
        for party in self.parties.values():
            party.kill()
        self.parties.clear()

    def health(self):
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def wait_healthy(self, timeout=90):
        """Block until ``/health`` says ok (every party linked and ready); the last report otherwise."""
        deadline, report = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                report = self.health()
                if report["status"] == "ok":
                    return report
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        errors = {name: (p._read(p.err_path)[-2000:]) for name, p in self.parties.items()}
        raise AssertionError(f"not healthy within {timeout} s: {report}; stderr: {errors}")

    def wait_for(self, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                report = self.health()
                if predicate(report):
                    return report
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"health never satisfied the condition within {timeout} s: {self.health()}")

    def score(self, ids, **body):
        return httpx.post(f"{self.url}/score", json={"ids": ids, **body}, timeout=30)
