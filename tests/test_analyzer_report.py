"""`dfanalyzer report`: one self-contained HTML page, rendered in headless Chromium.

Checks: the page renders (screenshot), the summary panel is drawn where it should be (its
colours in the top region of the screenshot), the DOM has the summary numbers and every
section, and the page fetches nothing: no http(s) reference in the HTML and no request
initiated by the page in Chromium's net log (a control page with two external references
shows that the net-log check sees such requests).
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import DATA, pythonpath_env

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian package chromium not installed (scripts/system_deps.sh test)"
)

# Headless, offline: the proxy is a dead port, browser background services are off.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--window-size=1200,900",
    "--proxy-server=127.0.0.1:9",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--disable-extensions",
]


def chromium(tmp_path, *args):
    prof = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    out = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={prof}", *args], capture_output=True, text=True, timeout=120
    )
    return out


def page_requests(netlog):
    """Non-file URLs of requests the page itself started (the browser's own service requests have
    the initiator "not an origin"; the page's own file:// load is not a fetch)."""
    d = json.loads(netlog.read_text())
    start = d["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = {
        e["params"].get("url") or ""
        for e in d["events"]
        if e["type"] == start and e.get("params", {}).get("initiator") != "not an origin"
    }
    return sorted(u for u in urls if u and not u.startswith("file:"))


@pytest.fixture(scope="module")
def report(tmp_path_factory, dask_client):
    d = tmp_path_factory.mktemp("report")
    for i in range(3):
        name = f"cm1-DEFAULT-353778{i}-preload.pfw.gz"
        shutil.copy(os.path.join(DATA, "dftracer-v1.0.5-cm1", name), d / name)
    out = d / "report.html"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dfanalyzer.cli",
            "report",
            str(d / "*.pfw.gz"),
            "-o",
            str(out),
            "--workers",
            "1",
            "--bins",
            "20",
        ],
        capture_output=True,
        text=True,
        env=pythonpath_env(),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    from dfanalyzer import DFAnalyzer

    with DFAnalyzer(str(d / "*.pfw.gz"), client=dask_client) as an:
        return out, an.summary(show=False).to_dict()


def test_report_is_self_contained(report):
    path, summary = report
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    # no external reference of any kind: every src is an embedded PNG, no href, no script, no url()
    srcs = re.findall(r'\bsrc="([^"]*)"', text)
    assert len(srcs) >= 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r"\bhref=", text) and "<script" not in text.lower() and "url(" not in text
    visible = re.sub(r'src="data:[^"]*"', "", text)
    assert not re.search(r"https?://", visible)
    for sec in ("summary", "insights", "layers", "functions", "files", "processes", "plots"):
        assert f'<section id="{sec}">' in text


def test_report_renders_in_chromium(report, tmp_path):
    from PIL import Image

    path, summary = report
    shot = tmp_path / "shot.png"
    res = chromium(tmp_path, f"--screenshot={shot}", path.as_uri())
    assert shot.exists(), res.stderr
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 900)
    px = img.load()

    def count(region, rgb, tol=6):
        x0, y0, x1, y1 = region
        return sum(
            1
            for x in range(x0, x1, 2)
            for y in range(y0, y1, 2)
            if all(abs(a - b) <= tol for a, b in zip(px[x, y], rgb))
        )

    top = (0, 0, 1200, 420)
    # the header band and the summary's stat boxes (#1f4e79) and the summary panel (#e8f1fb)
    assert count(top, (0x1F, 0x4E, 0x79)) > 2000
    assert count(top, (0xE8, 0xF1, 0xFB)) > 2000
    # it is not blank: many distinct colours (text, borders, panels)
    assert len(img.crop(top).getcolors(1 << 24)) > 50
    # the DOM Chromium builds holds the summary's exact numbers
    dom = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    m = re.search(r'<section id="summary">(.*?)</section>', dom, re.S)
    assert m, dom[:500]
    stats = dict((v, k) for k, v in re.findall(r"<b>([^<]*)</b><span>([^<]*)</span>", m.group(1)))
    assert stats["events"] == f"{summary['events']:,}" and stats["processes"] == f"{summary['processes']:,}"
    assert stats["files"] == f"{summary['files']:,}"
    assert 'id="insights"' in dom and "<img" in dom


def test_report_fetches_nothing(report, tmp_path):
    path, _ = report
    net = tmp_path / "net.json"
    chromium(tmp_path, f"--log-net-log={net}", "--dump-dom", path.as_uri())
    assert page_requests(net) == []
    # control: the same check sees a page's external image and stylesheet
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<html><body><img src="http://127.0.0.1:9/x.png">'
        '<link rel="stylesheet" href="https://example.invalid/a.css"></body></html>'
    )
    net2 = tmp_path / "net2.json"
    chromium(tmp_path, f"--log-net-log={net2}", "--dump-dom", bad.as_uri())
    assert page_requests(net2) == ["http://127.0.0.1:9/x.png", "https://example.invalid/a.css"]
