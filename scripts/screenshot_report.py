"""Render a page (report.html, the compare page, a failure page) in headless Chromium (Debian's
`chromium` package): save a full-page PNG screenshot and report what overflows the window's width.

    python scripts/screenshot_report.py runs/<run>/report.html report.png [--width 1280]

The page itself needs no network and no JavaScript; Chromium runs with the network closed. To
measure the layout, a scratch copy of the page gets one script that writes the page's size and
every element wider than the window into the document title, read back with --dump-dom (the page
a person opens is never changed). Exit 1 when an element overflows, 2 when Chromium is missing.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--hide-scrollbars"]
PROBE = """<script>
(function(){var w=innerWidth,wide=[];
document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();
if(r.right>w+0.5&&wide.length<20)wide.push(e.tagName.toLowerCase()+(e.className?'.'+e.className:'')+' '+Math.round(r.right));});
function box(e){if(!e)return null;var r=e.getBoundingClientRect();return [Math.round(r.top+scrollY),Math.round(r.bottom+scrollY)];}
var q=null;document.querySelectorAll('h2').forEach(function(h){if(!q&&h.textContent.indexOf('Every question')==0)q=h;});
var qt=q&&q.nextElementSibling;while(qt&&qt.tagName!='TABLE')qt=qt.nextElementSibling;
document.title=JSON.stringify({width:document.documentElement.scrollWidth,height:document.documentElement.scrollHeight,window:w,wide:wide,
verdict:box(document.querySelector('.verdict')),demo:box(document.querySelector('.demo')),
questions:q&&qt?box(qt)[1]-box(q)[0]:0});})();
</script>"""


def _browser() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    return browser


def _chromium(args: list, profile: str) -> subprocess.CompletedProcess:
    return subprocess.run([_browser(), *FLAGS, f"--user-data-dir={profile}", *args], check=True,
                          capture_output=True, text=True, timeout=120)


def measure(page: Path, width: int = 1280) -> dict:
    """{width, height, window, wide, verdict, demo, questions}: the page's scroll size at this window width,
    the elements whose right edge passes the window (at most 20), the [top, bottom] of the first verdict
    line and demo banner (null when there is none) and the height of the "Every question" heading and
    its table (0 when there is none)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "probe.html"
        copy.write_text(Path(page).read_text(encoding="utf-8").replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
        done = _chromium(["--run-all-compositor-stages-before-draw", "--virtual-time-budget=2000",
                          f"--window-size={width},900", "--dump-dom", copy.as_uri()], str(Path(scratch) / "profile"))
    title = re.search(r"<title>(.*?)</title>", done.stdout, re.S)
    if title is None:
        raise RuntimeError("chromium printed no page title; the page could not be measured")
    import html

    return json.loads(html.unescape(title.group(1)))


def screenshot(page: Path, png: Path, width: int = 1280, height: int | None = None) -> dict:
    """The whole page (its measured height) unless a height is given; returns the measurement."""
    size = measure(page, width)
    with tempfile.TemporaryDirectory() as profile:
        _chromium([f"--window-size={width},{height or size['height']}", f"--screenshot={Path(png).resolve()}",
                   "--disable-javascript", Path(page).resolve().as_uri()], profile)
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, help="window height (default: the whole page)")
    args = parser.parse_args()
    try:
        size = screenshot(args.page, args.png, args.width, args.height)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not args.png.is_file():
        print(f"error: chromium wrote no screenshot to {args.png}", file=sys.stderr)
        return 1
    print(f"screenshot: {args.png} ({args.png.stat().st_size} bytes), page {size['width']}x{size['height']} px "
          f"at a {size['window']} px window")
    if size["wide"]:
        print(f"overflow: {len(size['wide'])} element(s) pass the window's width: {'; '.join(size['wide'])}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
