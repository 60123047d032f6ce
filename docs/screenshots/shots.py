"""What the screenshot scripts share: a free loopback port, waiting for a server, a headless Chromium screenshot."""

import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, seconds: int = 120) -> None:
    """Until ``url`` answers (or ``seconds`` pass: the screenshot then shows what is wrong)."""
    for _ in range(seconds):
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(1)


def screenshot(url: str, out: Path, size: str = "1500,900") -> None:
    """Debian's chromium, headless, after 30 s of virtual time (the UIs are React apps that fetch their data)."""
    subprocess.run(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={out}",
            f"--window-size={size}",
            "--virtual-time-budget=30000",
            url,
        ],
        check=True,
        timeout=180,
        capture_output=True,
    )
