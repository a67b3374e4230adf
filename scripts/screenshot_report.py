"""Render a report.html in headless Chromium (Debian's `chromium` package) and save a PNG screenshot.

    python scripts/screenshot_report.py runs/<run>/report.html report.png [--width 1280 --height 2400]

The page needs no network and no JavaScript; Chromium runs with both disabled, as a reviewer's
locked-down viewer might. Exit 2 when Chromium is not installed (`apt-get install chromium`).
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2400) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-javascript",
                        f"--user-data-dir={profile}",
                        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # no network
                        f"--window-size={width},{height}", f"--screenshot={png.resolve()}",
                        page.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args()
    try:
        screenshot(args.page, args.png, args.width, args.height)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not args.png.is_file():
        print(f"error: chromium wrote no screenshot to {args.png}", file=sys.stderr)
        return 1
    print(f"screenshot: {args.png} ({args.png.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
